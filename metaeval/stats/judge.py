"""A pairwise LLM judge against the human preference judgements, and its own position effects.

Pure pandas/numpy, usable in a notebook. Labels are the 5-point system-space
scale ``a_strong ... b_strong``; the 3-way collapse keeps only the direction
(``a`` / ``tie`` / ``b``). The reference is the human strict majority per
item (items without one are counted, never resolved at random), on each
scale separately. "Accuracy on non-tie items" is the share of items whose
3-way human majority prefers a system on which the judge prefers the same
system (a judge's tie counts as a miss). The human ceiling scores each
annotator, and the judge, against the majority of the *other* annotators on
the same items (``human_ceiling``), so the judge's numbers have a human
reference beside them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import pandas as pd

from .classification import classification_metrics
from .estimate import Estimate
from .preference import PREFERENCE_3WAY, PREFERENCE_LABELS, position_bias
from .table import RatingTable, build_table, collapse_labels
from .verifier import _strict_majority, human_ceiling, prediction_codes, verifier_vs_majority

__all__ = ["DIRECTIONS", "judge_position", "judge_vs_humans", "non_tie_accuracy"]

DIRECTIONS = ("a", "tie", "b")
_NOT_DECISIVE = "no item has a human majority for one system"


def _three_way(frame: pd.DataFrame, label: str = "label") -> pd.DataFrame:
    return collapse_labels(frame, cast("Mapping[Hashable, Hashable | None]", PREFERENCE_3WAY), label=label)


def non_tie_accuracy(
    table: RatingTable, judge_codes: np.ndarray, *, n_resamples: int = 0, seed: int | None = 0
) -> dict[str, Any]:
    """On a 3-way table: the judge against the human majority on items whose majority prefers a system.

    Returns ``{"judge": Estimate, "ceiling": {"human": Estimate, "judge": Estimate}}``; the ceiling is
    each annotator against the majority of the others on such items (means over annotators), with the
    judge scored against that same majority on the same items.
    """
    tie = list(table.categories).index("tie")
    vote, _ = _strict_majority(table.counts)
    use = (vote >= 0) & (vote != tie) & (judge_codes >= 0)
    if use.any():
        metrics = classification_metrics(
            vote[use], judge_codes[use], table.categories, n_resamples=n_resamples, seed=seed
        )
        judge = metrics["accuracy"]
    else:
        judge = Estimate.undefined(_NOT_DECISIVE, 0)
    humans, judged, n_used = [], [], 0
    k = table.n_categories
    for j in range(table.n_annotators):
        own = table.codes[:, j]
        rated = own >= 0
        others = table.counts - np.eye(k, dtype=np.int64)[np.where(rated, own, 0)] * rated[:, None]
        maj, _ = _strict_majority(others)
        mine = rated & (maj >= 0) & (maj != tie) & (judge_codes >= 0)
        if mine.any():
            humans.append(float((own[mine] == maj[mine]).mean()))
            judged.append(float((judge_codes[mine] == maj[mine]).mean()))
            n_used += int(mine.sum())
    if humans:
        ceiling = {
            "human": Estimate(float(np.mean(humans)), None, n_used, extra={"n_annotators": len(humans)}),
            "judge": Estimate(float(np.mean(judged)), None, n_used, extra={"n_annotators": len(judged)}),
        }
    else:
        undefined = Estimate.undefined("no annotator has a decisive majority among the others", 0)
        ceiling = {"human": undefined, "judge": undefined}
    return {"judge": judge, "ceiling": ceiling}


def _short(metrics: dict[str, Any]) -> dict[str, Any]:
    keep = ("n_items", "n_majority", "n_no_majority", "n_predicted", "coverage", "accuracy", "cohen_kappa")
    return {key: metrics[key] for key in keep if key in metrics} | {"confusion_matrix": metrics["confusion_matrix"]}


def judge_vs_humans(
    labels: pd.DataFrame,
    judge: pd.DataFrame,
    *,
    n_resamples: int = 0,
    seed: int | None = 0,
) -> dict[str, Any]:
    """The judge's agreement with the human majority, beside the human ceiling.

    ``labels``: one row per human judgement (``item``, ``annotator``,
    ``label`` on the 5-point scale). ``judge``: one row per item (``item``,
    ``label`` on the same scale, None where unreadable). Returns
    ``{"five_point": {...}, "three_way": {...}, "non_tie_accuracy": ...,
    "ceiling": {...}}`` with Cohen kappa (5-point: over the full scale, unweighted)
    and accuracy with percentile bootstrap intervals over items.
    """
    judge = judge.loc[:, ["item", "label"]]
    five = build_table(labels, list(PREFERENCE_LABELS))
    three_labels = _three_way(labels)
    three = build_table(three_labels, list(DIRECTIONS))
    judge_three = judge.assign(label=judge["label"].map(PREFERENCE_3WAY))
    codes_three, _ = prediction_codes(three, judge_three)
    ceiling_five = human_ceiling(five, judge)
    ceiling_three = human_ceiling(three, judge_three)
    decisive = non_tie_accuracy(three, codes_three, n_resamples=n_resamples, seed=seed)
    return {
        "five_point": _short(verifier_vs_majority(five, judge, n_resamples=n_resamples, seed=seed)),
        "three_way": _short(verifier_vs_majority(three, judge_three, n_resamples=n_resamples, seed=seed)),
        "non_tie_accuracy": decisive["judge"],
        "ceiling": {
            "five_point": {
                "human": ceiling_five["mean"]["human"],
                "judge": ceiling_five["mean"]["verifier"],
            },
            "three_way": {
                "human": ceiling_three["mean"]["human"],
                "judge": ceiling_three["mean"]["verifier"],
            },
            "non_tie_accuracy": decisive["ceiling"],
            "rule": "each annotator against the strict majority of the other annotators; the judge against that "
            "same majority on the same items (means over annotators)",
        },
    }


def judge_position(order_labels: Sequence[Sequence[str | None]]) -> dict[str, Any]:
    """Position effects of a judge asked twice per item: first A's list as List 1, then B's.

    ``order_labels[i]`` is the pair of system-space labels of item ``i``.
    Position inconsistency is the share of items (both orders readable) whose
    two verdicts prefer different systems (3-way; "exact" on the 5-point
    scale). Position bias is the share of decisive single-order verdicts that
    prefer the list shown as List 1, with an exact binomial test of 0.5.
    """
    pairs = [pair for pair in order_labels if len(pair) == 2 and all(label is not None for label in pair)]
    n = len(pairs)
    directions = [(PREFERENCE_3WAY[str(first)], PREFERENCE_3WAY[str(second)]) for first, second in pairs]
    if n:
        inconsistent = sum(first != second for first, second in directions)
        inconsistency = Estimate(inconsistent / n, None, n, extra={"n_inconsistent": inconsistent})
        exact_off = sum(first != second for first, second in pairs)
        exact = Estimate(exact_off / n, None, n, extra={"n_inconsistent": exact_off})
    else:
        inconsistency = exact = Estimate.undefined("no item has a readable verdict in both orders", 0)
    shown_first, winner = [], []
    for first, second in directions:
        shown_first += ["a", "b"]  # order 0: A's list is List 1; order 1: B's
        winner += [None if first == "tie" else first, None if second == "tie" else second]
    return {
        "n_items": n,
        "position_inconsistency": inconsistency,
        "position_inconsistency_exact": exact,
        "list_1_preferred": position_bias(shown_first, winner),
    }
