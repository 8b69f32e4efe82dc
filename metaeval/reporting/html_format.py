"""The report as HTML: the context both the page and the standalone file render.

The page (``templates/metaeval/report.html``) and the file written by
``manage.py report --format html`` share ``_report_body.html``; the file
embeds its charts as data URIs and its stylesheet, so it opens offline
on its own.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.contrib.staticfiles import finders
from django.core.paginator import Page
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from annotation.models import Study
from metaeval import charts

from .charts import CHARTS, chart_figure, chart_names
from .latex_format import report_tables
from .options import ReportOptions
from .ppi import ppi_rows
from .present import (
    SMALL_N,
    agreement_rows,
    ceiling_rows,
    condition_rows,
    credibility_rows,
    domain_rows,
    pair_rows,
    preference_rows,
    question_blocks,
    questionnaire_blocks,
    score_rows,
    veriscore_rows,
)
from .verifier_comparisons import comparison_rows

__all__ = ["DISAGREEMENTS_PER_PAGE", "agreement_collapsed", "report_context", "report_html"]

#: Disagreements per page of the report page (``?page=``); the downloads hold them all.
DISAGREEMENTS_PER_PAGE = 100
STYLESHEETS = ("css/claimlab.css", "css/report.css", "css/fit.css")
#: What ``reverse`` leaves unquoted in a path argument (django.urls.resolvers: RFC 3986 sub-delimiters and /~:@).
URL_SAFE = "!$&'()*+,;=/~:@"


def _score_context(block: dict[str, Any] | None) -> dict[str, Any] | None:
    if not block or block.get("available") is False:
        return None
    return {
        "factscore_rows": score_rows(block["factscore"], "factscore"),
        "ragas_rows": score_rows(block["ragas_faithfulness"], "faithfulness"),
        "veriscore_rows": veriscore_rows(block["veriscore"]),
    }


def _preference_context(pref: dict[str, Any] | None) -> dict[str, Any] | None:
    if not pref or pref.get("available") is False:
        return None
    return {
        "rows": preference_rows(pref["counts"]),
        "domains": [
            {"domain": domain, "rows": preference_rows(counts), "n": counts["n"], "sign_test": counts["sign_test"]}
            for domain, counts in pref["by_domain"].items()
        ],
        "three_way_rows": agreement_rows(pref["three_way"]),
    }


def agreement_collapsed(report: dict[str, Any]) -> str:
    """Why the agreement sections have nothing to show (one line), or "" when they do.

    Agreement, pairwise kappa, the human ceiling and disagreements all need
    items labelled by two annotators; a verifier-vs-reference study (one label
    per item, like the WiCE demo) would otherwise show rows of dashes.
    """
    names = "agreement, pairwise kappa, the human ceiling and the disagreement list"
    if not report["n_annotations"]:
        return f"No labels yet: {names} appear once items have labels from two annotators."
    if report["agreement"].get("consensus"):
        return ""
    per_item = report["annotators_per_item"]
    return (
        f"Nothing to show for {names}: no item has labels from two annotators "
        f"({per_item} annotator{'s' if per_item != 1 else ''} per item, {report['n_annotations']:,} labels)."
    )


def _linked(study: Study, entries: Sequence[dict[str, Any]], link_items: bool) -> list[dict[str, Any]]:
    """The entries with their item page's URL: one ``reverse`` for all (a ``{% url %}`` per row cost
    more than the rest of the page)."""
    if not link_items:
        return list(entries)
    marker = "ITEM-ID-MARKER"
    pattern = reverse("annotation:item_detail", args=[study.slug, marker])
    return [{**entry, "url": pattern.replace(marker, quote(entry["item"], safe=URL_SAFE))} for entry in entries]


def report_context(
    study: Study,
    report: dict[str, Any],
    *,
    chart_sources: dict[str, dict[str, str]],
    link_items: bool,
    disagreements: Page | None = None,
) -> dict[str, Any]:
    """Template context for the report body; ``chart_sources[name] = {"svg": src, "pdf": href}``.

    ``disagreements`` is the page of the disagreement list to show (the report page); without
    it every disagreement is listed (the standalone file keeps all rows).
    """
    agreement = report["agreement"]
    scores = report["scores"] if report["scores"] and report["scores"].get("available") is not False else None
    credibility = scores["credibility"] if scores else None
    return {
        "study": study,
        "report": report,
        "agreement_rows": agreement_rows(agreement),
        "binary_rows": agreement_rows(report["binary"]),
        "pair_rows": pair_rows(agreement),
        "pair_rows_linear": pair_rows(agreement, "linear"),
        "pair_rows_quadratic": pair_rows(agreement, "quadratic"),
        "domain_rows": domain_rows(report["by_domain"]),
        "preference": _preference_context(report["preference"]),
        "human_scores": _score_context(scores["human"]) if scores else None,
        "gold_scores": _score_context(scores["gold"]) if scores else None,
        "reference_scores": _score_context(scores["reference"]) if scores and "reference" in scores else None,
        "verifier_scores": [
            {"name": name, "block": block, "tables": _score_context(block)}
            for name, block in (scores.get("verifiers", {}) if scores else {}).items()
        ],
        "credibility_rows": (
            credibility_rows(credibility) if credibility and credibility.get("available") is not False else None
        ),
        "ceiling_rows": ceiling_rows(report["human_ceiling"]),
        "question_blocks": question_blocks(report.get("questions")),
        "condition_rows": condition_rows(report.get("conditions")),
        "ppi_rows": ppi_rows(report.get("ppi")),
        "comparison_rows": comparison_rows(report.get("verifier_comparisons")),
        "questionnaire_blocks": questionnaire_blocks(report.get("questionnaires")),
        "disagreements": _linked(
            study, disagreements if disagreements is not None else report["disagreements"], link_items
        ),
        "disagreements_page": disagreements,
        "charts": [
            {"name": name, "title": CHARTS[name][0], **chart_sources[name]}
            for name in chart_names(study)
            if name in chart_sources
        ],
        "link_items": link_items,
        "small_n": SMALL_N,
        "agreement_collapsed": agreement_collapsed(report),
        "tex_tables": list(report_tables(report)),
    }


def _stylesheet() -> SafeString:
    """Our own static CSS, inlined into the standalone file (no data in it, so safe to mark)."""
    parts = []
    for name in STYLESHEETS:
        path = finders.find(name)
        if path:
            parts.append(Path(path).read_text(encoding="utf-8").replace("</", "<\\/"))
    return mark_safe("\n".join(parts))


def report_html(study: Study, report: dict[str, Any]) -> str:
    """A standalone HTML document: styles inlined, charts as data URIs, no links to the server."""
    sources = {}
    given = report["options"]
    options = ReportOptions(
        reference=given.get("reference"), include_screened_out=bool(given.get("include_screened_out"))
    )
    for name in chart_names(study):
        figure = chart_figure(study, name, options, report=report)
        svg = charts.render(figure, "svg")
        sources[name] = {"svg": "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii"), "pdf": ""}
    context = report_context(study, report, chart_sources=sources, link_items=False)
    return render_to_string("metaeval/report_document.html", {**context, "stylesheet": _stylesheet()})
