"""Inter-annotator agreement: chance-corrected coefficients and the raw shares
that explain them.

Every function takes a ``RatingTable`` (or a long DataFrame with ``item``,
``annotator``, ``label``, built on the fly with ``categories``) and returns an
``Estimate`` whose value is ``None`` with a reason when the coefficient is
undefined (all ratings in one category, fewer than two items, one rating per
item, a pair of annotators with nothing in common). Kappa beside AC1,
Randolph's kappa and raw agreement lets a reader see the kappa paradox: a low
kappa at high agreement on skewed labels.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal, TypeAlias

import krippendorff
import numpy as np
import pandas as pd

from .estimate import Estimate
from .kernels import (
    Kernel,
    alpha_kernel,
    chance_corrected_kernel,
    fleiss_kernel,
    fleiss_parts,
    gwet_parts,
    share_kernel,
)
from .table import RatingTable, as_table

__all__ = [
    "fleiss_kappa",
    "fleiss_kappa_generalized",
    "gwet_ac1",
    "randolph_kappa",
    "percent_agreement",
    "full_agreement",
    "majority_agreement",
    "consensus_distribution",
    "label_distribution",
    "krippendorff_alpha",
    "cohen_kappa",
    "pairwise_cohen_kappa",
    "mean_cohen_kappa",
    "cohen_weights",
    "interval_values",
    "pattern_sums",
]

Data: TypeAlias = RatingTable | pd.DataFrame
Weights: TypeAlias = Literal["linear", "quadratic"] | None
Level: TypeAlias = Literal["nominal", "ordinal", "interval"]

_ONE = 1.0 - 1e-12  # chance agreement at (or within rounding of) 1 means undefined
ALL_ONE_CATEGORY = "all ratings fall in one category: chance agreement is 1, so kappa is undefined"
ONE_RATING = "no item has two or more ratings, so agreement is undefined"
TOO_FEW_ITEMS = "fewer than 2 items with two or more ratings"


def pattern_sums(table: RatingTable, kernel: Kernel) -> np.ndarray:
    """Sum of the kernel's per-item features over all items (via count patterns)."""
    rows, inverse = table.patterns
    freq = np.bincount(inverse, minlength=len(rows)).astype(np.float64)
    return freq @ kernel.features(rows)


def _n_paired(table: RatingTable) -> int:
    return int((table.ratings_per_item >= 2).sum())


def _paired_check(table: RatingTable) -> str | None:
    """Reason why no pairwise statistic can be computed, or None."""
    if table.n_items == 0:
        return "no ratings"
    n2 = _n_paired(table)
    if n2 == 0:
        return ONE_RATING
    if n2 < 2:
        return TOO_FEW_ITEMS
    return None


# --- Fleiss and Gwet's generalisation -------------------------------------------


def fleiss_kappa(data: Data, categories: Sequence[Hashable] | None = None, *, n_raters: int | None = None) -> Estimate:
    """Fleiss (1971) kappa over the items that carry all ``n_raters`` ratings.

    Fleiss' formula assumes the same number of raters per item, so items with
    fewer (or more) ratings are left out and counted in ``n_items_left_out``.
    ``n_raters`` defaults to the largest number of ratings on any item.
    """
    table = as_table(data, categories)
    r = table.ratings_per_item
    m = int(n_raters if n_raters is not None else (r.max() if len(r) else 0))
    n_full = int((r == m).sum())
    base = {"n_raters": m, "n_items_left_out": int(table.n_items - n_full)}
    if m < 2:
        return Estimate.undefined("fewer than 2 ratings per item, so agreement is undefined", n_full, **base)
    if n_full < 2:
        return Estimate.undefined(f"fewer than 2 items carry all {m} ratings", n_full, **base)
    kernel = fleiss_kernel(m)
    sums = pattern_sums(table, kernel)
    p_o, p_e = (float(x) for x in fleiss_parts(sums, m))
    extra = {**base, "p_observed": p_o, "p_expected": p_e}
    if p_e >= _ONE:
        return Estimate(None, ALL_ONE_CATEGORY, n_full, extra=extra)
    return Estimate(float(kernel.combine(sums)), None, n_full, extra=extra)


