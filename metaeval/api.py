"""DRF faces of the report: the same dict as the CLI's ``--format json`` (from the report cache when current),
and the labels it counts with each item's reference label (the notebook client's ``labels``)."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.crowd.selectors import exclusion_rule
from annotation.lib.strict import strict_query
from annotation.permissions import IsStudyResearcher, StudyScoped

from .reference import REFERENCE_RULES, RULE_DESCRIPTIONS
from .reporting import cache, options_from_query
from .reporting.build import gold_rule
from .reporting.options import InvalidOption
from .serializers import ReportSerializer, StudyLabelsSerializer
from .study_frame import TABLE_COLUMNS, study_frame

#: The query parameter every read of a crowd study's labels takes (the report, the labels, the PPI items).
INCLUDE_SCREENED_OUT = OpenApiParameter(
    "include_screened_out",
    OpenApiTypes.BOOL,
    description="Crowd studies: count the labels of screened-out participants too (default: left out).",
)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
#: Query parameters that may repeat and may be empty (a list of source types).
LISTS = {"source_type", "exclude_source_type"}
REPORT_PARAMETERS = (
    "by_domain",
    "binary",
    "source_type",
    "exclude_source_type",
    "k",
    "include_screened_out",
    "ppi_labelled_share",
)
LABELS_PARAMETERS = ("include_gold_items", "reference", "include_screened_out")


def _gold_items(raw: str | None) -> bool | None:
    """``include_gold_items``: absent or empty follows the study's gold setting."""
    value = (raw or "").strip().lower()
    if not value:
        return None
    if value not in _TRUE | _FALSE:
        raise ValidationError({"include_gold_items": [f"include_gold_items must be true or false, got {raw!r}"]})
    return value in _TRUE


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
                {"type": "integer", "minimum": 1, "maximum": 100_000},
                description="VeriScore F1@K with this K (1..100000); default: the median per domain.",
            ),
            INCLUDE_SCREENED_OUT,
            OpenApiParameter(
                "ppi_labelled_share",
                {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1},
                description="PPI: use only this seeded random share of the human-labelled claims as labelled "
                "(the rest as unlabelled), to see what a smaller labelling budget gives.",
            ),
        ],
        responses=ReportSerializer,
    )
    def get(self, request: Request, slug: str) -> StreamingHttpResponse:
        """Streamed as the JSON download is (its long lists sent as stored, never held whole: issue 35)."""
        strict_query(request, REPORT_PARAMETERS, may_be_empty=LISTS)
        try:
            options = options_from_query(request.query_params)
        except InvalidOption as exc:
            raise ValidationError({exc.name: [str(exc)]}) from None
        return StreamingHttpResponse(cache.report_json_pieces(self.study, options), content_type="application/json")


class StudyLabels(StudyScoped, APIView):
    """The labels a study's report counts, each with its item's reference label, computed by the server.

    Why on the server: the notebook client took the strict majority of the export's labels, whatever
    the study's reference rule and adjudications (issue 29). These come from the same study frame as
    the report (``metaeval.study_frame``): the same participants, check items, gold rule and reference.
    """

    permission_classes = [IsStudyResearcher]

    @extend_schema(
        operation_id="study_labels",
        parameters=[
            OpenApiParameter(
                "include_gold_items",
                OpenApiTypes.BOOL,
                description="Labels on gold items: true all, false none; absent: as the study's agreement counts them.",
            ),
            OpenApiParameter(
                "reference",
                str,
                enum=list(REFERENCE_RULES),
                description="The reference rule (gold, majority, dawid_skene, adjudicated, adjudicated_else_majority); "
                "default: the study's.",
            ),
            INCLUDE_SCREENED_OUT,
        ],
        responses=StudyLabelsSerializer,
    )
    def get(self, request: Request, slug: str) -> Response:
        strict_query(request, LABELS_PARAMETERS)
        try:
            options = options_from_query(request.query_params)
        except InvalidOption as exc:
            raise ValidationError({exc.name: [str(exc)]}) from None
        frame = study_frame(self.study, options)
        table = frame.label_table(include_gold_items=_gold_items(request.query_params.get("include_gold_items")))
        columns = {name: table[name].tolist() for name in TABLE_COLUMNS}
        columns["in_agreement"] = [bool(x) for x in columns["in_agreement"]]
        return Response(
            {
                "study": self.study.slug,
                "reference_rule": frame.rule,
                "reference_description": RULE_DESCRIPTIONS[frame.rule],
                "gold_rule": gold_rule(self.study),
                "checks_rule": frame.checks_rule(),
                "participants_rule": exclusion_rule(self.study, include_screened_out=options.include_screened_out),
                "n_labels": len(table),
                "columns": columns,
            }
        )
