"""The "pairwise_judges" section of a preference study's report: each LLM judge against the human majority.

Per judge (a verifier with the ``pairwise_judge`` preset): agreement with
the human strict majority (accuracy on non-tie items, Cohen kappa on the
5-point and the collapsed 3-way scale, with bootstrap intervals) beside the
human ceiling, overall and per domain, and the judge's own position effects
(inconsistency between the two presentation orders; share of verdicts for
List 1). The statistics are ``metaeval.stats.judge``; this module only
reads the study. A judge is read as it is now: per item, its latest prediction.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from annotation.models import Item, Study

from ..models import Prediction, Verifier
from ..stats import json_ready
from ..stats.judge import judge_position, judge_vs_humans
from ..stats.preference import PREFERENCE_LABELS
from ..study_frame import StudyFrame, study_frame
from .presets.pairwise import PAIRWISE_JUDGE

__all__ = ["judge_predictions", "pairwise_judge_report"]

_COLUMNS = ["item", "label", "order_labels", "error", "parse_status"]


def judge_predictions(verifier: Verifier) -> pd.DataFrame:
    """The judge's latest prediction per item: item (external id), label, order_labels, error, parse_status."""
    rows = (
        Prediction.objects.filter(verifier=verifier)
        .order_by("item_id", "-pk")
        .values_list("item__external_id", "label", "order_labels", "error", "parse_status")
    )
    frame = pd.DataFrame.from_records(list(rows), columns=_COLUMNS)
    return frame.drop_duplicates(subset=["item"], keep="first").reset_index(drop=True)


def _agreement(labels: pd.DataFrame, judged: pd.DataFrame, n_resamples: int, seed: int | None) -> dict[str, Any]:
    if labels.empty:
        return {"reason": "no human preference judgement on these items"}
    return judge_vs_humans(labels, judged[["item", "label"]], n_resamples=n_resamples, seed=seed)


def _judge_section(
    verifier: Verifier, labels: pd.DataFrame, domains: pd.Series, n_resamples: int, seed: int | None
) -> dict[str, Any]:
    predictions = judge_predictions(verifier)
    judged = predictions[predictions["label"].notna()]
    section: dict[str, Any] = {
        "preset": verifier.preset,
        "model": verifier.model,
        "n_items_judged": len(judged),
        "n_unparseable": int((predictions["parse_status"] == Prediction.ParseStatus.UNPARSEABLE).sum()),
        "n_errors": int((predictions["error"] != "").sum()),
        "agreement": _agreement(labels, judged, n_resamples, seed),
        "position": judge_position([list(pair or []) for pair in predictions["order_labels"]]),
        "by_domain": {},
    }
    item_domains = labels["item"].map(domains)
    judged_domains = judged["item"].map(domains)
    for domain in sorted(set(item_domains.dropna()) | set(judged_domains.dropna())):
        section["by_domain"][domain] = _agreement(
            labels[item_domains == domain], judged[judged_domains == domain], n_resamples, seed
        )
    return section


def pairwise_judge_report(
    study: Study, *, n_resamples: int = 1000, seed: int | None = 0, frame: StudyFrame | None = None
) -> dict[str, Any]:
    """``{judge name: {...}}`` for every pairwise judge of a preference study (``{}`` otherwise); the
    human judgements come from ``frame`` (the report's study frame; by default the study's own rules)."""
    if not study.is_preference:
        return {}
    judges = list(Verifier.objects.filter(study=study, preset=PAIRWISE_JUDGE.id).order_by("name"))
    if not judges:
        return {}
    reference, _ = (frame or study_frame(study)).verifier_reference()
    labels = reference[reference["label"].isin(PREFERENCE_LABELS)].reset_index(drop=True)
    domains = pd.Series(dict(Item.objects.filter(study=study).values_list("external_id", "domain")), dtype=object)
    out = {
        judge.name: {
            **_judge_section(judge, labels, domains, n_resamples, seed),
            "n_human_judgements": len(labels),
            "n_both_bad_left_out": int((reference["label"] == "both_bad").sum()),
        }
        for judge in judges
    }
    return json_ready(out)
