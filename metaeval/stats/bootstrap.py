"""Percentile bootstrap confidence intervals over items, vectorised.

Items are the unit of resampling (annotators' ratings of one item are not
independent). Resample ``b`` is row ``b`` of

    numpy.random.default_rng(seed).integers(0, n_items, size=(n_resamples, n_items))

drawn in row chunks (the stream is the same), so anyone can reproduce an
interval with a plain loop. Every coefficient is a function of sums of
per-item features that depend only on the item's count row (see ``kernels``);
items are mapped to their distinct count rows once, each chunk of resamples
becomes a (chunk x patterns) frequency matrix by one ``bincount``, and the
sums for all resamples are one matrix product. There is no Python loop over
resamples, for any of the statistics, Krippendorff's alpha included (its
coincidence matrix is such a sum).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .agreement import Level, alpha_kernel_for
from .kernels import Kernel, chance_corrected_kernel, fleiss_kernel, share_kernel
from .table import RatingTable

__all__ = [
    "BOOTSTRAP_STATISTICS",
    "kernel_for",
    "bootstrap_distribution",
    "percentile_ci",
    "bootstrap_ci",
]

BOOTSTRAP_STATISTICS = (
    "fleiss_kappa",
    "fleiss_kappa_generalized",
    "gwet_ac1",
    "randolph_kappa",
    "percent_agreement",
    "full_agreement",
    "majority_agreement",
    "krippendorff_alpha",
    "krippendorff_alpha_ordinal",
    "krippendorff_alpha_interval",
)

_CHUNK_ELEMENTS = 4_000_000  # resampled indices held in memory at once (32 MB)


def kernel_for(
    table: RatingTable, name: str, *, n_raters: int | None = None, values: Sequence[float] | None = None
) -> Kernel:
    """The kernel of a named statistic, parametrised as the point estimate is."""
    if name == "fleiss_kappa":
        m = n_raters if n_raters is not None else int(table.ratings_per_item.max(initial=0))
        return fleiss_kernel(m)
    chance = {"fleiss_kappa_generalized": "fleiss", "gwet_ac1": "ac1", "randolph_kappa": "uniform"}
    if name in chance:
        return chance_corrected_kernel(table.n_categories, chance[name])
    shares = {"percent_agreement": "percent", "full_agreement": "full", "majority_agreement": "majority"}
    if name in shares:
        return share_kernel(shares[name])
    levels: dict[str, Level] = {
        "krippendorff_alpha": "nominal",
        "krippendorff_alpha_nominal": "nominal",
        "krippendorff_alpha_ordinal": "ordinal",
        "krippendorff_alpha_interval": "interval",
    }
    if name in levels:
        return alpha_kernel_for(table, levels[name], values)
    raise ValueError(f"no bootstrap for {name!r}; known: {', '.join(BOOTSTRAP_STATISTICS)}")


def bootstrap_distribution(
    table: RatingTable,
    statistics: Sequence[str],
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    n_raters: int | None = None,
    values: Sequence[float] | None = None,
) -> dict[str, np.ndarray]:
    """Each statistic on every resample: ``{name: array of n_resamples}``.

    NaN marks a resample on which the statistic is undefined (e.g. every
    resampled rating in one category).
    """
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    names = list(dict.fromkeys(statistics))
    if not names:  # e.g. one annotator per item: no coefficient is defined, so none has an interval
        return {}
    kernels = {name: kernel_for(table, name, n_raters=n_raters, values=values) for name in names}
    n = table.n_items
    if n == 0:
        return {name: np.full(n_resamples, np.nan) for name in names}
    rows, inverse = table.patterns
    n_patterns = len(rows)
    blocks = [kernels[name].features(rows) for name in names]
    bounds = np.cumsum([0] + [b.shape[1] for b in blocks])
    features = np.hstack(blocks)
    sums = np.empty((n_resamples, features.shape[1]))
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, _CHUNK_ELEMENTS // n))
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        idx = rng.integers(0, n, size=(b, n))
        pid = inverse[idx]
        pid += (np.arange(b, dtype=np.int64) * n_patterns)[:, None]
        freq = np.bincount(pid.ravel(), minlength=b * n_patterns).reshape(b, n_patterns)
        sums[start : start + b] = freq.astype(np.float64) @ features
    return {name: kernels[name].combine(sums[:, bounds[i] : bounds[i + 1]]) for i, name in enumerate(names)}


def percentile_ci(distribution: np.ndarray, confidence: float = 0.95) -> tuple[float, float] | None:
    """The (1-confidence)/2 and (1+confidence)/2 quantiles of the finite values."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    finite = distribution[np.isfinite(distribution)]
    if len(finite) == 0:
        return None
    lo, hi = np.quantile(finite, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(lo), float(hi)


def bootstrap_ci(
    table: RatingTable,
    statistics: Sequence[str] = BOOTSTRAP_STATISTICS,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
    n_raters: int | None = None,
    values: Sequence[float] | None = None,
) -> dict[str, dict]:
    """Percentile intervals: ``{name: {"ci", "n_resamples", "n_undefined", ...}}``.

    ``n_undefined`` counts resamples on which the statistic was undefined;
    the interval is taken over the others (None when none is defined).
    """
    dists = bootstrap_distribution(
        table, statistics, n_resamples=n_resamples, seed=seed, n_raters=n_raters, values=values
    )
    out = {}
    for name, dist in dists.items():
        out[name] = {
            "ci": percentile_ci(dist, confidence),
            "ci_method": "percentile bootstrap over items",
            "confidence": confidence,
            "n_resamples": n_resamples,
            "n_undefined": int((~np.isfinite(dist)).sum()),
            "seed": seed,
        }
    return out
