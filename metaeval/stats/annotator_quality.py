"""Per-annotator quality: each annotator against a reference, the others, gold, and Dawid-Skene.

For every annotator of a long table (``item``, ``annotator``, ``label``):

* Cohen's kappa with the reference labels (one per item, from whatever rule
  the report names), with a percentile bootstrap interval over items;
* Cohen's kappa with the leave-one-out strict majority of the OTHER
  annotators (items where the others tie are left out), so that an
  annotator is never scored against a reference they helped make;
* accuracy on gold items;
* the Dawid-Skene confusion matrix (true label rows, given label columns)
  and estimated accuracy, and MACE's competence (the probability that the
  annotator is not guessing), when those fits are given.

Flag (``FLAG_RULE``): an annotator whose kappa with the reference lies more
than ``FLAG_MARGIN`` below the median of all annotators' kappas, on at least
``FLAG_MIN_ITEMS`` items. The median, not the mean, so that one poor
annotator does not drag the bar down to themselves.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .aggregation import AggregationFit, Ratings
from .estimate import Estimate

__all__ = ["FLAG_MARGIN", "FLAG_MIN_ITEMS", "FLAG_RULE", "annotator_quality", "kappa_with_ci"]

FLAG_MARGIN = 0.2
FLAG_MIN_ITEMS = 20
FLAG_RULE = (
    f"flagged: kappa with the reference more than {FLAG_MARGIN} below the median kappa of all annotators, "
    f"on at least {FLAG_MIN_ITEMS} items"
)


def _kappa(conf: np.ndarray) -> float:
    n = conf.sum()
    if n == 0:
        return float("nan")
    po = np.trace(conf) / n
    pe = float(conf.sum(axis=1) @ conf.sum(axis=0)) / (n * n)
    return float("nan") if pe >= 1 else float((po - pe) / (1 - pe))


def kappa_with_ci(
    a: np.ndarray, b: np.ndarray, k: int, *, n_resamples: int = 1000, seed: int | None = 0, confidence: float = 0.95
) -> Estimate:
    """Cohen's kappa of two code vectors (same items, codes 0..k-1) with a percentile bootstrap CI."""
    n = len(a)
    if n == 0:
        return Estimate.undefined("no items in common", 0)
    conf = np.bincount(a * k + b, minlength=k * k).reshape(k, k)
    value = _kappa(conf)
    if not np.isfinite(value):
        return Estimate.undefined("kappa is undefined: both sides gave one and the same label throughout", n)
    if n_resamples <= 0 or n < 2:
        return Estimate(value, None, n)
    # resampling items = drawing the k x k confusion counts from a multinomial (all resamples at once)
    shares = conf.ravel() / n
    confs = np.random.default_rng(seed).multinomial(n, shares, size=n_resamples).reshape(n_resamples, k, k)
    po = np.trace(confs, axis1=1, axis2=2) / n
    pe = np.einsum("bi,bi->b", confs.sum(axis=2), confs.sum(axis=1)) / (n * n)
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = np.where(pe < 1, (po - pe) / (1 - pe), np.nan)
    draws = draws[np.isfinite(draws)]
    if not len(draws):
        return Estimate(value, None, n)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(draws, [tail, 100 - tail])
    return Estimate(value, None, n, ci=(float(lo), float(hi)))


def _loo_majority(grid: np.ndarray, who: int, k: int) -> np.ndarray:
    """Per item (row of ``grid``), the strict majority code of the annotators other than column ``who`` (-1 if none)."""
    others = np.delete(grid, who, axis=1)
    counts = np.stack([(others == c).sum(axis=1) for c in range(k)], axis=1)
    rated = counts.sum(axis=1)
    top = counts.max(axis=1, initial=0)
    return np.where((rated > 0) & (2 * top > rated), counts.argmax(axis=1), -1)


def _codes(values: pd.Series | np.ndarray, code_of: dict[Hashable, int]) -> np.ndarray:
    """``code_of[value]`` for each of ``values``, -1 for a value not in it.

    Why not ``Series.map(code_of)``: mapping 300,000 label strings through a dict one by one cost
    0.1 s of a big report; a hash lookup of the whole column in the categories' index is one call.
    """
    if not code_of:
        return np.full(len(values), -1, dtype=np.int64)
    found = pd.Index(list(code_of)).get_indexer(values)
    return np.where(found >= 0, np.fromiter(code_of.values(), dtype=np.int64, count=len(code_of))[found], -1)


def _aligned(labels: pd.Series | None, items: pd.Index, code_of: dict[Hashable, int]) -> np.ndarray:
    """Label codes of ``items`` from ``labels`` (item -> label), -1 where it has none in the categories."""
    if labels is None:
        return np.full(len(items), -1)
    codes = _codes(labels.to_numpy(), code_of)
    known = codes >= 0
    return pd.Series(codes[known], index=labels.index[known]).reindex(items).fillna(-1).to_numpy().astype(int)


