"""Adjudication over the API: the queue, one item with every answer, submitting (or revising)
a final label, and importing past adjudications; as thin as the pages."""

from __future__ import annotations

from dataclasses import asdict
from typing import cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import access_item_to_adjudicate, access_study_to_adjudicate
from annotation.adjudication.selectors import adjudication_queue, item_for_adjudication
from annotation.adjudication.serializers import (
    AdjudicationImportSerializer,
    AdjudicationSettingsSerializer,
    AdjudicationSubmitSerializer,
)
from annotation.adjudication.services import (
    ADJUDICATION_SETTINGS,
    adjudicate,
    import_adjudications,
    set_adjudication_settings,
    verdict_for,
)
from annotation.errors import ImportFailed, ServiceError
from annotation.http import logged_in_user
from annotation.lib.api_errors import bad_request
from annotation.lib.formats import detect_format
from annotation.lib.parsers import MultiPartParser
from annotation.models import Adjudication
from annotation.permissions import AccessBeforeParsing, IsStudyResearcher, StudyScoped


class IsStudyAdjudicator(BasePermission):
    """Researchers and flagged members of the study named by `slug`; 404 outsiders, 403 annotators."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        cast(StudyScoped, view).study = access_study_to_adjudicate(request.user, view.kwargs["slug"])
        return True


class AdjudicationQueue(StudyScoped, APIView):
    """The study's adjudication queue under its rule: each item's label counts, how many
    adjudications it has, and whether you gave one."""

    permission_classes = [IsStudyAdjudicator]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, slug: str) -> Response:
        queue = adjudication_queue(self.study, logged_in_user(request))
        return Response(
            {
                "rule": self.study.adjudication_rule,
                "count": len(queue),
                "done": sum(1 for entry in queue if entry.mine),
                "items": [asdict(entry) for entry in queue],
            }
        )


class AdjudicationItem(APIView):
    """GET: an item as annotators saw it, with every answer and adjudication; a preference answer
    says how its annotator saw the lists (`lists_seen`, `swapped`, `frame`, `preferred_as_seen`:
    their "List 1" is not always yours). POST: your final label (again to revise it; the old one
    is kept as a revision)."""

    permission_classes = [IsStudyAdjudicator]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, slug: str, external_id: str) -> Response:
        item = access_item_to_adjudicate(request.user, slug, external_id)
        view = item_for_adjudication(item)
        for entry in view["adjudications"]:
            entry.pop("adjudicator_id")
        return Response(view)

    @extend_schema(
        request=AdjudicationSubmitSerializer,
        responses={
            201: OpenApiResponse(OpenApiTypes.OBJECT, description="Your first adjudication of the item."),
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="Your adjudication revised (the old one kept)."),
        },
    )
    def post(self, request: Request, slug: str, external_id: str) -> Response:
        item = access_item_to_adjudicate(request.user, slug, external_id)
        given = AdjudicationSubmitSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            verdict = verdict_for(
                item.study, label=data["label"], preferred=data["preferred"], strength=data["strength"].lower()
            )
            adjudication, created = adjudicate(
                item=item,
                adjudicator=logged_in_user(request),
                verdict=verdict,
                note=data["note"],
                guidelines_unclear=data["guidelines_unclear"],
                source=Adjudication.Source.API,
            )
        except ServiceError as exc:
            return bad_request(str(exc))
        body = {
            "item": item.external_id,
            "label": adjudication.label,
            "preferred_system": adjudication.preferred_system,
            "strength": adjudication.strength,
            "note": adjudication.note,
            "guidelines_unclear": adjudication.guidelines_unclear,
            "revisions": adjudication.revisions.count(),
        }
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class AdjudicationImport(AccessBeforeParsing, StudyScoped, APIView):
    """Researchers: import past adjudications (item, adjudicator, label or preferred + strength,
    note, guidelines_unclear) from JSON Lines or CSV; all or nothing, errors by line."""

    permission_classes = [IsStudyResearcher]
    parser_classes = [MultiPartParser]

    @extend_schema(
        request=AdjudicationImportSerializer,
        responses={
            201: OpenApiResponse(OpenApiTypes.OBJECT, description="Imported: counts of what was created."),
            400: OpenApiResponse(description="Nothing was imported; `errors` name line and field."),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        upload = AdjudicationImportSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        file = upload.validated_data["file"]
        try:
            fmt = detect_format(file.name, upload.validated_data.get("format"))
            result = import_adjudications(study=self.study, stream=file, fmt=fmt)
        except ImportFailed as exc:
            return Response(
                {
                    "detail": f"Nothing was imported ({exc.total} problem(s)).",
                    "code": "invalid",
                    "errors": [error.as_dict() for error in exc.errors],
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        except (ServiceError, ValueError) as exc:
            return bad_request(str(exc))
        return Response(result.as_dict(), status=status.HTTP_201_CREATED)


class AdjudicationSettings(StudyScoped, APIView):
    """Researchers: how the queue is built and where reference labels come from (GET, PATCH);
    every change is recorded with who and when."""

    permission_classes = [IsStudyResearcher]

    def _body(self) -> dict[str, object]:
        return {name: getattr(self.study, name) for name in ADJUDICATION_SETTINGS}

    @extend_schema(responses=AdjudicationSettingsSerializer)
    def get(self, request: Request, slug: str) -> Response:
        return Response(self._body())

    @extend_schema(request=AdjudicationSettingsSerializer, responses=AdjudicationSettingsSerializer)
    def patch(self, request: Request, slug: str) -> Response:
        given = AdjudicationSettingsSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            set_adjudication_settings(
                study=self.study,
                user=logged_in_user(request),
                rule=data.get("adjudication_rule"),
                audit_share=data.get("adjudication_audit_share"),
                shows_systems=data.get("adjudication_shows_systems"),
                shows_verifiers=data.get("adjudication_shows_verifiers"),
                reference_rule=data.get("reference_rule"),
            )
        except ServiceError as exc:
            return bad_request(str(exc))
        return Response(self._body())
