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
from dataclasses import dataclass

import numpy as np

from .agreement import Level, alpha_kernel_for
from .kernels import Kernel, chance_corrected_kernel, fleiss_kernel, share_kernel
from .table import RatingTable

__all__ = [
    "BOOTSTRAP_STATISTICS",
    "kernel_for",
    "BootstrapRequest",
    "bootstrap_distribution",
    "bootstrap_distributions",
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


@dataclass(frozen=True)
class BootstrapRequest:
    """The statistics wanted on one table, parametrised as its point estimates are."""

    table: RatingTable
    statistics: Sequence[str]
    n_raters: int | None = None
    values: Sequence[float] | None = None


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
    request = BootstrapRequest(table, statistics, n_raters, values)
    return bootstrap_distributions([request], n_resamples=n_resamples, seed=seed)[0]


def bootstrap_distributions(
    requests: Sequence[BootstrapRequest], *, n_resamples: int = 1000, seed: int | None = 0
) -> list[dict[str, np.ndarray]]:
    """Each request's statistics on the same resamples of items: what ``bootstrap_distribution`` gives per table.

    Why together: a report asks for the agreement of the same items on all labels and on
    their binary collapse, and drawing and counting the resamples, not the statistics, is
    nearly all of a bootstrap's time (0.9 s of 1 s at 100,000 items). The tables must hold
    the same items in the same order (a collapse that leaves every item a rating does).
    Each result is bit for bit the one of its table bootstrapped alone: items are mapped to
    their combination of the tables' count rows, and each chunk's frequencies of those are
    summed back per table in integers before the table's own matrix product.
    """
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    if not requests:
        return []
    tables = [request.table for request in requests]
    if any(not table.item_index.equals(tables[0].item_index) for table in tables[1:]):
        raise ValueError("tables bootstrapped together must hold the same items in the same order")
    wanted = [list(dict.fromkeys(request.statistics)) for request in requests]
    n = tables[0].n_items
    if n == 0:
        return [{name: np.full(n_resamples, np.nan) for name in names} for names in wanted]
    plans = [_TablePlan.of(request, names) for request, names in zip(requests, wanted, strict=True) if names]
    if not plans:  # e.g. one annotator per item: no coefficient is defined, so none has an interval
        return [{} for _ in requests]
    if len(plans) == 1:
        joint, n_joint, back = plans[0].inverse, plans[0].n_patterns, [None]
    else:
        combos, joint = _combinations([plan.inverse for plan in plans], [plan.n_patterns for plan in plans])
        n_joint = len(combos)
        # joint pattern -> the table's own pattern, as a 0/1 matrix: frequencies sum back exactly
        back = [np.eye(plan.n_patterns, dtype=np.int64)[combos[:, i]] for i, plan in enumerate(plans)]
    sums = [np.empty((n_resamples, plan.features.shape[1])) for plan in plans]
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, _CHUNK_ELEMENTS // n))
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        idx = rng.integers(0, n, size=(b, n))
        pid = joint[idx]
        pid += (np.arange(b, dtype=np.int64) * n_joint)[:, None]
        freq = np.bincount(pid.ravel(), minlength=b * n_joint).reshape(b, n_joint)
        for plan, total, to_own in zip(plans, sums, back, strict=True):
            own = freq if to_own is None else freq @ to_own
            total[start : start + b] = own.astype(np.float64) @ plan.features
    results = iter(plan.combine(total) for plan, total in zip(plans, sums, strict=True))
    return [next(results) if names else {} for names in wanted]


def _combinations(ids: list[np.ndarray], sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct combinations of per-item ids (rows) and each item's combination: (C x tables, n ids)."""
    if float(np.prod(np.array(sizes, dtype=np.float64))) < 2**62:
        # one mixed-radix key per item: a 1-D unique, much cheaper than np.unique over rows
        key = np.zeros_like(ids[0])
        for column, size in zip(ids, sizes, strict=True):
            key = key * size + column
        keys, joint = np.unique(key, return_inverse=True)
        combos = np.empty((len(keys), len(ids)), dtype=np.int64)
        for i in range(len(ids) - 1, -1, -1):
            keys, combos[:, i] = np.divmod(keys, sizes[i])
        return combos, joint.reshape(-1)
    combos, joint = np.unique(np.column_stack(ids), axis=0, return_inverse=True)
    return combos, joint.reshape(-1)


@dataclass
class _TablePlan:
    """One table's part of a joint bootstrap: its items' count-row ids and the stacked features of its kernels."""

    inverse: np.ndarray
    n_patterns: int
    features: np.ndarray
    kernels: dict[str, Kernel]
    bounds: np.ndarray

    @classmethod
    def of(cls, request: BootstrapRequest, names: list[str]) -> _TablePlan:
        table = request.table
        kernels = {name: kernel_for(table, name, n_raters=request.n_raters, values=request.values) for name in names}
        rows, inverse = table.patterns
        blocks = [kernels[name].features(rows) for name in names]
        bounds = np.cumsum([0] + [block.shape[1] for block in blocks])
        return cls(inverse, len(rows), np.hstack(blocks), kernels, bounds)

    def combine(self, sums: np.ndarray) -> dict[str, np.ndarray]:
        return {
            name: kernel.combine(sums[:, self.bounds[i] : self.bounds[i + 1]])
            for i, (name, kernel) in enumerate(self.kernels.items())
        }


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
