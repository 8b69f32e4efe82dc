"""Every pair of claim verifiers compared on the same claims against the report's reference labels (issue 33).

Side-by-side intervals are no test: two verifiers scored on the same claims are paired, so the
report gives, per pair, the differences in balanced accuracy, Cohen's kappa and accuracy with a
paired bootstrap interval over claims, and an exact McNemar test on right / wrong against the
reference, Holm-corrected across the pairs (``stats.compare_verifiers``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from annotation.models import Study
from metaeval import stats

from ..reference import Reference
from .agreement import categories_for
from .options import ReportOptions
from .present import estimate_row

__all__ = ["verifier_comparisons", "comparison_rows"]

#: The reference's column in the frame handed to the statistics (no verifier is named so).
REFERENCE = "\x00reference"


def verifier_comparisons(
    study: Study, reference: Reference, options: ReportOptions, verdicts: dict[str, pd.Series]
) -> dict[str, Any] | None:
    """None unless a verification study has predictions of two verifiers or more."""
    if study.is_preference or len(verdicts) < 2:
        return None
    cats = categories_for(study)
    reference_labels = reference.labels[reference.labels.isin(cats)]
    items = set(reference_labels.index).union(*(labels.index for labels in verdicts.values()))
    frame = pd.DataFrame({"item": sorted(items, key=str)})
    frame[REFERENCE] = frame["item"].map(reference_labels)
    for name, labels in verdicts.items():
        frame[name] = frame["item"].map(labels[labels.isin(cats)])
    out = stats.compare_verifiers(
        frame,
        reference_col=REFERENCE,
        verifiers=list(verdicts),
        labels=cats,
        n_boot=options.n_resamples,
        confidence=options.confidence,
        seed=options.seed,
    )
    out["reference_rule"] = reference.rule
    return out


#: The differences a pair's rows show, as the report names them.
DIFFERENCES = (
    ("balanced_accuracy", "Balanced accuracy"),
    ("cohen_kappa", "Cohen's kappa"),
    ("accuracy", "Accuracy"),
)


def comparison_rows(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per pair: each difference (A - B) with its interval, and the McNemar test with its Holm-corrected p."""
    rows = []
    for pair in (section or {}).get("pairs") or []:
        test = pair.get("mcnemar") or {}
        for key, name in DIFFERENCES:
            difference = (pair.get("difference") or {}).get(key)
            if not isinstance(difference, dict):
                continue
            rows.append(
                {
                    "pair": f"{pair['a']} − {pair['b']}",
                    "measure": name,
                    "row": estimate_row(name, difference, key),
                    "n": pair["n_items"],
                    "b": test.get("b"),
                    "c": test.get("c"),
                    "p": test.get("p_value"),
                    "p_holm": test.get("p_holm"),
                    "significant": test.get("significant"),
                    "first": key == DIFFERENCES[0][0],
                }
            )
    return rows
