"""Composable DRF permission classes (doccano style).

They answer "may this user do this to this study?"; the objects themselves are
still fetched through `access.py`, which 404s for outsiders.
"""

from __future__ import annotations

from typing import Any, cast

from django.http import QueryDict
from django.utils.datastructures import MultiValueDict
from rest_framework.exceptions import UnsupportedMediaType
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


class AccessBeforeParsing:
    """Mixin for views that parse only some media types (the multipart import routes): a body of
    another type is refused with 415 only after authentication and permissions, so that an
    outsider gets 404 and an annotator 403 whatever they sent, by session as by token.

    Why it is needed: session authentication's CSRF check reads `request.POST`, which makes DRF
    parse the body, and a media type the view cannot parse was a 415 before the permission
    check ran. Such a body holds no form field for the CSRF check anyway (its token comes in
    the X-CSRFToken header), so the check is given empty data; a form body is parsed as before.
    """

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        unsupported = _unparsable_body(request)
        if unsupported:
            request._data = QueryDict("")  # type: ignore[attr-defined]  # what the CSRF check reads: nothing
            request._files = MultiValueDict()  # type: ignore[attr-defined]
            request._full_data = request._data  # type: ignore[attr-defined]
        super().initial(request, *args, **kwargs)  # type: ignore[misc]  # APIView.initial: auth, permissions
        if unsupported:
            raise UnsupportedMediaType(request.content_type)


def _unparsable_body(request: Request) -> bool:
    """A non-empty body of a media type none of the view's parsers takes (DRF would answer 415)."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if not request.content_type or length <= 0:
        return False
    negotiator, parsers = request.negotiator, request.parsers
    return negotiator is not None and negotiator.select_parser(request, parsers or []) is None


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
