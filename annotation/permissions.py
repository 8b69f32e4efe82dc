"""Composable DRF permission classes (doccano style).

They answer "may this user do this to this study?"; the objects themselves are
still fetched through `access.py`, which 404s for outsiders.
"""

from __future__ import annotations

from typing import cast

from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from annotation.access import Researcher, access_assignment, access_study, access_study_to_manage
from annotation.models import Assignment, Study


class StudyScoped:
    """Mixin for views behind IsStudyMember or IsStudyResearcher: the
    permission check sets `study` (with `user_role`) before the handler runs."""

    study: Study


class AssignmentScoped(StudyScoped):
    """Mixin for views behind IsAssignmentStudyMember: the permission check sets
    `assignment` and its `study` before the handler runs."""

    assignment: Assignment


class IsStudyMember(BasePermission):
    """Any member of the study named by the `slug` URL argument (404 for others)."""

    role: str | None = None

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        slug = view.kwargs.get("slug")
        if slug is None:
            return True
        # The guarded view declares `study` by inheriting StudyScoped.
        cast(StudyScoped, view).study = access_study(request.user, slug, role=self.role)
        return True


class IsStudyResearcher(IsStudyMember):
    """Researchers (and staff) of the study; other members get 403."""

    role = Researcher


class IsStudyManager(BasePermission):
    """Those who manage the study's members and invites: its researchers and staff.

    Everyone else, the study's annotators included, gets 404 (access_study_to_manage).
    """

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        slug = view.kwargs.get("slug")
        if slug is None:
            return True
        cast(StudyScoped, view).study = access_study_to_manage(request.user, slug)
        return True


class IsAssignmentStudyMember(BasePermission):
    """Any member of the study that the `assignment_id` URL argument belongs to (404 for others).

    Sets `view.assignment` and `view.study`; whether the assignment is the
    user's own is left to the assignment service (409 when it is not).
    """

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        assignment_id = view.kwargs.get("assignment_id")
        if assignment_id is None:
            return True
        # The guarded view declares `assignment` and `study` by inheriting AssignmentScoped.
        scoped = cast(AssignmentScoped, view)
        scoped.assignment = access_assignment(request.user, assignment_id)
        scoped.study = scoped.assignment.study
        return True
