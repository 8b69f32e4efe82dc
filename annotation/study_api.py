"""API that makes and runs studies: create, update (PATCH), change status, duplicate.

Same rules as the pages (services.studies decides); researchers of the study
(and staff) only, others get 404 like on every study route.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from . import selectors
from .access import Researcher, access_study, may_create_studies
from .api import StudyDetail, StudyList
from .api_errors import bad_request
from .http import logged_in_user
from .models import Study
from .serializers import StudyDetailSerializer
from .services import ServiceError
from .services.studies import change_status, create_study, duplicate_study, update_study
from .study_serializers import (
    StudyCreateSerializer,
    StudyDuplicateSerializer,
    StudySettingsSerializer,
    StudyStatusSerializer,
)

REFUSED = OpenApiResponse(description="Refused: `detail` says why (nothing was changed).")


def _detail(request: Request, study: Study) -> dict[str, Any]:
    study = access_study(request.user, study.slug)  # with the caller's role, as GET shows it
    study.counts = selectors.study_counts(study)
    study.domains = selectors.items_by_domain(study)
    return StudyDetailSerializer(study).data


class StudyListCreate(StudyList):
    """The studies you are a member of (GET); create a draft study, of which you become the researcher (POST)."""

    @extend_schema(request=StudyCreateSerializer, responses={201: StudyDetailSerializer, 400: REFUSED})
    def post(self, request: Request) -> Response:
        user = logged_in_user(request)
        if not may_create_studies(user):
            raise PermissionDenied("creating studies is for researchers and staff (permission annotation.add_study)")
        form = StudyCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        values = dict(form.validated_data)
        try:
            study = create_study(**values, status=Study.Status.DRAFT, created_by=user)
        except ServiceError as exc:
            return bad_request(str(exc))
        return Response(_detail(request, study), status=status.HTTP_201_CREATED)


class StudyDetailUpdate(StudyDetail):
    """One study (GET); change its settings (PATCH, researchers): the same rules as the settings page."""

    @extend_schema(request=StudySettingsSerializer(partial=True), responses={200: StudyDetailSerializer, 400: REFUSED})
    def patch(self, request: Request, slug: str) -> Response:
        study = access_study(request.user, slug, role=Researcher)
        form = StudySettingsSerializer(data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        changes = {name: value for name, value in form.validated_data.items() if name in request.data}
        try:
            update_study(study=study, changes=changes, user=logged_in_user(request))
        except ServiceError as exc:
            return bad_request(str(exc))
        return Response(_detail(request, study))


class StudyStatusChange(APIView):
    """Move the study along its lifecycle (researchers); a move it does not allow is a 400 naming the allowed ones."""

    @extend_schema(request=StudyStatusSerializer, responses={200: StudyDetailSerializer, 400: REFUSED})
    def post(self, request: Request, slug: str) -> Response:
        study = access_study(request.user, slug, role=Researcher)
        form = StudyStatusSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            change_status(study=study, status=form.validated_data["status"], user=logged_in_user(request))
        except ServiceError as exc:
            return bad_request(str(exc))
        return Response(_detail(request, study))


class StudyDuplicate(APIView):
    """A draft copy of the study (settings, instructions, optionally items); you become its researcher."""

    @extend_schema(request=StudyDuplicateSerializer, responses={201: StudyDetailSerializer, 400: REFUSED})
    def post(self, request: Request, slug: str) -> Response:
        study = access_study(request.user, slug, role=Researcher)
        form = StudyDuplicateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            copy = duplicate_study(
                study=study,
                slug=form.validated_data["slug"],
                name=form.validated_data.get("name") or None,
                copy_items=form.validated_data["copy_items"],
                user=logged_in_user(request),
            )
        except ServiceError as exc:
            return bad_request(str(exc))
        return Response(_detail(request, copy), status=status.HTTP_201_CREATED)