def _label_grid(rows: pd.DataFrame, code_of: dict[Hashable, int]) -> tuple[np.ndarray, pd.Index, pd.Index]:
    """Items x annotators label codes (-1: no label), items and annotators sorted; an annotator's first
    label of an item counts. Why not ``pivot_table``: its grouping cost 0.1 s at 100,000 items."""
    item_code, items = pd.factorize(rows["item"], sort=True)
    annotator_code, annotators = pd.factorize(rows["annotator"], sort=True)
    cell = item_code.astype(np.int64) * len(annotators) + annotator_code
    _, first = np.unique(cell, return_index=True)
    grid = np.full((len(items), len(annotators)), -1)
    grid.flat[cell[first]] = _codes(rows["label"].to_numpy()[first], code_of)
    return grid, pd.Index(items), pd.Index(annotators)


def _ratings_grid(ratings: Ratings) -> tuple[np.ndarray, pd.Index, pd.Index]:
    """``_label_grid`` of the ratings ``ratings`` encodes (items and annotators sorted by name, as there)."""
    n_annotators = len(ratings.annotators)
    cell = ratings.item * n_annotators + ratings.annotator
    _, first = np.unique(cell, return_index=True)
    grid = np.full((len(ratings.items), n_annotators), -1)
    grid.flat[cell[first]] = ratings.label[first]
    return grid, pd.Index(ratings.items), pd.Index(ratings.annotators)


def annotator_quality(
    df: pd.DataFrame | Ratings,
    categories: Sequence[Hashable],
    reference: pd.Series,
    *,
    gold: pd.Series | None = None,
    dawid_skene: AggregationFit | None = None,
    mace: AggregationFit | None = None,
    n_resamples: int = 1000,
    seed: int | None = 0,
) -> dict[str, Any]:
    """``{"annotators": {name: {...}}, "flag_rule": ..., "median_kappa": ...}`` (JSON-ready after json_ready).

    ``reference`` maps item -> reference label (items without one absent or NaN);
    ``gold`` maps item -> gold label for the items that have one. ``df`` may be the table's
    ``Ratings`` on ``categories`` (the report's, shared with its Dawid-Skene and MACE fits).
    """
    cats = list(categories)
    k = len(cats)
    code_of = {c: i for i, c in enumerate(cats)}
    if isinstance(df, Ratings):
        if df.categories != tuple(cats):
            raise ValueError("categories given for encoded ratings differ from their categories")
        grid, items, annotators = _ratings_grid(df)
    else:
        rows = df.loc[df["label"].isin(cats), ["item", "annotator", "label"]]
        grid, items, annotators = _label_grid(rows, code_of)
    ref = _aligned(reference, items, code_of)
    gold_codes = _aligned(gold, items, code_of)
    out: dict[str, Any] = {}
    for column, who in enumerate(annotators):
        mine = grid[:, column]
        rated = mine >= 0
        shared = rated & (ref >= 0)
        entry: dict[str, Any] = {
            "n_labels": int(rated.sum()),
            "kappa_reference": kappa_with_ci(mine[shared], ref[shared], k, n_resamples=n_resamples, seed=seed),
        }
        others = _loo_majority(grid, column, k)
        keep = rated & (others >= 0)
        entry["kappa_others"] = kappa_with_ci(mine[keep], others[keep], k, n_resamples=n_resamples, seed=seed)
        on_gold = rated & (gold_codes >= 0)
        if on_gold.any():
            hits = int((mine[on_gold] == gold_codes[on_gold]).sum())
            n_gold = int(on_gold.sum())
            entry["gold_accuracy"] = Estimate(hits / n_gold, None, n_gold, extra={"n_correct": hits})
        else:
            entry["gold_accuracy"] = Estimate.undefined("no gold items labelled by this annotator", 0)
        if dawid_skene is not None and who in dawid_skene.confusion:
            entry["dawid_skene_accuracy"] = float(dawid_skene.annotator_accuracy[who])
            entry["dawid_skene_confusion"] = dawid_skene.confusion[who].round(6).to_numpy().tolist()
        if mace is not None and mace.competence is not None and who in mace.competence.index:
            entry["mace_competence"] = float(mace.competence[who])
        out[str(who)] = entry
    kappas = [
        e["kappa_reference"].value
        for e in out.values()
        if e["kappa_reference"].value is not None and e["kappa_reference"].n_items >= FLAG_MIN_ITEMS
    ]
    median = float(np.median(kappas)) if kappas else None
    for entry in out.values():
        est = entry["kappa_reference"]
        entry["flagged"] = bool(
            median is not None
            and est.value is not None
            and est.n_items >= FLAG_MIN_ITEMS
            and est.value < median - FLAG_MARGIN
        )
    return {"annotators": out, "median_kappa": median, "flag_rule": FLAG_RULE}
