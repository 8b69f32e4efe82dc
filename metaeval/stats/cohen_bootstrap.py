"""Bootstrap intervals for pairwise Cohen's kappa and their mean, vectorised like the rest.

Cohen's kappa depends on who gave which label, not only on an item's count
row, so the count-pattern trick of ``bootstrap`` does not apply. Instead
items are mapped to their distinct rows of annotator codes (few when
annotators are few: at most (K+1)^A), and each pair's confusion matrix is a
linear function of how often each row is drawn. Drawing n items with
replacement draws each distinct row a Multinomial(n, row shares) number of
times, so the row counts of all resamples are drawn that way directly (the
same distribution as resampling items, at a cost independent of n) and
turned into confusions by one matrix product. Studies with too many
distinct rows (crowds of sparse annotators) get no interval, with a reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .agreement import Weights, cohen_weights, kappa_from_confusion
from .table import RatingTable

__all__ = ["MAX_FEATURES", "cohen_bootstrap", "cohen_bootstrap_unavailable"]

#: Code rows x pairs x K^2 above which the pairwise bootstrap is not attempted.
MAX_FEATURES = 2_000_000


def _row_patterns(table: RatingTable) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of the items x annotators code matrix and each item's row id.

    Rows are encoded as base-(K+1) integers when they fit (the usual case),
    which is much faster than ``np.unique(axis=0)``; where there are few possible keys (a few
    annotators) the distinct ones are found by a ``bincount``, not a sort (0.3 ms against 8 ms
    at 100,000 items, and a report asks for this on every table it summarises). Either way the
    rows come in the order of their keys, as ``np.unique`` gives them.
    """
    codes = table.codes
    base = table.n_categories + 1
    if codes.shape[1] * np.log2(max(base, 2)) < 62:
        powers = base ** np.arange(codes.shape[1], dtype=np.int64)
        key = (codes + 1) @ powers
        n_keys = base ** codes.shape[1]
        if n_keys <= 4 * len(key) + (1 << 16):
            seen = np.flatnonzero(np.bincount(key, minlength=n_keys))
            ids = np.full(n_keys, -1, dtype=np.int64)
            ids[seen] = np.arange(len(seen))
            return (seen[:, None] // powers) % base - 1, ids[key]
        _uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return codes[first], inverse.ravel().astype(np.int64)
    rows, inverse = np.unique(codes, axis=0, return_inverse=True)
    return rows, inverse.ravel().astype(np.int64)


def cohen_bootstrap_unavailable(table: RatingTable) -> str | None:
    """Why the pairwise bootstrap is not computed for this table, or None when it is."""
    a_codes, _, _ = table.pair_confusions
    if len(a_codes) == 0:
        return "no pair of annotators shares an item"
    n_rows = len(_row_patterns(table)[0]) if table.n_items else 0
    if n_rows * len(a_codes) * table.n_categories**2 > MAX_FEATURES:
        return "too many distinct annotator combinations for the pairwise bootstrap"
    return None


def cohen_bootstrap(
    table: RatingTable, weights: Sequence[Weights] = (None,), *, n_resamples: int = 1000, seed: int | None = 0
) -> dict[Weights, tuple[np.ndarray, np.ndarray]]:
    """Per weighting: (kappa of every pair on every resample (B x Q), mean of the defined pairs (B)).

    Pairs are in ``table.pair_confusions`` order (as ``pairwise_cohen_kappa``
    lists them); NaN marks a resample on which a kappa is undefined.
    """
    reason = cohen_bootstrap_unavailable(table)
    if reason:
        raise ValueError(reason)
    k = table.n_categories
    a_codes, b_codes, _ = table.pair_confusions
    rows, inverse = _row_patterns(table)
    n_rows, n_pairs = len(rows), len(a_codes)
    # features[p, q * K^2 + i * K + j] = 1 when row p has label i from a_q and j from b_q
    features = np.zeros((n_rows, n_pairs * k * k))
    for q, (a, b) in enumerate(zip(a_codes, b_codes, strict=True)):
        both = (rows[:, a] >= 0) & (rows[:, b] >= 0)
        cols = q * k * k + rows[both, a] * k + rows[both, b]
        features[np.flatnonzero(both), cols] = 1.0
    shares = np.bincount(inverse, minlength=n_rows) / table.n_items
    freq = np.random.default_rng(seed).multinomial(table.n_items, shares, size=n_resamples)
    conf = freq.astype(np.float64) @ features
    conf = conf.reshape(n_resamples, n_pairs, k, k)
    out = {}
    for w in weights:
        with np.errstate(divide="ignore", invalid="ignore"):
            kappa, n_pair, _, d_e = kappa_from_confusion(conf, cohen_weights(k, w))
        kappa = np.where((n_pair >= 2) & (d_e > 1e-12), kappa, np.nan)
        defined = np.isfinite(kappa)
        counts = defined.sum(axis=1)
        mean = np.where(counts > 0, np.where(defined, kappa, 0.0).sum(axis=1) / np.maximum(counts, 1), np.nan)
        out[w] = (kappa, mean)
    return out
