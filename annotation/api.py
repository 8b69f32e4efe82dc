"""DRF endpoints of the annotation app; thin like the HTML views."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from . import selectors
from .access import access_export_job, access_item
from .adapters.labelstudio_export import labelstudio_response
from .adapters.uploads import import_upload_from, system_names
from .api_errors import bad_request
from .api_results import answer_result, next_in_result, next_result
from .exports import CONTENT_TYPES, export_chunks, export_file_response, export_filename
from .http import logged_in_user
from .models import Annotation, Assignment, ImportJob, Item
from .permissions import AssignmentScoped, IsAssignmentStudyMember, IsStudyMember, IsStudyResearcher, StudyScoped
from .selectors.workbench import annotator_progress, display_payload
from .serializers import (
    AnswerResultSerializer,
    ExportJobSerializer,
    ExportRequestSerializer,
    FlagSerializer,
    ImportJobSerializer,
    ImportUploadSerializer,
    ItemSerializer,
    NextAssignmentSerializer,
    StudyDetailSerializer,
    StudySerializer,
    SubmitAnswerSerializer,
    SubmitResultSerializer,
)
from .services import ServiceError, assignments
from .services.export_jobs import request_export
from .services.import_jobs import submit_import


class StudyList(generics.ListAPIView):
    """The studies you are a member of (staff: all), with your role."""

    serializer_class = StudySerializer

    def get_queryset(self):
        return selectors.studies_with_role(logged_in_user(self.request))


class StudyDetail(StudyScoped, APIView):
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


class ItemList(StudyScoped, generics.ListAPIView):
    """A study's items in import order (researchers)."""

    serializer_class = ItemSerializer
    permission_classes = [IsStudyResearcher]

    @extend_schema(
        parameters=[OpenApiParameter("domain", str), OpenApiParameter("q", str, description="id or text contains")]
    )
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


class ImportUpload(StudyScoped, APIView):
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
                )
                return Response(
                    ImportJobSerializer(job).data,
                    status=status.HTTP_201_CREATED
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
            )
        except ServiceError as exc:
            return bad_request(str(exc))
        codes: dict[str, int] = {
            ImportJob.Status.SUCCEEDED: status.HTTP_201_CREATED,
            ImportJob.Status.FAILED: status.HTTP_400_BAD_REQUEST,
        }
        code = codes.get(job.status, status.HTTP_202_ACCEPTED)
        return Response(ImportJobSerializer(job).data, status=code)


class AnnotationImportUpload(ImportUpload):
    """Upload annotations collected elsewhere (creates the study's annotator identities)."""

    what = ImportJob.What.ANNOTATIONS


class ImportJobDetail(StudyScoped, generics.RetrieveAPIView):
    """An import's status and its errors."""

    serializer_class = ImportJobSerializer
    permission_classes = [IsStudyResearcher]

    def get_object(self):
        return get_object_or_404(ImportJob, study=self.study, pk=self.kwargs["pk"])


class ServiceErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


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
            (200, "application/json"): OpenApiTypes.STR,
            400: OpenApiResponse(
                ServiceErrorSerializer, description="Unknown format, or the study is too big to stream."
            ),
        },
    )
    def get(self, request: Request, slug: str) -> StreamingHttpResponse | Response:
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
    """Have the export written to a file in the background (any study size); poll the job, then download."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(request=ExportRequestSerializer, responses={202: ExportJobSerializer})
    def post(self, request: Request, slug: str) -> Response:
        form = ExportRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        job = request_export(
            study=self.study, file_format=form.validated_data["format"], created_by=logged_in_user(request)
        )
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
            302: OpenApiResponse(description="With shared object storage: a short-lived presigned URL of the file."),
        }
    )
    def get(self, request: Request, slug: str, export_id: int) -> HttpResponseBase:
        return export_file_response(access_export_job(request.user, slug, export_id))


# --- annotating ------------------------------------------------------------------


def _errors(*codes: int) -> dict[int, OpenApiResponse]:
    described = {
        400: "The answer does not fit the study; `detail` says why.",
        403: "Not an annotator of this study, or the study is not open.",
        404: "No such study or assignment, or you are not a member of its study.",
        409: "The assignment is not yours (any more): its lease ran out and someone else took it, or it belongs to another annotator.",
        503: "Too many annotators claimed at once; try again.",
    }
    return {code: OpenApiResponse(ServiceErrorSerializer, description=described[code]) for code in codes}


class AssignmentServiceView(StudyScoped, APIView):
    """Turns the assignment service's refusals into HTTP answers."""

    STATUS_FOR = (
        (assignments.LeaseLost, status.HTTP_409_CONFLICT),
        (assignments.NotAllowed, status.HTTP_403_FORBIDDEN),
        (assignments.ClaimContention, status.HTTP_503_SERVICE_UNAVAILABLE),
        (ServiceError, status.HTTP_400_BAD_REQUEST),
    )

    def handle_exception(self, exc: Exception) -> Response:
        for kind, code in self.STATUS_FOR:
            if isinstance(exc, kind):
                retry = {"Retry-After": "1"} if code == status.HTTP_503_SERVICE_UNAVAILABLE else None
                return Response({"detail": str(exc)}, status=code, headers=retry)
        return super().handle_exception(exc)

    def result(self, assignment: Assignment) -> Response:
        return Response(answer_result(assignment, annotator_progress(logged_in_user(self.request), self.study)))


