"""Fetch objects *through the user*: 404 when they are not the user's.

Every view, API endpoint and command that takes a study slug or an item id
from a user goes through these helpers, so an unscoped lookup is never the
easy path (Zulip's `access_*` pattern).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from .models import Item, Study, StudyMember

Researcher = StudyMember.Role.RESEARCHER
Annotator = StudyMember.Role.ANNOTATOR


def studies_for(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Study]:
    """The studies this user may see at all: staff see every study."""
    if not user.is_authenticated:
        return Study.objects.none()
    if user.is_staff:
        return Study.objects.all()
    return Study.objects.filter(members__user=user).distinct()


def role_in(user: AbstractBaseUser | AnonymousUser, study: Study) -> str | None:
    """The user's role in the study; staff count as researchers."""
    if not user.is_authenticated:
        return None
    if user.is_staff:
        return Researcher
    return StudyMember.objects.filter(study=study, user=user).values_list("role", flat=True).first()


def access_study(user: AbstractBaseUser | AnonymousUser, slug: str, *, role: str | None = None) -> Study:
    """The study with this slug if the user is in it (with `role`, when given).

    Not a member: 404, so outsiders cannot even learn that the study exists.
    A member without the role: 403, which tells them why.
    """
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        raise Http404("No such study.")
    actual = role_in(user, study)
    if actual is None:
        raise Http404("No such study.")
    if role is not None and actual != role:
        raise PermissionDenied(f"This page is for the study's {role}s.")
    study.user_role = actual  # type: ignore[attr-defined]
    return study


def access_item(
    user: AbstractBaseUser | AnonymousUser, slug: str, external_id: str, *, role: str | None = Researcher
) -> Item:
    """An item of a study the user may see, by its external id."""
    study = access_study(user, slug, role=role)
    item = Item.objects.filter(study=study, external_id=external_id).first()
    if item is None:
        raise Http404("No such item.")
    return item
