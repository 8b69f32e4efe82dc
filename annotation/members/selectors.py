"""Reads of the members page and API: members with what they did, the study's invites, and the
members the adjudication page offers as adjudicators."""

from __future__ import annotations

from django.db.models import Count, Exists, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from annotation.models import AccountOrigin, Annotation, Assignment, Invite, Study, StudyMember


def members_to_manage(study: Study) -> QuerySet[StudyMember]:
    """Every membership (active first, researchers first), with `annotations` (their answers) and
    `was_given_items` (whether "remove" deactivates them rather than deleting: see members/membership.py)
    and `made_here` (whether this study created the account, which a password reset requires)."""
    done = (
        Annotation.objects.filter(assignment__study=study, assignment__annotator=OuterRef("user_id"))
        .order_by()
        .values("assignment__annotator")
        .annotate(n=Count("pk"))
        .values("n")
    )
    given = Assignment.objects.filter(study=study, annotator=OuterRef("user_id"))
    return (
        StudyMember.objects.filter(study=study)
        .select_related("user")
        .annotate(
            annotations=Coalesce(Subquery(done), 0),
            was_given_items=Exists(given),
            made_here=Exists(AccountOrigin.objects.filter(user=OuterRef("user_id"), study=study)),
        )
        .order_by("-is_active", "-role", "is_external", "pseudonym")
    )


def study_invites(study: Study) -> QuerySet[Invite]:
    """The study's invites, newest first, with who created them."""
    return Invite.objects.filter(study=study).select_related("created_by")
