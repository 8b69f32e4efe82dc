"""DRF endpoints of the annotation app; thin like the HTML views."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from . import selectors
from .access import access_item, studies_for
from .exports import CONTENT_TYPES, export_chunks, export_filename
from .models import ImportJob, Item
from .permissions import IsStudyMember, IsStudyResearcher
from .serializers import (
    ImportJobSerializer,
    ImportUploadSerializer,
    ItemSerializer,
    StudyDetailSerializer,
    StudySerializer,
)
from .services import ServiceError
from .services.import_jobs import submit_import


class StudyList(generics.ListAPIView):
    """The studies you are a member of (staff: all), with your role."""

    serializer_class = StudySerializer

    def get_queryset(self):
        return selectors.studies_with_role(self.request.user)


class StudyDetail(APIView):
    """One study; researchers also get counts by domain."""

    permission_classes = [IsStudyMember]

    @extend_schema(responses=StudyDetailSerializer)
    def get(self, request: Request, slug: str) -> Response:
        study = self.study
        if study.user_role == "researcher":
            study.counts = selectors.study_counts(study)
            study.domains = selectors.items_by_domain(study)
            return Response(StudyDetailSerializer(study).data)
        return Response(StudySerializer(study).data)


class ItemList(generics.ListAPIView):
    """A study's items in import order (researchers)."""

    serializer_class = ItemSerializer
    permission_classes = [IsStudyResearcher]

    @extend_schema(parameters=[OpenApiParameter("domain", str), OpenApiParameter("q", str, description="id or text contains")])
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no study
            return Item.objects.none()
        return selectors.study_items(
            self.study, domain=self.request.query_params.get("domain"), query=self.request.query_params.get("q")
        )


class ItemDetail(generics.RetrieveAPIView):
    """One item by its id in the study (researchers)."""

    serializer_class = ItemSerializer
    permission_classes = [IsStudyResearcher]

    def get_object(self):
        return access_item(self.request.user, self.kwargs["slug"], self.kwargs["external_id"])


class ImportUpload(APIView):
    """Upload items or annotations; small files import at once, big ones in the background."""

    permission_classes = [IsStudyResearcher]
    parser_classes = [MultiPartParser]
    what = ImportJob.What.ITEMS

    @extend_schema(
        request=ImportUploadSerializer,
        responses={
            201: ImportJobSerializer,
            202: OpenApiResponse(ImportJobSerializer, description="Queued: poll the job."),
            400: OpenApiResponse(ImportJobSerializer, description="Nothing was imported; errors name line and field."),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        upload = ImportUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        try:
            job = submit_import(
                study=self.study,
                what=self.what,
                upload=upload.validated_data["file"],
                file_format=upload.validated_data.get("format"),
                update=upload.validated_data["update"],
                created_by=request.user,
            )
        except ServiceError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        code = {
            ImportJob.Status.SUCCEEDED: status.HTTP_201_CREATED,
            ImportJob.Status.FAILED: status.HTTP_400_BAD_REQUEST,
        }.get(job.status, status.HTTP_202_ACCEPTED)
        return Response(ImportJobSerializer(job).data, status=code)


class AnnotationImportUpload(ImportUpload):
    """Upload annotations collected elsewhere (creates the study's annotator identities)."""

    what = ImportJob.What.ANNOTATIONS


class ImportJobDetail(generics.RetrieveAPIView):
    """An import's status and its errors."""

    serializer_class = ImportJobSerializer
    permission_classes = [IsStudyResearcher]

    def get_object(self):
        return get_object_or_404(ImportJob, study=self.study, pk=self.kwargs["pk"])


class AnnotationExport(APIView):
    """All annotations, one row per annotation, streamed as CSV or JSON Lines."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["csv", "jsonl"], default="csv")],
        responses={(200, "text/csv"): OpenApiTypes.STR, (200, "application/x-ndjson"): OpenApiTypes.STR},
    )
    def get(self, request: Request, slug: str) -> StreamingHttpResponse | Response:
        fmt = request.query_params.get("format", "csv")
        if fmt not in CONTENT_TYPES:
            return Response({"detail": "format must be csv or jsonl"}, status=status.HTTP_400_BAD_REQUEST)
        response = StreamingHttpResponse(
            (chunk.encode("utf-8") for chunk in export_chunks(self.study, fmt)), content_type=CONTENT_TYPES[fmt]
        )
        response["Content-Disposition"] = f'attachment; filename="{export_filename(self.study, fmt)}"'
        return response
