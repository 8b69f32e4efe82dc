"""The data behind each report chart, computed without the rest of the report.

A chart request must not pay for bootstraps or scores it does not draw, so
each chart reads only the label frame and the statistic it shows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from annotation.models import Study
from metaeval import charts, selectors, stats
from metaeval.models import Verifier
from metaeval.verifiers.presets.pairwise import PAIRWISE_JUDGE
from metaeval.verifiers.report import verifier_report

from .agreement import agreement_table
from .annotator_quality import reference_and_quality
from .options import ReportOptions

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["CHARTS", "ChartNotApplicable", "chart_figure", "chart_names"]


class ChartNotApplicable(Exception):
    """The chart makes no sense for this study (e.g. preference bars of a verification study)."""


def _labels(study: Study) -> Figure:
    frame = selectors.label_frame(study)
    counts = frame["label"].value_counts()
    return charts.label_distribution_figure({label: int(counts.get(label, 0)) for label in study.labels})


def _preference(study: Study) -> Figure:
    if not study.is_preference or len(study.systems) != 2:
        raise ChartNotApplicable("preference bars are drawn for preference studies with two systems")
    frame = selectors.label_frame(study)
    judged = frame.loc[frame["label"].isin(stats.PREFERENCE_LABELS)]
    rows = [("all", judged["label"].value_counts().to_dict())]
    domains = sorted(judged["domain"].unique())
    if len(domains) > 1:
        rows += [(str(d), judged.loc[judged["domain"] == d, "label"].value_counts().to_dict()) for d in domains]
    return charts.preference_figure(rows, study.systems)


def _agreement(study: Study) -> Figure:
    table, _ = agreement_table(selectors.label_frame(study), study)
    names = [str(name) for name in table.annotator_index]
    index = {name: i for i, name in enumerate(names)}
    kappa = np.full((len(names), len(names)), np.nan)
    n = np.zeros((len(names), len(names)), dtype=int)
    np.fill_diagonal(kappa, 1.0)
    for pair in stats.pairwise_cohen_kappa(table):
        a, b = (index[str(x)] for x in pair.extra["annotators"])
        n[a, b] = n[b, a] = pair.n_items
        if pair.value is not None:
            kappa[a, b] = kappa[b, a] = pair.value
    return charts.agreement_matrix_figure(names, kappa, n)


def verifier_rows(sections: Mapping[str, Mapping[str, Any]]) -> list[charts.VerifierRow]:
    """(verifier, Cohen kappa, its 95% interval, mean human kappa on the same items) from the
    report's `verifiers` section, so the chart shows exactly the report's numbers."""
    rows = []
    for name, section in sections.items():
        kappa = section.get("cohen_kappa") or {}
        ceiling = ((section.get("human_ceiling") or {}).get("human") or {}).get("cohen_kappa") or {}
        ci = kappa.get("ci")
        rows.append((name, kappa.get("value"), (ci[0], ci[1]) if ci else None, ceiling.get("value")))
    return rows


def _verifiers(study: Study) -> Figure:
    sections = verifier_report(study, disagreements_limit=0)
    if not sections:
        raise ChartNotApplicable("the verifier chart is drawn for studies with verifiers")
    return charts.verifier_figure(verifier_rows(sections))


def annotator_rows(quality: Mapping[str, Any]) -> tuple[list[charts.VerifierRow], list[str]]:
    """(annotator, kappa with the reference, its interval, kappa with the others) and the flagged names,
    from the report's ``annotator_quality`` section."""
    rows, flagged = [], []
    for name, entry in quality.get("annotators", {}).items():
        kappa, others = entry["kappa_reference"], entry["kappa_others"]
        ci = kappa.get("ci")
        rows.append((name, kappa.get("value"), (ci[0], ci[1]) if ci else None, others.get("value")))
        if entry.get("flagged"):
            flagged.append(name)
    return rows, flagged


def _annotators(study: Study, reference: str | None = None) -> Figure:
    labels = selectors.label_frame(study, include_gold=True)
    options = ReportOptions(reference=reference)
    _, _, quality = reference_and_quality(labels, selectors.item_frame(study), study, options)
    rows, flagged = annotator_rows(quality)
    return charts.annotator_quality_figure(rows, flagged, quality["reference_rule"])


CHARTS: dict[str, tuple[str, Callable[[Study], Figure]]] = {
    "labels": ("Label distribution", _labels),
    "preference": ("Preferences, strong and slight", _preference),
    "agreement": ("Pairwise Cohen's kappa between annotators", _agreement),
    "verifiers": ("Verifiers against the human ceiling", _verifiers),
    "annotators": ("Annotators against the reference and the others", _annotators),
}


def chart_figure(
    study: Study, name: str, *, reference: str | None = None, report: Mapping[str, Any] | None = None
) -> Figure:
    """The named chart of the study; KeyError for an unknown name.

    ``reference`` is the report's reference rule (None: the study's); only the annotator chart depends on it.
    ``report``, a built report of the data as it is now (the report cache's), saves the two charts
    that need bootstraps from recomputing them: they are drawn from its sections.
    """
    if report is not None and name == "annotators" and report.get("annotator_quality"):
        quality = report["annotator_quality"]
        rows, flagged = annotator_rows(quality)
        return charts.annotator_quality_figure(rows, flagged, quality["reference_rule"])
    if report is not None and name == "verifiers" and "verifiers" in report:
        if not report["verifiers"]:
            raise ChartNotApplicable("the verifier chart is drawn for studies with verifiers")
        return charts.verifier_figure(verifier_rows(report["verifiers"]))
    if name == "annotators":
        return _annotators(study, reference)
    return CHARTS[name][1](study)


def chart_names(study: Study) -> list[str]:
    """The charts that apply to this study, in page order."""
    names = ["labels", "agreement", "annotators"]
    if study.is_preference:
        names.insert(1, "preference")
    if Verifier.objects.filter(study=study).exclude(preset=PAIRWISE_JUDGE.id).exists():
        names.append("verifiers")
    return names
