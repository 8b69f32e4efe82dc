"""The data behind each report chart, computed without the rest of the report.

A chart request must not pay for bootstraps or scores it does not draw, so each chart reads
only the study frame (``metaeval.study_frame``: the same labels, under the same rules, as the
report's tables) and the statistic it shows. Each chart's numbers come from a function of the
frame (``label_counts``, ``preference_rows``, ``kappa_matrix``, ``verifier_rows``,
``annotator_rows``) that tests compare with the table carrying the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from annotation.models import Study
from metaeval import charts, stats
from metaeval import study_frame as frames
from metaeval.models import Verifier
from metaeval.verifiers.presets.pairwise import PAIRWISE_JUDGE
from metaeval.verifiers.report import verifier_report

from .agreement import categories_for
from .annotator_quality import reference_and_quality
from .options import ReportOptions

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from metaeval.study_frame import StudyFrame

__all__ = [
    "CHARTS",
    "ChartNotApplicable",
    "annotator_rows",
    "chart_figure",
    "chart_names",
    "kappa_matrix",
    "label_counts",
    "preference_rows",
    "verifier_rows",
]


class ChartNotApplicable(Exception):
    """The chart makes no sense for this study (e.g. preference bars of a verification study)."""


def label_counts(frame: StudyFrame) -> dict[str, int]:
    """How often each declared label was given among the labels agreement counts (the agreement table's
    ``label_distribution``, plus declared labels off its scale such as ``both_bad``)."""
    counts = frame.agreed["label"].value_counts()
    return {label: int(counts.get(label, 0)) for label in frame.study.labels}


def _label_title(frame: StudyFrame) -> str:
    if not frame.study.gold_in_agreement and (frame.items["gold_label"] != "").any():
        return "Label distribution (items without a gold label)"
    return "Label distribution"


def _labels(frame: StudyFrame) -> Figure:
    return charts.label_distribution_figure(label_counts(frame), title=_label_title(frame))


def preference_rows(frame: StudyFrame) -> list[tuple[str, dict[str, int]]]:
    """("all", counts) then (domain, counts) per domain when there are several: each 5-point label's count
    among the judgements the preference section counts."""
    study = frame.study
    if not study.is_preference or len(study.systems) != 2:
        raise ChartNotApplicable("preference bars are drawn for preference studies with two systems")
    labels = frame.agreed
    judged = labels.loc[labels["label"].isin(stats.PREFERENCE_LABELS)]
    rows = [("all", {str(k): int(v) for k, v in judged["label"].value_counts().items()})]
    domains = sorted(judged["domain"].unique())
    if len(domains) > 1:
        rows += [
            (str(d), {str(k): int(v) for k, v in judged.loc[judged["domain"] == d, "label"].value_counts().items()})
            for d in domains
        ]
    return rows


def _preference(frame: StudyFrame) -> Figure:
    return charts.preference_figure(preference_rows(frame), frame.study.systems)


def kappa_matrix(frame: StudyFrame) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(annotators, Cohen kappa per pair with NaN where undefined, items per pair): the agreement table's
    ``pairwise_cohen_kappa``, from the same table of the same labels."""
    table, _, _ = frame.agreed_rows.rating_table(categories_for(frame.study))
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
    return names, kappa, n


def _agreement(frame: StudyFrame) -> Figure:
    return charts.agreement_matrix_figure(*kappa_matrix(frame))


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


def _verifiers(study: Study, options: ReportOptions) -> Figure:
    # the report's bootstrap settings, so the intervals drawn are the table's
    sections = verifier_report(
        study,
        n_resamples=options.n_resamples,
        seed=options.seed,
        disagreements_limit=0,
        frame=frames.study_frame(study, options),
    )
    if not sections:
        raise ChartNotApplicable("the verifier chart is drawn for studies with verifiers")
    return charts.verifier_figure(verifier_rows(sections), no_ceiling_reason(sections))


def no_ceiling_reason(sections: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why the verifiers table shows no human ceiling, as its blanks say (the first verifier's: every
    verifier is compared on the same human labels), so the chart's legend and the table agree."""
    for section in sections.values():
        blank = (section.get("blanks") or {}).get("ceiling_human_kappa")
        if blank:
            return str(blank["reason"])
    return None


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


def _annotators(frame: StudyFrame, options: ReportOptions) -> Figure:
    _, _, quality = reference_and_quality(frame, options)
    rows, flagged = annotator_rows(quality)
    return charts.annotator_quality_figure(rows, flagged, quality["reference_rule"])


#: name -> (title, draw(frame, options)): every chart is drawn from the study frame the report reads.
CHARTS: dict[str, tuple[str, Callable[[StudyFrame, ReportOptions], Figure]]] = {
    "labels": ("Label distribution", lambda frame, _: _labels(frame)),
    "preference": ("Preferences, strong and slight", lambda frame, _: _preference(frame)),
    "agreement": ("Pairwise Cohen's kappa between annotators", lambda frame, _: _agreement(frame)),
    "verifiers": ("Verifiers against the human ceiling", lambda frame, options: _verifiers(frame.study, options)),
    "annotators": (
        "Annotators against the reference and the others",
        lambda frame, options: _annotators(frame, options),
    ),
}


def chart_figure(
    study: Study, name: str, options: ReportOptions | None = None, *, report: Mapping[str, Any] | None = None
) -> Figure:
    """The named chart of the study; KeyError for an unknown name.

    ``options`` are the report's (None: the defaults): which participants count and the reference rule
    come from them, as in the report's tables. ``report``, a built report of the data as it is now (the
    report cache's, with the same options), saves the two charts that need bootstraps from recomputing
    them: they are drawn from its sections.
    """
    if name not in CHARTS:
        raise KeyError(name)
    options = options or ReportOptions()
    if report is not None and name == "annotators" and report.get("annotator_quality"):
        quality = report["annotator_quality"]
        rows, flagged = annotator_rows(quality)
        return charts.annotator_quality_figure(rows, flagged, quality["reference_rule"])
    if report is not None and name == "verifiers" and "verifiers" in report:
        if not report["verifiers"]:
            raise ChartNotApplicable("the verifier chart is drawn for studies with verifiers")
        return charts.verifier_figure(verifier_rows(report["verifiers"]), no_ceiling_reason(report["verifiers"]))
    if name == "preference" and (not study.is_preference or len(study.systems) != 2):
        raise ChartNotApplicable("preference bars are drawn for preference studies with two systems")
    if name == "verifiers":  # the verifiers section, from the same study frame (metaeval.verifiers.report)
        return _verifiers(study, options)
    return CHARTS[name][1](frames.study_frame(study, options), options)


def chart_names(study: Study) -> list[str]:
    """The charts that apply to this study, in page order."""
    names = ["labels", "agreement", "annotators"]
    if study.is_preference:
        names.insert(1, "preference")
    if Verifier.objects.filter(study=study).exclude(preset=PAIRWISE_JUDGE.id).exists():
        names.append("verifiers")
    return names
