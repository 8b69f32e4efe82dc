"""Which claims the prediction-powered estimates counted as human-labelled (issue 33): a download per verifier and
claim, linked from the report's ``ppi`` section, and ``GET /api/studies/{slug}/report/ppi-items``.

A PPI++ interval is valid only if the labelled claims (or, for F1@K, the labelled responses) are a random sample;
this file lets a reader check which they were. Its rows come from the study frame (``metaeval.study_frame``: the
report's labels and reference rule) through ``reporting.ppi.ppi_item_rows``, the functions the ``ppi`` section is
computed with, so its counts are the section's; they are streamed, one verifier at a time, never a whole report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import Http404, StreamingHttpResponse
from django.views.decorators.http import require_GET
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.views import APIView

from annotation.access import Researcher, access_study
from annotation.http import AuthenticatedHttpRequest
from annotation.lib.csvsafe import csv_lines
from annotation.lib.strict import strict_query
from annotation.models import Study
from annotation.permissions import IsStudyResearcher, StudyScoped

from .api import INCLUDE_SCREENED_OUT
from .reference import REFERENCE_RULES
from .reporting.options import InvalidOption, ReportOptions, options_from_query
from .reporting.ppi import ITEM_COLUMNS, ppi_item_rows, ppi_unavailable_reason
from .study_frame import study_frame
from .verifiers.selectors import verifier_verdicts

__all__ = ["ITEM_COLUMNS", "StudyPpiItems", "ppi_items", "ppi_items_download"]

CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
API_PARAMETERS = ("format", "reference", "include_screened_out", "ppi_labelled_share")


class NoPpiEstimates(LookupError):
    """The study's report has no prediction-powered estimates, so no claim was used by them."""


def ppi_items(study: Study, options: ReportOptions) -> Iterator[list[Any]]:
    """The rows (``ITEM_COLUMNS``) of the labelled-items file, for the report with these ``options``.

    Reads the study frame and the verifiers' verdicts now, so that a missing section is raised here
    (``NoPpiEstimates``, with the reason) rather than in the middle of a streamed answer."""
    verdicts = verifier_verdicts(study)
    reason = ppi_unavailable_reason(study, verdicts)
    if reason:
        raise NoPpiEstimates(reason)
    frame = study_frame(study, options)
    reference = frame.reference
    return ppi_item_rows(frame.items, study, options, verdicts, (reference.rule, reference.labels))


def _chunks(rows: Iterator[list[Any]], fmt: str) -> Iterator[bytes]:
    if fmt == "csv":
        return (chunk.encode("utf-8") for chunk in csv_lines(ITEM_COLUMNS, rows))
    return ((json.dumps(dict(zip(ITEM_COLUMNS, row, strict=True)), ensure_ascii=False) + "\n").encode() for row in rows)


def _response(study: Study, rows: Iterator[list[Any]], fmt: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(_chunks(rows, fmt), content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-ppi-items.{fmt}"'
    return response


@login_required
@require_GET
def ppi_items_download(request: AuthenticatedHttpRequest, slug: str) -> StreamingHttpResponse:
    """The labelled-items CSV of the report page's ``ppi`` section (the page's options: reference rule,
    participants, ``ppi_labelled_share``)."""
    study = access_study(request.user, slug, role=Researcher)
    try:
        options = options_from_query(request.GET)
    except InvalidOption as exc:
        raise BadRequest(f"{exc.name}: {exc}") from None
    try:
        rows = ppi_items(study, options)
    except NoPpiEstimates as exc:
        raise Http404(f"This study's report has no prediction-powered estimates: {exc}.") from None
    return _response(study, rows, "csv")


class StudyPpiItems(StudyScoped, APIView):
    """Per verifier and claim, whether the report's prediction-powered estimates counted it as human-labelled."""

    permission_classes = [IsStudyResearcher]

    @extend_schema(
        operation_id="study_report_ppi_items",
        parameters=[
            OpenApiParameter(
                "format",
                str,
                enum=list(CONTENT_TYPES),
                default="csv",
                description="CSV or JSON Lines (one object a row).",
            ),
            OpenApiParameter(
                "reference",
                str,
                enum=list(REFERENCE_RULES),
                description="The reference rule whose labels count as the human ones; default: the study's.",
            ),
            INCLUDE_SCREENED_OUT,
            OpenApiParameter(
                "ppi_labelled_share",
                {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1},
                description="As the report's: only this seeded random share of the labelled claims (and of the fully "
                "labelled responses) counts as labelled.",
            ),
        ],
        responses={
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR,
                description="Columns: verifier, item, system, domain, response_id, has_reference (the reference rule "
                "gives a label), claim (labelled / unlabelled / no prediction: its part in the share supported and "
                "FActScore), response (labelled / unlabelled / left out: its response's part in F1@K), "
                "reference_label (the label the estimates used; empty when neither did), prediction.",
            ),
            (200, "application/x-ndjson"): OpenApiResponse(
                OpenApiTypes.STR, description="format=jsonl: the same rows."
            ),
            400: OpenApiResponse(description="An option with a value it does not take, or an unknown parameter."),
            404: OpenApiResponse(
                description="Not a study you lead, or its report has no prediction-powered estimates (a preference "
                "study, no verifier predictions, or no binary map)."
            ),
        },
    )
    def get(self, request: Request, slug: str) -> StreamingHttpResponse:
        strict_query(request, API_PARAMETERS)
        fmt = request.query_params.get("format", "csv")
        if fmt not in CONTENT_TYPES:
            raise ValidationError({"format": [f"format must be csv or jsonl, got {fmt!r}"]})
        try:
            options = options_from_query(request.query_params)
        except InvalidOption as exc:
            raise ValidationError({exc.name: [str(exc)]}) from None
        try:
            rows = ppi_items(self.study, options)
        except NoPpiEstimates as exc:
            raise NotFound(f"this study's report has no prediction-powered estimates: {exc}") from None
        return _response(self.study, rows, fmt)
