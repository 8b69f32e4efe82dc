"""Automatic verifier against humans, and the human ceiling beside it.

The reference is the human strict-majority label per item; items without one
(a 1-1 or 2-2 split) are excluded and counted, never resolved at random.
A verifier's agreement with that majority means little alone, so
``human_ceiling`` scores each annotator against the majority of the OTHER
annotators and the verifier against that very same majority on the very
same items: the gap to the ceiling is the number to report.

Results are dicts of ``Estimate``; ``json_ready`` turns them into JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .classification import classification_metrics
from .estimate import Estimate
from .table import RatingTable, as_table

__all__ = [
    "MajorityVote",
    "majority_vote",
    "prediction_codes",
    "verifier_vs_majority",
    "human_ceiling",
]


@dataclass(frozen=True)
class MajorityVote:
    """Per item of the table: the strict-majority code, or -1 (none / too few ratings)."""

    codes: np.ndarray
    n_rated: int
    n_no_majority: int
    n_too_few_ratings: int
    table: RatingTable

    @property
    def n_items(self) -> int:
        """Items that have a majority label."""
        return int((self.codes >= 0).sum())

    def labels(self) -> pd.Series:
        """Majority labels indexed by item key (items without one left out)."""
        has = self.codes >= 0
        return pd.Series(self.table.label_of(self.codes[has]), index=self.table.item_index[has], name="label")


def _strict_majority(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(majority code or -1, number of ratings) per row of a count matrix."""
    r = counts.sum(axis=1)
    if counts.shape[1] == 0:
        return np.full(len(counts), -1), r
    top = counts.max(axis=1)
    code = np.where(2 * top > r, counts.argmax(axis=1), -1)
    return code, r


def majority_vote(
    data: RatingTable | pd.DataFrame, categories: Sequence | None = None, *, min_ratings: int = 1
) -> MajorityVote:
    """Strict-majority human label per item (more than half of its ratings).

    Items with fewer than ``min_ratings`` ratings get none and are counted in
    ``n_too_few_ratings``; ties in ``n_no_majority``.
    """
    table = as_table(data, categories)
    code, r = _strict_majority(table.counts)
    enough = r >= max(min_ratings, 1)
    code = np.where(enough, code, -1)
    return MajorityVote(
        codes=code,
        n_rated=int(enough.sum()),
        n_no_majority=int((enough & (code < 0)).sum()),
        n_too_few_ratings=int((~enough).sum()),
        table=table,
    )


def prediction_codes(
    table: RatingTable, predictions: pd.DataFrame, *, item: str | Sequence[str] | None = None, label: str = "label"
) -> tuple[np.ndarray, dict[str, int]]:
    """Prediction code per table item (-1 = none) and counts of what was dropped.

    Predictions use the table's category list (another label is a
    ValueError); a missing label (a failed or unparsable call) counts as no
    prediction; one prediction per item.
    """
    cols = [item] if isinstance(item, str) else list(item or table.item_columns)
    present = predictions[label].notna().to_numpy()
    preds = predictions.loc[present]
    codes = pd.Index(list(table.categories)).get_indexer(preds[label]).astype(np.int64)
    if (codes < 0).any():
        bad = pd.unique(preds[label][codes < 0])[:10]
        raise ValueError(f"prediction labels not in the categories {list(table.categories)!r}: {list(bad)!r}")
    pos = table.item_codes_for(preds, cols)
    matched = pos >= 0
    if len(np.unique(pos[matched])) != int(matched.sum()):
        raise ValueError("more than one prediction for some items")
    out = np.full(table.n_items, -1, dtype=np.int64)
    out[pos[matched]] = codes[matched]
    return out, {
        "n_predictions_missing_label": int((~present).sum()),
        "n_predictions_unknown_item": int((~matched).sum()),
    }


