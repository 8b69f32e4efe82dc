"""DRF face of verifiers and runs (researchers of the study; 404 for everyone else). Thin: services decide."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.errors import ImportFailed, ServiceError
from annotation.http import logged_in_user
from annotation.lib.api_errors import bad_request
from annotation.lib.formats import detect_format
from annotation.lib.parsers import MultiPartParser
from annotation.permissions import AccessBeforeParsing, IsStudyResearcher, StudyScoped
from annotation.transfer.adapters.base import API

from .access import access_run, access_verifier
from .selectors import study_verifiers
from .serializers import (
    ImportOutcomeSerializer,
    ImportProblemSerializer,
    PredictionImportSerializer,
    RunSerializer,
    StartRunSerializer,
    VerifierSerializer,
    VerifierUpdateSerializer,
    VerifierWriteSerializer,
)
from .services import create_verifier, import_predictions, start_run, stop_run, update_verifier
from .services.prediction_import import import_predictions_from
from .services.verifiers import VerifierInvalid

#: A refusal by the service, in the one error shape (annotation.lib.api_errors): `fields` names the fields.
REFUSED = OpenApiResponse(description="Refused: `detail` says why, `fields` names the fields (the one error shape).")


def _refused(exc: ServiceError) -> Response:
    """A service's refusal as the API's one error shape; a verifier's bad fields as `fields`."""
    if isinstance(exc, VerifierInvalid):
        raise ValidationError({field: [message] for field, message in exc.errors.items()})
    return bad_request(str(exc))


class VerifierList(StudyScoped, APIView):
    """A study's verifiers (GET) or a new one (POST): LLM on an OpenAI-compatible URL, or a baseline."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(operation_id="verifier_list", responses=VerifierSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        return Response(VerifierSerializer(study_verifiers(self.study), many=True).data)

    @extend_schema(
        operation_id="verifier_create",
        request=VerifierWriteSerializer,
        responses={201: VerifierSerializer, 400: REFUSED},
    )
    def post(self, request: Request, slug: str) -> Response:
        data = VerifierWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            verifier = create_verifier(study=self.study, created_by=logged_in_user(request), **data.validated_data)
        except ServiceError as exc:
            return _refused(exc)
        return Response(VerifierSerializer(verifier).data, status=status.HTTP_201_CREATED)


class VerifierDetail(APIView):
    """One verifier (GET) or a change to its settings (PATCH)."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(operation_id="verifier_detail", responses=VerifierSerializer)
    def get(self, request: Request, slug: str, verifier_id: int) -> Response:
        return Response(VerifierSerializer(access_verifier(request.user, slug, verifier_id)).data)

    @extend_schema(
        operation_id="verifier_update",
        request=VerifierUpdateSerializer,
        responses={200: VerifierSerializer, 400: REFUSED},
    )
    def patch(self, request: Request, slug: str, verifier_id: int) -> Response:
        verifier = access_verifier(request.user, slug, verifier_id)
        data = VerifierUpdateSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        try:
            verifier = update_verifier(verifier=verifier, **data.validated_data)
        except ServiceError as exc:
            return _refused(exc)
        return Response(VerifierSerializer(verifier).data)


class VerifierRuns(APIView):
    """A verifier's runs (GET), or start one (POST): queued for the background worker."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(operation_id="verifier_runs", responses=RunSerializer(many=True))
    def get(self, request: Request, slug: str, verifier_id: int) -> Response:
        verifier = access_verifier(request.user, slug, verifier_id)
        return Response(RunSerializer(verifier.runs.select_related("verifier")[:100], many=True).data)

    @extend_schema(
        operation_id="verifier_run_start",
        request=StartRunSerializer,
        responses={202: RunSerializer, 400: REFUSED},
    )
    def post(self, request: Request, slug: str, verifier_id: int) -> Response:
        verifier = access_verifier(request.user, slug, verifier_id)
        data = StartRunSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            run = start_run(
                verifier=verifier,
                limit=data.validated_data.get("limit"),
                concurrency=data.validated_data.get("concurrency"),
                created_by=logged_in_user(request),
            )
        except ServiceError as exc:
            return _refused(exc)
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class RunDetail(APIView):
    """A run's status and counts (poll it while it is active)."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(operation_id="verifier_run_status", responses=RunSerializer)
    def get(self, request: Request, slug: str, run_id: int) -> Response:
        return Response(RunSerializer(access_run(request.user, slug, run_id)).data)


class RunStop(APIView):
    """Stop a run: at once if no worker holds it, else after the calls in flight."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(operation_id="verifier_run_stop", request=None, responses={200: RunSerializer, 400: REFUSED})
    def post(self, request: Request, slug: str, run_id: int) -> Response:
        run = access_run(request.user, slug, run_id)
        try:
            run = stop_run(run=run)
        except ServiceError as exc:
            return _refused(exc)
        return Response(RunSerializer(run).data)


def _import_failed(exc: ImportFailed) -> Response:
    return Response(
        {
            "detail": str(exc).splitlines()[0],
            "code": "invalid",
            "error_count": exc.total,
            "errors": [error.as_dict() for error in exc.errors],
        },
        status=status.HTTP_400_BAD_REQUEST,
    )


class PredictionImport(AccessBeforeParsing, StudyScoped, APIView):
    """Predictions made elsewhere (README, File formats), imported all or nothing; 400 lists problems by line and field."""

    permission_classes = [IsStudyResearcher]
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="prediction_import",
        request=PredictionImportSerializer,
        responses={
            200: ImportOutcomeSerializer,
            400: OpenApiResponse(
                ImportProblemSerializer, description="Nothing was imported; `errors` name line and field."
            ),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        data = PredictionImportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        if data.validated_data.get("from"):
            return self._from_pipeline(data.validated_data)
        try:
            fmt = detect_format(upload.name or "", data.validated_data.get("format"))
        except ValueError as exc:
            return bad_request(str(exc))
        limit = settings.PREDICTION_UPLOAD_MAX_BYTES
        if upload.size and upload.size > limit:
            return bad_request(
                f"the file is {upload.size:,} bytes; the limit here is {limit:,} (use manage.py import_predictions)"
            )
        try:
            result = import_predictions(
                study=self.study, stream=upload, fmt=fmt, update=data.validated_data["update"], face=API
            )
        except ImportFailed as exc:
            return _import_failed(exc)
        except ServiceError as exc:
            return _refused(exc)
        return Response(result.as_dict())

    def _from_pipeline(self, data: dict) -> Response:
        try:
            result = import_predictions_from(
                study=self.study,
                source=data["from"],
                upload=data["file"],
                verifier=data["verifier"],
                update=data["update"],
                face=API,
            )
        except ImportFailed as exc:
            return _import_failed(exc)
        except ServiceError as exc:
            return _refused(exc)
        return Response(result.as_dict())
