"""Leaderboard faces: the /leaderboard/ page (with its CSV and LaTeX downloads) and GET /api/leaderboard."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.http import AuthenticatedHttpRequest, logged_in_user
from annotation.lib.csvsafe import csv_text
from annotation.lib.strict import strict_query

from .leaderboard import leaderboard_csv_rows, leaderboard_for
from .reporting.latex_format import LatexTable, escape, table_tex

DOWNLOADS = {"csv": "text/csv; charset=utf-8", "tex": "application/x-tex; charset=utf-8"}


@login_required
@require_GET
def leaderboard_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The leaderboard of the user's verification studies; ?format=csv or tex downloads it."""
    board = leaderboard_for(request.user)
    fmt = request.GET.get("format", "")
    if fmt and fmt not in DOWNLOADS:
        raise BadRequest(f"format: one of {', '.join(DOWNLOADS)}, got {fmt!r}")
    if fmt:
        body = _csv(board) if fmt == "csv" else table_tex(_latex(board))
        response = HttpResponse(body, content_type=DOWNLOADS[fmt])
        response["Content-Disposition"] = f'attachment; filename="claimlab-leaderboard.{fmt}"'
        return response
    return render(request, "metaeval/leaderboard.html", {"board": board})


def _csv(board: dict) -> str:
    header, *rows = leaderboard_csv_rows(board)
    return csv_text(header, rows)


def _latex(board: dict) -> LatexTable:
    def cell(row: dict, study: str) -> str:
        value = (row["cells"].get(study) or {}).get("value")
        return "--" if value is None else f"{value:.3f}"

    rows = [
        [
            str(row["rank"]) if row["rank"] is not None else "--",
            escape(row["verifier"]),
            *(cell(row, study) for study in board["columns"]),
            "--" if row["mean"] is None else f"{row['mean']:.3f}",
        ]
        for row in board["rows"]
    ]
    return LatexTable(
        "leaderboard",
        "Balanced accuracy of each verifier against each study's human reference; mean over studies and rank",
        ["Rank", "Verifier", *(escape(study) for study in board["columns"]), "Mean"],
        "rl" + "r" * (len(board["columns"]) + 1),
        rows,
    )


class Leaderboard(APIView):
    """Balanced accuracy per verifier and study (the studies you read as a researcher), the mean and a rank."""

    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="leaderboard", responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        strict_query(request, ())
        return Response(leaderboard_for(logged_in_user(request)))