def verifier_vs_majority(
    data: RatingTable | pd.DataFrame,
    predictions: pd.DataFrame,
    categories: Sequence | None = None,
    *,
    item: str | Sequence[str] | None = None,
    label: str = "label",
    min_ratings: int = 1,
    n_resamples: int = 0,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The verifier against the human majority label, with coverage.

    Coverage is the share of items with a human majority that have a
    prediction; the metrics use exactly those items (with bootstrap
    intervals over them when ``n_resamples`` is given).
    """
    table = as_table(data, categories)
    vote = majority_vote(table, min_ratings=min_ratings)
    pred, dropped = prediction_codes(table, predictions, item=item, label=label)
    has_majority = vote.codes >= 0
    use = has_majority & (pred >= 0)
    n_major = int(has_majority.sum())
    coverage = (
        Estimate(use.sum() / n_major, None, n_major)
        if n_major
        else Estimate.undefined("no item has a human majority label", 0)
    )
    return {
        "n_items": table.n_items,
        "n_majority": n_major,
        "n_no_majority": vote.n_no_majority,
        "n_too_few_ratings": vote.n_too_few_ratings,
        "n_predicted": int(use.sum()),
        "n_predictions_without_majority": int(((pred >= 0) & ~has_majority).sum()),
        **dropped,
        "coverage": coverage,
        **classification_metrics(
            vote.codes[use], pred[use], table.categories, n_resamples=n_resamples, seed=seed, confidence=confidence
        ),
    }


#: Why a ceiling comparison has no item, by what is missing (classification_metrics' own reason speaks of a
#: verifier against the human majority, which is not what the ceiling compares).
NO_OTHER_LABEL = "no item this annotator labelled has a label from another annotator"
OTHERS_TIE = "the other annotators tie on every item this annotator labelled: there is no majority of the others"
NO_PREDICTION = "the verifier has no label on the items where the others have a majority"
SAME_CATEGORY = (
    "{who} and the majority of the other annotators used one and the same category on every item compared: "
    "chance disagreement is 0, so kappa is undefined"
)


def _short(metrics: dict[str, Any], empty: str = "", who: str = "") -> dict[str, Any]:
    """The ceiling's numbers of one comparison; an undefined one says why in the ceiling's own terms."""
    out = {key: metrics[key] for key in ("n_items", "accuracy", "cohen_kappa", "macro_f1")}
    if empty and out["n_items"] == 0:
        return {**out, **{key: Estimate.undefined(empty, 0) for key in ("accuracy", "cohen_kappa", "macro_f1")}}
    if who and not out["cohen_kappa"].defined:
        out["cohen_kappa"] = Estimate.undefined(SAME_CATEGORY.format(who=who), out["n_items"])
    return out


def _mean(entries: list[dict], who: str, key: str) -> Estimate:
    """The mean over annotators with a defined value; when none has one, why (each cause with its count)."""
    vals = [e[who][key].value for e in entries if e[who][key].value is not None]
    if not vals:
        if not entries:
            return Estimate.undefined("there is no annotator to compare", 0)
        causes: dict[str, int] = {}
        for entry in entries:
            causes[entry[who][key].reason] = causes.get(entry[who][key].reason, 0) + 1
        why = "; ".join(f"{reason} ({count} of {len(entries)})" for reason, count in causes.items())
        return Estimate.undefined(f"undefined for every annotator: {why}", 0)
    return Estimate(
        float(np.mean(vals)), None, sum(e[who]["n_items"] for e in entries), extra={"n_annotators": len(vals)}
    )


def _empty_reason(enough: np.ndarray, has: np.ndarray) -> str:
    """Why an annotator's ceiling comparison rests on no item."""
    if not enough.any():
        return NO_OTHER_LABEL
    return OTHERS_TIE if not has.any() else NO_PREDICTION


def human_ceiling(
    data: RatingTable | pd.DataFrame,
    predictions: pd.DataFrame | None = None,
    categories: Sequence | None = None,
    *,
    item: str | Sequence[str] | None = None,
    label: str = "label",
    min_others: int = 1,
) -> dict[str, Any]:
    """Each annotator, and the verifier, against the majority of the others.

    For annotator ``a``: on items that ``a`` labelled, that have a strict
    majority among the other annotators' ratings (at least ``min_others`` of
    them) and, when predictions are given, a prediction, compare ``a``'s
    label and the verifier's label with that majority. Returns
    ``{"annotators": [{"annotator", "n_items", "human": {...},
    "verifier": {...}}, ...], "mean": {"human": ..., "verifier": ...}}``.
    """
    table = as_table(data, categories)
    pred = None
    if predictions is not None:
        pred, _ = prediction_codes(table, predictions, item=item, label=label)
    codes = table.codes
    k = table.n_categories
    entries = []
    for j, name in enumerate(table.annotator_index):
        own = codes[:, j]
        rated = own >= 0
        others = table.counts - np.eye(k, dtype=np.int64)[np.where(rated, own, 0)] * rated[:, None]
        maj, r_o = _strict_majority(others)
        enough = rated & (r_o >= max(min_others, 1))
        has = enough & (maj >= 0)
        use = has if pred is None else has & (pred >= 0)
        empty = _empty_reason(enough, has)
        entry: dict[str, Any] = {
            "annotator": name,
            "n_items": int(use.sum()),
            "n_rated": int(rated.sum()),
            "n_no_majority_of_others": int((enough & (maj < 0)).sum()),
            "human": _short(classification_metrics(maj[use], own[use], table.categories), empty, "the annotator"),
        }
        if pred is not None:
            entry["n_without_prediction"] = int((has & (pred < 0)).sum())
            entry["verifier"] = _short(
                classification_metrics(maj[use], pred[use], table.categories), empty, "the verifier"
            )
        entries.append(entry)
    mean = {"human": {key: _mean(entries, "human", key) for key in ("accuracy", "cohen_kappa", "macro_f1")}}
    if pred is not None:
        mean["verifier"] = {key: _mean(entries, "verifier", key) for key in ("accuracy", "cohen_kappa", "macro_f1")}
    return {"annotators": entries, "mean": mean, "min_others": min_others}
