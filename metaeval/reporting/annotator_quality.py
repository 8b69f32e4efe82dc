"""The report's reference labels and per-annotator quality section.

``reference_section`` applies the report's reference rule (``?reference=``,
``--reference``, ``ReportOptions.reference``; see reference.py) and says how
many items each source provided; ``quality_section`` scores every annotator
against that reference, the others and gold, beside Dawid-Skene's estimate of
their confusion matrix. Both share one Dawid-Skene fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from metaeval import stats

from ..reference import Reference
from .options import ReportOptions

if TYPE_CHECKING:
    from metaeval.study_frame import StudyFrame

__all__ = ["reference_and_quality"]


def _dawid_skene_summary(fit: stats.AggregationFit | None) -> dict[str, Any] | None:
    if fit is None:
        return None
    confidence = fit.confidence
    return {
        **fit.convergence(),
        "categories": list(fit.categories),
        "priors": {str(k): float(v) for k, v in (fit.priors if fit.priors is not None else pd.Series()).items()},
        "n_items": len(fit.posteriors),
        "mean_confidence": float(confidence.mean()),
        "n_items_confidence_below_0_9": int((confidence < 0.9).sum()),
    }


def reference_and_quality(
    frame: StudyFrame, options: ReportOptions
) -> tuple[Reference, dict[str, Any], dict[str, Any]]:
    """(the reference, the report's ``reference`` section, its ``annotator_quality`` section).

    Both from the study frame (``metaeval.study_frame``): its labels (gold items' too: gold
    accuracy needs them), its reference rule and the Dawid-Skene fit its reference inputs share.
    """
    inputs = frame.reference_inputs
    rule = frame.rule
    reference = frame.reference
    gold = inputs.items.set_index("item")["gold_label"]
    fit = inputs.dawid_skene
    if not inputs.any_on_scale:
        quality: dict[str, Any] = {"annotators": {}, "reason": "no human labels yet"}
    else:
        # the labels as the models read them, encoded once for the Dawid-Skene fit, MACE and the quality
        ratings = inputs.ratings
        quality = stats.annotator_quality(
            ratings,
            inputs.categories,
            reference.labels,
            gold=gold[gold != ""],
            dawid_skene=fit,
            mace=stats.mace(ratings, inputs.categories, seed=options.seed or 0),
            n_resamples=options.n_resamples,
            seed=options.seed,
        )
    quality["reference_rule"] = rule
    quality["categories"] = inputs.categories
    quality["dawid_skene"] = _dawid_skene_summary(fit)
    return reference, stats.json_ready(reference.summary()), stats.json_ready(quality)