class NextAssignment(AssignmentServiceView):
    """Your current item, or the next one: the same assignment until you submit or skip it."""

    permission_classes = [IsStudyMember]

    @extend_schema(
        request=None,
        responses={
            200: NextAssignmentSerializer,
            204: OpenApiResponse(description="Nothing is left for you in this study."),
            **_errors(403, 404, 503),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        user = logged_in_user(request)
        assignment = assignments.claim_next(user=user, study=self.study)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(next_result(assignment, display_payload(assignment), annotator_progress(user, self.study)))


class SubmitAssignment(AssignmentScoped, AssignmentServiceView):
    """Answer your assignment; again on an answered one to revise it (kept as a revision).

    With `next: true` the response also carries your next assignment, so a label is one round
    trip; the answer is stored whatever happens to the claim after it.
    """

    permission_classes = [IsAssignmentStudyMember]

    @extend_schema(
        request=SubmitAnswerSerializer, responses={200: SubmitResultSerializer, **_errors(400, 403, 404, 409)}
    )
    def post(self, request: Request, assignment_id: int) -> Response:
        answer = SubmitAnswerSerializer.validated(request.data)
        user = logged_in_user(request)
        done, progress = assignments.submit_with_progress(
            user=user,
            study=self.study,
            assignment_id=self.assignment.pk,
            answer=SubmitAnswerSerializer.answer(answer),
            source=Annotation.Source.API,
            shown_left=self.assignment.left_system,
        )
        data = answer_result(done, progress)
        if not answer["next"]:
            return Response(data)
        try:
            following, holding_lost = assignments.next_after_submit(user, self.study, answer.get("holding"))
        except (assignments.ClaimContention, assignments.NotAllowed):
            # The answer is stored; `next` is left out and the client asks `assignments/next`, which says why.
            return Response(data)
        data["next"] = None if following is None else next_in_result(following, display_payload(following))
        if "holding" in answer:
            data["holding_lost"] = holding_lost
        return Response(data)


class SkipAssignment(AssignmentScoped, AssignmentServiceView):
    """Give your assignment back without answering: the slot goes to someone else."""

    permission_classes = [IsAssignmentStudyMember]

    @extend_schema(request=None, responses={200: AnswerResultSerializer, **_errors(403, 404, 409)})
    def post(self, request: Request, assignment_id: int) -> Response:
        skipped = assignments.skip(user=logged_in_user(request), study=self.study, assignment_id=self.assignment.pk)
        return self.result(skipped)


class FlagAssignment(AssignmentScoped, AssignmentServiceView):
    """Flag the item of your assignment as a problem, with a reason; then answer or skip it."""

    permission_classes = [IsAssignmentStudyMember]

    @extend_schema(request=FlagSerializer, responses={200: AnswerResultSerializer, **_errors(400, 403, 404, 409)})
    def post(self, request: Request, assignment_id: int) -> Response:
        form = FlagSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        flagged = assignments.flag(
            user=logged_in_user(request),
            study=self.study,
            assignment_id=self.assignment.pk,
            reason=form.validated_data["reason"],
        )
        return self.result(flagged)
