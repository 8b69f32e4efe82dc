"""The report's reference labels and per-annotator quality section.

``reference_section`` applies the report's reference rule (``?reference=``,
``--reference``, ``ReportOptions.reference``; see reference.py) and says how
many items each source provided; ``quality_section`` scores every annotator
against that reference, the others and gold, beside Dawid-Skene's estimate of
their confusion matrix. Both share one Dawid-Skene fit.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from annotation.models import Study
from annotation.selectors.adjudication import adjudicated_labels
from metaeval import stats

from .agreement import categories_for
from .options import ReportOptions
from .reference import Reference, ReferenceInputs, reference_labels

__all__ = ["reference_inputs", "reference_and_quality"]


def reference_inputs(labels: pd.DataFrame, items: pd.DataFrame, study: Study) -> ReferenceInputs:
    """Every human label (gold items too: gold accuracy needs them) and the items' gold labels."""
    return ReferenceInputs(
        labels=labels[["item", "annotator", "label"]],
        items=items[["item", "gold_label"]],
        categories=categories_for(study),
        adjudicated=pd.Series(adjudicated_labels(study).labels, dtype=object),
    )


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
    labels: pd.DataFrame, items: pd.DataFrame, study: Study, options: ReportOptions
) -> tuple[Reference, dict[str, Any], dict[str, Any]]:
    """(the reference, the report's ``reference`` section, its ``annotator_quality`` section)."""
    inputs = reference_inputs(labels, items, study)
    rule = options.reference or study.reference_rule
    reference = reference_labels(rule, inputs)
    gold = inputs.items.set_index("item")["gold_label"]
    fit = inputs.dawid_skene
    if inputs.on_scale.empty:
        quality: dict[str, Any] = {"annotators": {}, "reason": "no human labels yet"}
    else:
        quality = stats.annotator_quality(
            inputs.on_scale,
            inputs.categories,
            reference.labels,
            gold=gold[gold != ""],
            dawid_skene=fit,
            mace=stats.mace(inputs.on_scale, inputs.categories, seed=options.seed or 0),
            n_resamples=options.n_resamples,
            seed=options.seed,
        )
    quality["reference_rule"] = rule
    quality["categories"] = inputs.categories
    quality["dawid_skene"] = _dawid_skene_summary(fit)
    return reference, stats.json_ready(reference.summary()), stats.json_ready(quality)