def _gwet(table: RatingTable, chance: str) -> Estimate:
    reason = _paired_check(table)
    n2 = _n_paired(table)
    base = {"n_items_chance": int((table.ratings_per_item >= 1).sum())}
    if reason:
        return Estimate.undefined(reason, n2, **base)
    if table.n_categories < 2:
        return Estimate.undefined("fewer than 2 declared categories", n2, **base)
    kernel = chance_corrected_kernel(table.n_categories, chance)
    sums = pattern_sums(table, kernel)
    p_a, p_e = (float(x) for x in gwet_parts(sums, table.n_categories, chance))
    extra = {**base, "p_observed": p_a, "p_expected": p_e}
    if p_e >= _ONE:
        return Estimate(None, ALL_ONE_CATEGORY, n2, extra=extra)
    return Estimate(float(kernel.combine(sums)), None, n2, extra=extra)


def fleiss_kappa_generalized(data: Data, categories: Sequence[Hashable] | None = None) -> Estimate:
    """Fleiss kappa for a varying number of raters per item (Gwet 2014).

    Observed agreement averages over every item with two or more ratings;
    chance agreement uses category shares averaged over every rated item,
    as in Gwet's handbook and irrCAC's ``fleiss.kappa.raw``. Equals Fleiss'
    kappa when all items have the same number of ratings.
    """
    return _gwet(as_table(data, categories), "fleiss")


def gwet_ac1(data: Data, categories: Sequence[Hashable] | None = None) -> Estimate:
    """Gwet's AC1: chance agreement sum pi_k (1 - pi_k) / (K - 1).

    Stays high when agreement is high on skewed labels, where kappa collapses
    (the kappa paradox); K is the number of declared categories.
    """
    return _gwet(as_table(data, categories), "ac1")


def randolph_kappa(data: Data, categories: Sequence[Hashable] | None = None) -> Estimate:
    """Randolph's free-marginal kappa (Brennan-Prediger): chance agreement 1/K.

    K is the number of declared categories, unused ones included.
    """
    return _gwet(as_table(data, categories), "uniform")


# --- raw agreement ------------------------------------------------------------------


def _share(table: RatingTable, kind: str) -> Estimate:
    reason = _paired_check(table)
    n2 = _n_paired(table)
    if reason == ONE_RATING or reason == "no ratings":
        return Estimate.undefined(reason, n2)
    kernel = share_kernel(kind)
    return Estimate(float(kernel.combine(pattern_sums(table, kernel))), None, n2)


def percent_agreement(data: Data, categories: Sequence[Hashable] | None = None) -> Estimate:
    """Mean share of agreeing rater pairs per item (items with >= 2 ratings)."""
    return _share(as_table(data, categories), "percent")


def full_agreement(data: Data, categories: Sequence[Hashable] | None = None) -> Estimate:
    """Share of items (with >= 2 ratings) on which every rating is the same."""
    return _share(as_table(data, categories), "full")


def majority_agreement(data: Data, categories: Sequence[Hashable] | None = None) -> Estimate:
    """Share of items (with >= 2 ratings) where one label has a strict majority.

    A 2-2 split on four ratings has none; 2-1 on three has one.
    """
    return _share(as_table(data, categories), "majority")


def _consensus_key(sorted_counts: np.ndarray) -> str:
    nz = [int(x) for x in sorted_counts if x > 0]
    if len(nz) == 1:
        nz.append(0)
    return "-".join(str(x) for x in nz)


def consensus_distribution(data: Data, categories: Sequence[Hashable] | None = None) -> dict[str, int]:
    """How items split, e.g. ``{"3-0": 812, "2-1": 170, "1-1-1": 18}``.

    Keys are an item's category counts, largest first (``"3-0"`` is full
    agreement); items with fewer than two ratings are not listed. Ordered by
    number of ratings, then from most to least agreement.
    """
    table = as_table(data, categories)
    rows, inverse = table.patterns
    freq = np.bincount(inverse, minlength=len(rows))
    out: dict[tuple, int] = {}
    for row, f in zip(rows, freq, strict=True):
        if row.sum() < 2 or f == 0:
            continue
        s = tuple(sorted((int(x) for x in row), reverse=True))
        out[s] = out.get(s, 0) + int(f)
    ordered = sorted(out, key=lambda s: (-sum(s), [-x for x in s]))
    return {_consensus_key(np.array(s)): out[s] for s in ordered}


