"""DRF face of the report: the same dict as the CLI's ``--format json``, from the report cache when current."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.permissions import IsStudyResearcher, StudyScoped

from .reporting import cache, options_from_query
from .reporting.options import InvalidOption
from .serializers import ReportSerializer


class StudyReport(StudyScoped, APIView):
    """A study's meta-evaluation report: agreement with intervals, preference analysis, factuality scores."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(
        operation_id="study_report",
        parameters=[
            OpenApiParameter("by_domain", OpenApiTypes.BOOL, description="Add agreement per domain."),
            OpenApiParameter("binary", OpenApiTypes.BOOL, description="Add the binary collapse of the labels."),
            OpenApiParameter(
                "source_type",
                str,
                many=True,
                description="Credibility: keep only these evidence source types (repeat or comma).",
            ),
            OpenApiParameter(
                "exclude_source_type", str, many=True, description="Credibility: leave out these evidence source types."
            ),
            OpenApiParameter(
                "k",
                OpenApiTypes.INT,
                description="VeriScore F1@K with this K (1..100000); default: the median per domain.",
            ),
            OpenApiParameter(
                "include_screened_out",
                OpenApiTypes.BOOL,
                description="Crowd studies: count the labels of screened-out participants too (default: left out).",
            ),
        ],
        responses=ReportSerializer,
    )
    def get(self, request: Request, slug: str) -> Response:
        try:
            options = options_from_query(request.query_params)
        except InvalidOption as exc:
            raise ValidationError({exc.name: [str(exc)]}) from None
        return Response(cache.current_report(self.study, options).report)
