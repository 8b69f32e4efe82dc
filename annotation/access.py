"""Fetch objects *through the user*: 404 when they are not the user's.

Every view, API endpoint and command that takes a study slug or an item id
from a user goes through these helpers, so an unscoped lookup is never the
easy path (Zulip's `access_*` pattern).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from annotation.lib.rawsql import ModelRows, fetch_one, is_stored_pk, names
from annotation.models import Assignment, ExportJob, Invite, Item, Study, StudyMember

Researcher = StudyMember.Role.RESEARCHER
Annotator = StudyMember.Role.ANNOTATOR
STUDY_ROWS = ModelRows(Study, alias="s")
ASSIGNMENT_ROWS = ModelRows(Assignment, alias="a")


def studies_for(user: User | AnonymousUser) -> QuerySet[Study]:
    """The studies this user may see at all: staff see every study."""
    if not user.is_authenticated:
        return Study.objects.none()
    if user.is_staff:
        return Study.objects.all()
    return Study.objects.filter(members__user=user, members__is_active=True).distinct()


def may_create_studies(user: User | AnonymousUser) -> bool:
    """Whether the user may create studies (and so becomes their researcher).

    Staff; users granted `annotation.add_study` (directly or through a group
    such as "researchers"); anyone who is already a researcher of a study; and,
    with CLAIMLAB_ANYONE_CAN_CREATE_STUDIES, every logged-in user.
    """
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_staff or settings.ANYONE_CAN_CREATE_STUDIES or user.has_perm("annotation.add_study"):
        return True
    return StudyMember.objects.filter(user=user, role=Researcher, is_external=False).exists()


def _member_role_sql(study_ref: str) -> str:
    """A scalar subquery: the user's (first %s parameter) role in the study `study_ref` names.

    A deactivated membership is no membership: its holder is an outsider (404) like anyone else.
    """
    M = names(StudyMember)
    return (
        f"(SELECT m.{M.role} FROM {M.table} m WHERE m.{M.study} = {study_ref} AND m.{M.user} = %s "
        f"AND m.{M.is_active} LIMIT 1)"
    )


def _role(user: User | AnonymousUser, member_role: str | None) -> str | None:
    if not user.is_authenticated:
        return None
    return Researcher if user.is_staff else member_role


def access_study(user: User | AnonymousUser, slug: str, *, role: str | None = None) -> Study:
    """The study with this slug if the user is in it (with `role`, when given).

    Not a member: 404, so outsiders cannot even learn that the study exists.
    A member without the role: 403, which tells them why.
    """
    # Hand-written SQL: every study page and API request runs this (annotation/lib/rawsql.py).
    S = names(Study)
    row = fetch_one(
        f"SELECT {STUDY_ROWS.select}, {_member_role_sql(f's.{S.id}')} FROM {S.table} s WHERE s.{S.slug} = %s",
        (user.pk, slug),
    )
    if row is None:
        raise Http404("No such study.")
    study = STUDY_ROWS.instance(row)
    study.member_role = row[-1]
    actual = _role(user, study.member_role)
    if actual is None:
        raise Http404("No such study.")
    if role is not None and actual != role:
        raise PermissionDenied(f"This page is for the study's {role}s.")
    study.user_role = actual
    return study


def access_item(user: User | AnonymousUser, slug: str, external_id: str, *, role: str | None = Researcher) -> Item:
    """An item of a study the user may see, by its external id."""
    study = access_study(user, slug, role=role)
    item = Item.objects.filter(study=study, external_id=external_id).first()
    if item is None:
        raise Http404("No such item.")
    return item


def access_assignment(user: User | AnonymousUser, assignment_id: int) -> Assignment:
    """An assignment of a study the user is a member of (staff: any), with its study.

    404 for outsiders, like every other route of a study they are not in.
    Whether the assignment is the user's own to answer is the assignment
    service's question (LeaseLost, HTTP 409), not this helper's.
    """
    if not is_stored_pk(Assignment, assignment_id):
        raise Http404("No such assignment.")
    A, S = names(Assignment), names(Study)
    row = fetch_one(
        f"SELECT {ASSIGNMENT_ROWS.select}, {STUDY_ROWS.select}, {_member_role_sql(f'a.{A.study}')} "
        f"FROM {A.table} a JOIN {S.table} s ON s.{S.id} = a.{A.study} WHERE a.{A.id} = %s",
        (user.pk, assignment_id),
    )
    if row is None:
        raise Http404("No such assignment.")
    assignment = ASSIGNMENT_ROWS.instance(row)
    assignment.study = STUDY_ROWS.instance(row, ASSIGNMENT_ROWS.width)
    assignment.member_role = row[-1]
    role = _role(user, assignment.member_role)
    if role is None:
        raise Http404("No such assignment.")
    assignment.study.user_role = role
    return assignment


def access_export_job(user: User | AnonymousUser, slug: str, job_id: int) -> ExportJob:
    """One of a study's export jobs, for the study's researchers (404 for outsiders, 403 for annotators)."""
    study = access_study(user, slug, role=Researcher)
    job = ExportJob.objects.filter(study=study, pk=job_id).first()
    if job is None:
        raise Http404("No such export.")
    job.study = study
    return job


def access_study_to_manage(user: User | AnonymousUser, slug: str) -> Study:
    """The study, for someone who may manage its members and invites: its researchers and staff.

    Everyone else, annotators included, gets 404: who is in a study is not theirs to learn.
    """
    study = access_study(user, slug)
    if study.user_role != Researcher:
        raise Http404("No such study.")
    return study


def access_member(user: User | AnonymousUser, slug: str, member_id: int) -> StudyMember:
    """A membership of a study the user manages, by its id (404 otherwise)."""
    study = access_study_to_manage(user, slug)
    member = StudyMember.objects.select_related("user").filter(study=study, pk=member_id).first()
    if member is None:
        raise Http404("No such member.")
    member.study = study
    return member


def access_invite(user: User | AnonymousUser, slug: str, invite_id: int) -> Invite:
    """An invite of a study the user manages, by its id (404 otherwise)."""
    study = access_study_to_manage(user, slug)
    invite = Invite.objects.filter(study=study, pk=invite_id).first()
    if invite is None:
        raise Http404("No such invite.")
    invite.study = study
    return invite


def may_adjudicate(user: User | AnonymousUser, study: Study) -> bool:
    """Researchers (and staff) and members given the adjudicator flag; `study` came through access_study."""
    if study.user_role == Researcher:
        return True
    if not user.is_authenticated:
        return False
    return StudyMember.objects.filter(study=study, user_id=user.pk, is_active=True, can_adjudicate=True).exists()


def access_study_to_adjudicate(user: User | AnonymousUser, slug: str) -> Study:
    """The study, for someone who may adjudicate it: 404 for outsiders, 403 for annotators without the flag."""
    study = access_study(user, slug)
    if not may_adjudicate(user, study):
        raise PermissionDenied("This page is for the study's adjudicators.")
    return study


def access_item_to_adjudicate(user: User | AnonymousUser, slug: str, external_id: str) -> Item:
    """An item of a study the user may adjudicate, by its external id (404 when there is none)."""
    study = access_study_to_adjudicate(user, slug)
    item = Item.objects.filter(study=study, external_id=external_id).first()
    if item is None:
        raise Http404("No such item.")
    item.study = study
    return item