def label_distribution(data: Data, categories: Sequence[Hashable] | None = None) -> dict:
    """Counts and shares of every declared category over all ratings."""
    table = as_table(data, categories)
    counts = table.counts.sum(axis=0)
    total = int(counts.sum())
    return {
        "counts": {c: int(n) for c, n in zip(table.categories, counts, strict=True)},
        "shares": {c: (float(n) / total if total else None) for c, n in zip(table.categories, counts, strict=True)},
        "n_ratings": total,
        "n_items": table.n_items,
    }


# --- Krippendorff's alpha ---------------------------------------------------------


def interval_values(table: RatingTable, values: Sequence[float] | None = None) -> np.ndarray:
    """Numbers for the categories: given, numeric labels themselves, else ranks 0..K-1."""
    if values is not None:
        vals = np.asarray(values, dtype=np.float64)
        if len(vals) != table.n_categories:
            raise ValueError(f"values has {len(vals)} entries for {table.n_categories} categories")
        return vals
    cats = table.categories
    if cats and all(
        isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, (bool, np.bool_)) for c in cats
    ):
        return np.asarray(cats, dtype=np.float64)
    return np.arange(len(cats), dtype=np.float64)


def _alpha_check(table: RatingTable) -> tuple[str | None, int]:
    r = table.ratings_per_item
    pairable = r >= 2
    n2 = int(pairable.sum())
    if table.n_items == 0:
        return "no ratings", 0
    if n2 == 0:
        return ONE_RATING, 0
    if table.n_categories < 2 or (table.counts[pairable].sum(axis=0) > 0).sum() < 2:
        return "all pairable ratings fall in one category: expected disagreement is 0, so alpha is undefined", n2
    return None, n2


def krippendorff_alpha(
    data: Data,
    categories: Sequence[Hashable] | None = None,
    *,
    level: Level = "nominal",
    values: Sequence[float] | None = None,
) -> Estimate:
    """Krippendorff's alpha with missing ratings allowed (items with >= 2 count).

    Computed by the ``krippendorff`` package from our items x categories
    count matrix (its ``value_counts``), never with its *interval* default by
    accident: ``level`` is explicit. Ordinal uses the declared category order;
    interval uses ``values`` (default: the labels if numeric, else ranks).
    """
    table = as_table(data, categories)
    reason, n2 = _alpha_check(table)
    extra = {"level": level}
    if reason:
        return Estimate(None, reason, n2, extra=extra)
    domain = interval_values(table, values)
    if level == "interval" and len(np.unique(domain)) < len(domain):
        raise ValueError("interval values must be distinct")
    value = krippendorff.alpha(value_counts=table.counts, value_domain=domain, level_of_measurement=level)
    return Estimate(float(value), None, n2, extra=extra)


def alpha_kernel_for(table: RatingTable, level: Level, values: Sequence[float] | None = None) -> Kernel:
    """The vectorised alpha kernel matching ``krippendorff_alpha`` (for the bootstrap)."""
    return alpha_kernel(level, interval_values(table, values))


# --- Cohen's kappa ----------------------------------------------------------------


def cohen_weights(n_categories: int, weights: Weights = None) -> np.ndarray:
    """Disagreement weights over the declared order: 0/1, |i-j| or (i-j)^2."""
    idx = np.arange(n_categories, dtype=np.float64)
    diff = np.abs(idx[:, None] - idx[None, :])
    if weights is None:
        return (diff > 0).astype(np.float64)
    if weights == "linear":
        return diff
    if weights == "quadratic":
        return diff**2
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")


