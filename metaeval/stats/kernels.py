"""Agreement coefficients written as functions of per-item feature sums.

Every coefficient here depends on the data only through sums, over items, of
features of each item's count row (how many raters chose each category). So
one formula serves both the point estimate (sum over all items) and the
bootstrap (sums over 1,000 resamples at once, a matrix product): the two can
never drift apart. ``combine`` accepts sums with any leading batch shape and
returns NaN where a coefficient is undefined; the public functions in
``agreement`` check those conditions first and give the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Kernel",
    "fleiss_kernel",
    "fleiss_parts",
    "gwet_parts",
    "chance_corrected_kernel",
    "share_kernel",
    "alpha_kernel",
    "pairwise_agreement",
    "ordinal_distances",
]

Array = np.ndarray


@dataclass(frozen=True)
class Kernel:
    """``features``: count rows (n, K) -> (n, f); ``combine``: sums (..., f) -> values (...)."""

    features: Callable[[Array], Array]
    combine: Callable[[Array], Array]


def _div(a: Array, b: Array | float) -> Array:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


def pairwise_agreement(counts: Array) -> tuple[Array, Array]:
    """Per item: number of ratings r and the share of agreeing rater pairs.

    The share is sum_k c_k (c_k - 1) / (r (r - 1)); NaN when r < 2.
    """
    counts = np.asarray(counts, dtype=np.float64)
    r = counts.sum(axis=-1)
    agree = (counts * (counts - 1)).sum(axis=-1)
    return r, _div(agree, r * (r - 1))


def fleiss_kernel(n_raters: int) -> Kernel:
    """Fleiss (1971) kappa on the items that carry exactly ``n_raters`` ratings."""
    m = float(n_raters)

    def features(counts: Array) -> Array:
        counts = np.asarray(counts, dtype=np.float64)
        r, p_i = pairwise_agreement(counts)
        full = (r == m).astype(np.float64)
        p_i = np.where(full > 0, p_i, 0.0)
        return np.column_stack([full, full * p_i, full[:, None] * counts])

    def combine(s: Array) -> Array:
        p_o, p_e = fleiss_parts(s, m)
        return _div(p_o - p_e, 1.0 - p_e)

    return Kernel(features, combine)


def fleiss_parts(s: Array, n_raters: float) -> tuple[Array, Array]:
    """Observed (mean P_i) and chance (sum p_k^2) agreement from Fleiss sums."""
    n = s[..., 0]
    p_bar = _div(s[..., 1], n)
    p_k = _div(s[..., 2:], (n * float(n_raters))[..., None])
    return p_bar, (p_k**2).sum(axis=-1)


def chance_corrected_kernel(n_categories: int, chance: str) -> Kernel:
    """Gwet's framework for a varying number of raters per item.

    Observed agreement p_a is the mean pairwise agreement over items with two
    or more ratings; category propensities pi_k average c_k / r over every
    rated item (Gwet 2014, as irrCAC computes them). ``chance`` picks p_e:
    ``"fleiss"`` sum pi_k^2 (generalised Fleiss kappa), ``"ac1"``
    sum pi_k (1 - pi_k) / (K - 1) (Gwet's AC1), ``"uniform"`` 1 / K
    (Randolph's free-marginal kappa, Brennan-Prediger).
    """
    q = float(n_categories)
    if chance not in ("fleiss", "ac1", "uniform"):
        raise ValueError(f"unknown chance model {chance!r}")

    def features(counts: Array) -> Array:
        counts = np.asarray(counts, dtype=np.float64)
        r, p_i = pairwise_agreement(counts)
        has2 = (r >= 2).astype(np.float64)
        has1 = (r >= 1).astype(np.float64)
        share = _div(counts, np.where(r > 0, r, 1.0)[:, None])
        return np.column_stack([has2, np.where(has2 > 0, p_i, 0.0), has1, share])

    def combine(s: Array) -> Array:
        p_a, p_e = gwet_parts(s, q, chance)
        return _div(p_a - p_e, 1.0 - p_e)

    return Kernel(features, combine)


def gwet_parts(s: Array, n_categories: float, chance: str) -> tuple[Array, Array]:
    """Observed and chance agreement from the sums of ``chance_corrected_kernel``."""
    p_a = _div(s[..., 1], s[..., 0])
    pi = _div(s[..., 3:], s[..., 2][..., None])
    if chance == "fleiss":
        p_e = (pi**2).sum(axis=-1)
    elif chance == "ac1":
        p_e = _div((pi * (1.0 - pi)).sum(axis=-1), float(n_categories) - 1.0)
    else:
        p_e = np.full_like(p_a, 1.0 / float(n_categories))
    return p_a, p_e


def share_kernel(kind: str) -> Kernel:
    """Shares over items with two or more ratings.

    ``"percent"``: mean share of agreeing rater pairs (raw percent agreement);
    ``"full"``: all ratings identical; ``"majority"``: one category holds a
    strict majority (more than half of the item's ratings).
    """
    if kind not in ("percent", "full", "majority"):
        raise ValueError(f"unknown share {kind!r}")

    def features(counts: Array) -> Array:
        counts = np.asarray(counts, dtype=np.float64)
        r, p_i = pairwise_agreement(counts)
        has2 = r >= 2
        if kind == "percent":
            x = p_i
        else:
            top = counts.max(axis=1) if counts.shape[1] else np.zeros(len(counts))
            x = (top == r) if kind == "full" else (2 * top > r)
        return np.column_stack([has2, np.where(has2, x, 0.0)]).astype(np.float64)

    def combine(s: Array) -> Array:
        return _div(s[..., 1], s[..., 0])

    return Kernel(features, combine)


def ordinal_distances(n_v: Array) -> Array:
    """Krippendorff's ordinal metric from the pairable value counts n_v.

    delta(c, k) = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2, for any leading
    batch shape of ``n_v`` (..., K) -> (..., K, K).
    """
    cum = np.cumsum(n_v, axis=-1)
    lo_cum = cum[..., :, None]
    hi_cum = cum[..., None, :]
    n_c = n_v[..., :, None]
    n_k = n_v[..., None, :]
    # For c <= k: cum[k] - cum[c] + n_c - (n_c + n_k)/2; symmetric otherwise.
    upper = (hi_cum - lo_cum) + (n_c - n_k) / 2.0
    return upper**2


def alpha_kernel(level: str, values: Sequence[float] | Array) -> Kernel:
    """Krippendorff's alpha from the coincidence matrix (Krippendorff 2011).

    The per-item feature is the item's contribution to the coincidence matrix,
    (c c^T - diag c) / (r - 1) for r >= 2, flattened; ``values`` are the
    numbers of the categories for the interval metric.
    """
    values = np.asarray(values, dtype=np.float64)
    k = len(values)
    if level not in ("nominal", "ordinal", "interval"):
        raise ValueError(f"unknown level of measurement {level!r}")
    fixed = None
    if level == "nominal":
        fixed = 1.0 - np.eye(k)
    elif level == "interval":
        fixed = (values[:, None] - values[None, :]) ** 2

    def features(counts: Array) -> Array:
        counts = np.asarray(counts, dtype=np.float64)
        r = counts.sum(axis=1)
        pairable = r >= 2
        outer = counts[:, :, None] * counts[:, None, :]
        idx = np.arange(counts.shape[1])
        outer[:, idx, idx] -= counts
        scale = _div(pairable.astype(np.float64), np.where(pairable, r - 1, 1.0))
        return (outer * scale[:, None, None]).reshape(len(counts), -1)

    def combine(s: Array) -> Array:
        o = s.reshape(*s.shape[:-1], k, k)
        n_v = o.sum(axis=-1)
        n = n_v.sum(axis=-1)
        d = ordinal_distances(n_v) if fixed is None else fixed
        d_o = (o * d).sum(axis=(-2, -1))
        d_e = _div((n_v[..., :, None] * n_v[..., None, :] * d).sum(axis=(-2, -1)), n - 1.0)
        return 1.0 - _div(d_o, d_e)

    return Kernel(features, combine)
