"""DRF endpoints of the annotation app; thin like the HTML views."""

# API that makes and runs studies: create, update (PATCH), change status, duplicate.
#
# Same rules as the pages (services.studies decides); researchers of the study
# (and staff) only, others get 404 like on every study route.

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import Researcher, access_item, access_study, may_create_studies
from annotation.errors import ServiceError
from annotation.http import logged_in_user
from annotation.lib.api_errors import bad_request
from annotation.lib.strict import strict_query
from annotation.models import Item, Study
from annotation.permissions import IsStudyMember, IsStudyResearcher, StudyScoped
from annotation.progress import selectors as study_progress
from annotation.studies import selectors
from annotation.studies.serializers import (
    ItemSerializer,
    StudyCreateSerializer,
    StudyDetailSerializer,
    StudyDuplicateSerializer,
    StudySerializer,
    StudySettingsSerializer,
    StudyStatusSerializer,
)
from annotation.studies.services import change_status, create_study, duplicate_study, update_study


class StudyList(generics.ListAPIView):
    """The studies you are a member of (staff: all), with your role."""

    serializer_class = StudySerializer

    def get(self, request: Request, *args, **kwargs) -> Response:
        strict_query(request, ("page",))
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        return selectors.studies_with_role(logged_in_user(self.request))


class StudyDetail(StudyScoped, APIView):
    """One study; researchers also get counts by domain."""

    permission_classes = [IsStudyMember]

    @extend_schema(responses=StudyDetailSerializer)
    def get(self, request: Request, slug: str) -> Response:
        study = self.study
        if study.user_role == "researcher":
            study.counts = study_progress.study_counts(study)
            study.domains = selectors.items_by_domain(study)
            return Response(StudyDetailSerializer(study).data)
        return Response(StudySerializer(study).data)


class ItemList(StudyScoped, generics.ListAPIView):
    """A study's items in import order (researchers)."""

    serializer_class = ItemSerializer
    permission_classes = [IsStudyResearcher]

    @extend_schema(
        parameters=[OpenApiParameter("domain", str), OpenApiParameter("q", str, description="id or text contains")]
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        strict_query(request, ("domain", "q", "page"), may_be_empty=("domain", "q"))  # empty: no filter
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no study
            return Item.objects.none()
        return selectors.paged_study_items(
            self.study, domain=self.request.query_params.get("domain"), query=self.request.query_params.get("q")
        )


class ItemDetail(generics.RetrieveAPIView):
    """One item by its id in the study (researchers)."""

    serializer_class = ItemSerializer
    permission_classes = [IsStudyResearcher]

    def get_object(self):
        return access_item(self.request.user, self.kwargs["slug"], self.kwargs["external_id"])


REFUSED = OpenApiResponse(description="Refused: `detail` says why (nothing was changed).")


def _detail(request: Request, study: Study) -> dict[str, Any]:
    study = access_study(request.user, study.slug)  # with the caller's role, as GET shows it
    study.counts = study_progress.study_counts(study)
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
