"""Planning faces: the /plan/ page and GET /api/plan. Parse, call ``metaeval.planning``, render."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import Researcher, access_study
from annotation.http import AuthenticatedHttpRequest
from annotation.lib.strict import strict_query

from .planning import PLAN_KINDS, RANGES, PlanInputs, cached_study_precision, make_plan, plan_from_query
from .reporting.options import InvalidOption


@login_required
@require_GET
def plan_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The planning form and its answers; a bad value is named above the form, the defaults stay."""
    error = None
    try:
        inputs = plan_from_query(request.GET)
        plan = make_plan(inputs)
    except InvalidOption as exc:
        error = f"{exc.name}: {exc}"
        kind = request.GET.get("kind", "")
        inputs = PlanInputs(kind=kind if kind in PLAN_KINDS else "preference")
        plan = make_plan(inputs)
    form = {**inputs.as_dict(), "distribution": ",".join(f"{x:g}" for x in inputs.distribution)}
    if request.GET and error:
        form.update({k: v for k, v in request.GET.items() if k in form})
    return render(
        request,
        "metaeval/plan.html",
        {"plan": plan, "form": form, "error": error, "kinds": PLAN_KINDS, "query": request.GET.urlencode()},
    )


def _range(name: str) -> dict[str, Any]:
    """A planning number's range (metaeval.planning.RANGES) as the schema says it."""
    bounds = RANGES[name]
    schema: dict[str, Any] = {"type": "number", "minimum": bounds.low, "maximum": bounds.high}
    if bounds.low_open:
        schema["exclusiveMinimum"] = True
    if bounds.high_open:
        schema["exclusiveMaximum"] = True
    return schema


PLAN_PARAMETERS = (
    "kind",
    "p",
    "power",
    "alpha",
    "width",
    "kappa",
    "kappa_b",
    "distribution",
    "share",
    "sensitivity",
    "specificity",
    "unlabelled",
)


class Plan(APIView):
    """Items a study needs: sign-test power and Wilson width (preference), kappa CI and verifier differences."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="plan",
        parameters=[
            OpenApiParameter("kind", str, enum=list(PLAN_KINDS), description="preference (default) or verification"),
            OpenApiParameter("p", _range("p"), description="expected preference share, not 0.5 (default 0.65)"),
            OpenApiParameter("power", _range("power"), description="target power (default 0.8)"),
            OpenApiParameter("alpha", _range("alpha"), description="two-sided level (default 0.05)"),
            OpenApiParameter("width", _range("width"), description="target 95% CI width (default 0.1)"),
            OpenApiParameter("kappa", _range("kappa"), description="expected kappa (default 0.6)"),
            OpenApiParameter("kappa_b", _range("kappa_b"), description="a second verifier's kappa"),
            OpenApiParameter("distribution", str, description="expected label shares, comma-separated"),
            OpenApiParameter("share", _range("share"), description="PPI plan: expected share supported (0.5)"),
            OpenApiParameter(
                "sensitivity", _range("sensitivity"), description="PPI plan: the verifier's recall of supported"
            ),
            OpenApiParameter(
                "specificity", _range("specificity"), description="PPI plan: the verifier's recall of unsupported"
            ),
            OpenApiParameter(
                "unlabelled", _range("unlabelled"), description="PPI plan: claims with only predictions (10,000)"
            ),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        strict_query(request, PLAN_PARAMETERS)
        try:
            return Response(make_plan(plan_from_query(request.query_params)))
        except InvalidOption as exc:
            raise ValidationError({exc.name: [str(exc)]}) from None


#: The CI width the study page measures progress against.
TARGET_WIDTH = 0.1


@login_required
@require_GET
def precision_card(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The study page's "precision so far" card on its own.

    It reads every label of the study (its interval is computed from them), so the study page
    loads it after the page itself (static/js/precision_card.js) and stays as fast at 100,000
    items as at 1,000 (issue 15); without JavaScript the page links here. Kept until the
    study's data changes (``cached_study_precision``).
    """
    study = access_study(request.user, slug, role=Researcher)
    context = {"study": study, "precision": cached_study_precision(study, TARGET_WIDTH)}
    return render(request, "metaeval/_study_precision.html", context)