def kappa_from_confusion(conf: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Kappa, n, observed and expected disagreement for (..., K, K) confusions."""
    conf = conf.astype(np.float64)
    n = conf.sum(axis=(-2, -1))
    rows = conf.sum(axis=-1)
    cols = conf.sum(axis=-2)
    with np.errstate(divide="ignore", invalid="ignore"):
        d_o = (w * conf).sum(axis=(-2, -1)) / n
        d_e = (w * rows[..., :, None] * cols[..., None, :]).sum(axis=(-2, -1)) / n**2
        kappa = 1.0 - d_o / d_e
    return kappa, n, d_o, d_e


def _cohen_estimate(kappa: float, n: int, d_e: float, extra: dict) -> Estimate:
    if n == 0:
        return Estimate.undefined("the two annotators have no item in common", 0, **extra)
    if n < 2:
        return Estimate.undefined("fewer than 2 items labelled by both annotators", n, **extra)
    if not d_e > 1e-12:
        return Estimate.undefined(
            "both annotators used one and the same category: chance disagreement is 0, so kappa is undefined",
            n,
            **extra,
        )
    return Estimate(float(kappa), None, n, extra=extra)


def _annotator_code(table: RatingTable, who: Hashable) -> int:
    try:
        loc = table.annotator_index.get_loc(who)
    except KeyError:
        raise ValueError(f"unknown annotator {who!r}") from None
    return int(loc)


def cohen_kappa(
    data: Data, a: Hashable, b: Hashable, categories: Sequence[Hashable] | None = None, *, weights: Weights = None
) -> Estimate:
    """Cohen's kappa for annotators ``a`` and ``b`` on the items both labelled.

    Weighted variants use the position in the FULL declared category list
    (an unused category still widens the scale), like scikit-learn's
    ``cohen_kappa_score(..., labels=categories)``.
    """
    table = as_table(data, categories)
    ia, ib = _annotator_code(table, a), _annotator_code(table, b)
    k = table.n_categories
    ca, cb = table.codes[:, ia], table.codes[:, ib]
    both = (ca >= 0) & (cb >= 0)
    conf = np.bincount(ca[both] * k + cb[both], minlength=k * k).reshape(k, k)
    kappa, n, _d_o, d_e = kappa_from_confusion(conf, cohen_weights(k, weights))
    extra = {"annotators": [a, b], "n": int(n), "weights": weights}
    return _cohen_estimate(float(kappa), int(n), float(d_e), extra)


def pairwise_cohen_kappa(
    data: Data, categories: Sequence[Hashable] | None = None, *, weights: Weights = None
) -> list[Estimate]:
    """Cohen's kappa for every pair of annotators with at least one common item.

    Each estimate carries ``extra["annotators"] = [a, b]`` and ``extra["n"]``
    (items both labelled, also ``n_items``). Pairs that share nothing are not
    listed; ``cohen_kappa`` on such a pair says so.
    """
    table = as_table(data, categories)
    a_codes, b_codes, conf = table.pair_confusions
    kappa, n, _, d_e = kappa_from_confusion(conf, cohen_weights(table.n_categories, weights))
    names = table.annotator_index
    out = []
    for i in range(len(a_codes)):
        extra = {"annotators": [names[a_codes[i]], names[b_codes[i]]], "n": int(n[i]), "weights": weights}
        out.append(_cohen_estimate(float(kappa[i]), int(n[i]), float(d_e[i]), extra))
    return out


def mean_cohen_kappa(
    data: Data | Sequence[Estimate], categories: Sequence[Hashable] | None = None, *, weights: Weights = None
) -> Estimate:
    """Unweighted mean of the defined pairwise Cohen kappas (Light's kappa).

    Pairs with an undefined kappa are left out and counted.
    """
    if isinstance(data, (RatingTable, pd.DataFrame)):
        table = as_table(data, categories)
        pairs = pairwise_cohen_kappa(table, weights=weights)
        n_items = _n_paired(table)
    else:
        pairs = list(data)
        n_items = max((p.n_items for p in pairs), default=0)
    defined = [p.value for p in pairs if p.value is not None]
    extra = {"n_pairs": len(pairs), "n_pairs_undefined": len(pairs) - len(defined), "weights": weights}
    if not pairs:
        return Estimate.undefined("no pair of annotators shares an item", n_items, **extra)
    if not defined:
        return Estimate.undefined("Cohen's kappa is undefined for every pair of annotators", n_items, **extra)
    return Estimate(float(np.mean(defined)), None, n_items, extra=extra)
