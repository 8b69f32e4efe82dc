"""DRF endpoints of the annotation app; thin like the HTML views."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import access_export_job
from annotation.errors import ServiceError
from annotation.http import logged_in_user
from annotation.lib.api_errors import bad_request
from annotation.lib.parsers import MultiPartParser
from annotation.lib.strict import strict_query
from annotation.models import ImportJob
from annotation.permissions import AccessBeforeParsing, IsStudyResearcher, StudyScoped
from annotation.transfer import selectors
from annotation.transfer.adapters.base import API
from annotation.transfer.adapters.labelstudio_export import labelstudio_response
from annotation.transfer.adapters.uploads import import_upload_from, system_names
from annotation.transfer.exports import CONTENT_TYPES, export_chunks, export_file_response, export_filename
from annotation.transfer.serializers import (
    ExportJobSerializer,
    ExportRequestSerializer,
    FailedImportSerializer,
    ImportJobSerializer,
    ImportUploadSerializer,
)
from annotation.transfer.services.export_jobs import request_export
from annotation.transfer.services.import_jobs import submit_import


class ImportUpload(AccessBeforeParsing, StudyScoped, APIView):
    """Upload items or annotations; small files import at once, big ones in the background."""

    permission_classes = [IsStudyResearcher]
    parser_classes = [MultiPartParser]
    what = ImportJob.What.ITEMS

    @extend_schema(
        request=ImportUploadSerializer,
        responses={
            201: ImportJobSerializer,
            202: OpenApiResponse(ImportJobSerializer, description="Queued: poll the job."),
            400: OpenApiResponse(
                FailedImportSerializer, description="Nothing was imported; `errors` name line and field."
            ),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        upload = ImportUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        if not upload.validated_data.get("from") and (
            upload.validated_data.get("pair")
            or upload.validated_data["systems"]
            or upload.validated_data.get("source_labels")
        ):
            return bad_request(
                "'pair', 'systems' and 'source_labels' go with 'from' (a pipeline's own file; docs/importing.md)"
            )
        try:
            if upload.validated_data.get("from"):
                job = import_upload_from(
                    study=self.study,
                    what=self.what,
                    source=upload.validated_data["from"],
                    upload=upload.validated_data["file"],
                    pair=upload.validated_data.get("pair"),
                    systems=system_names(upload.validated_data["systems"]),
                    update=upload.validated_data["update"],
                    created_by=logged_in_user(request),
                    source_labels=upload.validated_data.get("source_labels"),
                    face=API,
                )
                return _job_response(
                    job,
                    status.HTTP_201_CREATED
                    if job.status == ImportJob.Status.SUCCEEDED
                    else status.HTTP_400_BAD_REQUEST,
                )
            job = submit_import(
                study=self.study,
                what=self.what,
                upload=upload.validated_data["file"],
                file_format=upload.validated_data.get("format"),
                update=upload.validated_data["update"],
                created_by=logged_in_user(request),
                face=API,
            )
        except ServiceError as exc:
            return bad_request(str(exc))
        codes: dict[str, int] = {
            ImportJob.Status.SUCCEEDED: status.HTTP_201_CREATED,
            ImportJob.Status.FAILED: status.HTTP_400_BAD_REQUEST,
        }
        return _job_response(job, codes.get(job.status, status.HTTP_202_ACCEPTED))


def _job_response(job: ImportJob, code: int) -> Response:
    """The import job as answered: a 400 in the one error shape too (FailedImportSerializer)."""
    shape = FailedImportSerializer if code == status.HTTP_400_BAD_REQUEST else ImportJobSerializer
    return Response(shape(job).data, status=code)


class AnnotationImportUpload(ImportUpload):
    """Upload annotations collected elsewhere (creates the study's annotator identities)."""

    what = ImportJob.What.ANNOTATIONS


class ImportJobDetail(StudyScoped, generics.RetrieveAPIView):
    """An import's status and its errors."""

    serializer_class = ImportJobSerializer
    permission_classes = [IsStudyResearcher]

    def get_object(self):
        return get_object_or_404(ImportJob, study=self.study, pk=self.kwargs["pk"])


class AnnotationExport(StudyScoped, APIView):
    """All annotations, one row per annotation, streamed as CSV or JSON Lines.

    A study with more than EXPORT_INLINE_MAX_ROWS annotations is not streamed:
    the answer is a 400 pointing to `POST /api/studies/{slug}/exports`.
    """

    permission_classes = [IsStudyResearcher]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "format",
                str,
                enum=["csv", "jsonl", "labelstudio"],
                default="csv",
                description="labelstudio: the study as Label Studio tasks with choices annotations (docs/importing.md).",
            )
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/x-ndjson"): OpenApiTypes.STR,
            (200, "application/json"): OpenApiResponse(
                {"type": "array", "items": {"type": "object"}}, description="format=labelstudio: Label Studio tasks."
            ),
            400: OpenApiResponse(description="Unknown format, or the study is too big to stream."),
        },
    )
    def get(self, request: Request, slug: str) -> StreamingHttpResponse | Response:
        strict_query(request, ("format",))
        fmt = request.query_params.get("format", "csv")
        if fmt not in CONTENT_TYPES and fmt != "labelstudio":
            return bad_request("format must be csv, jsonl or labelstudio")
        if selectors.export_runs_in_background(self.study):
            detail = (
                f"this study has more than {selectors.export_inline_limit():,} annotations, too many to stream: "
                f"POST /api/studies/{slug}/exports to have the file written in the background, then download it"
            )
            return bad_request(detail)
        if fmt == "labelstudio":
            return labelstudio_response(self.study)
        response = StreamingHttpResponse(
            (chunk.encode("utf-8") for chunk in export_chunks(self.study, fmt)), content_type=CONTENT_TYPES[fmt]
        )
        response["Content-Disposition"] = f'attachment; filename="{export_filename(self.study, fmt)}"'
        return response


class ExportJobCreate(StudyScoped, APIView):
    """Have the export written to a file in the background (any study size); poll the job, then download.

    `format=hf`: the study as a Hugging Face dataset (parquet files and dataset card, zipped).
    """

    permission_classes = [IsStudyResearcher]

    @extend_schema(
        request=ExportRequestSerializer,
        responses={
            202: ExportJobSerializer,
            400: OpenApiResponse(description="Unknown format, or none of the running apps builds it."),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        form = ExportRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            job = request_export(
                study=self.study,
                file_format=form.validated_data["format"],
                created_by=logged_in_user(request),
                license=form.validated_data["license"],
            )
        except ServiceError as exc:
            return bad_request(str(exc))
        job.study = self.study
        headers = {"Location": reverse("api-export-job", args=[slug, job.pk])}
        return Response(ExportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED, headers=headers)


class ExportJobDetail(APIView):
    """A background export: its status, and `download_url` once the file is ready."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(responses={200: ExportJobSerializer})
    def get(self, request: Request, slug: str, export_id: int) -> Response:
        return Response(ExportJobSerializer(access_export_job(request.user, slug, export_id)).data)


class ExportJobDownload(APIView):
    """The finished export file (404 while it is being written, or after a newer export replaced it)."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/x-ndjson"): OpenApiTypes.STR,
            (200, "application/zip"): OpenApiResponse(
                OpenApiTypes.BINARY, description="format=hf: the Hugging Face dataset folder, zipped."
            ),
            302: OpenApiResponse(description="With shared object storage: a short-lived presigned URL of the file."),
        }
    )
    def get(self, request: Request, slug: str, export_id: int) -> HttpResponseBase:
        return export_file_response(access_export_job(request.user, slug, export_id))
