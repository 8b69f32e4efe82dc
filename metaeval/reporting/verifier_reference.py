"""Each claim verifier against the report's reference labels (the rule the report names).

The verifiers section scores every verifier against the strict human majority
beside the human ceiling; this one repeats the headline numbers against the
reference the researcher chose (gold, majority, Dawid-Skene, ...), on the items
that have a reference, and says how many that is.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from annotation.models import Study
from metaeval import stats
from metaeval.models import Verifier
from metaeval.verifiers.presets.pairwise import PAIRWISE_JUDGE
from metaeval.verifiers.selectors import current_predictions

from ..reference import Reference
from .agreement import categories_for
from .options import ReportOptions

__all__ = ["verifiers_vs_reference"]


def verifiers_vs_reference(
    study: Study, reference: Reference, options: ReportOptions, predictions: pd.DataFrame | None = None
) -> dict[str, Any]:
    """``{verifier name: {n, accuracy, kappa with CI, n_without_reference}}``; ``{}`` without verifiers.
    ``predictions``: the study's ``current_predictions``, when the caller (the report) has them."""
    verifiers = list(Verifier.objects.filter(study=study).exclude(preset=PAIRWISE_JUDGE.id).order_by("name"))
    if not verifiers or study.is_preference:
        return {}
    cats = categories_for(study)
    code = {c: i for i, c in enumerate(cats)}
    predictions = current_predictions(study) if predictions is None else predictions
    ref = reference.labels[reference.labels.isin(cats)]
    out: dict[str, Any] = {}
    for verifier in verifiers:
        rows = predictions[(predictions["verifier_id"] == verifier.pk) & predictions["label"].isin(cats)]
        pred = rows.drop_duplicates("item").set_index("item")["label"]
        shared = pred.index.intersection(ref.index)
        a = pred[shared].map(code).to_numpy(dtype=int)
        b = ref[shared].map(code).to_numpy(dtype=int)
        kappa = stats.kappa_with_ci(a, b, len(cats), n_resamples=options.n_resamples, seed=options.seed)
        n = len(shared)
        out[verifier.name] = {
            "reference_rule": reference.rule,
            "n": n,
            "n_labelled": len(pred),
            "n_without_reference": len(pred) - n,
            "accuracy": stats.Estimate(float((a == b).mean()), None, n)
            if n
            else stats.Estimate.undefined("no labelled item has a reference label", 0),
            "cohen_kappa": kappa,
        }
    return stats.json_ready(out)
