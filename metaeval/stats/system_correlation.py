"""Does a verifier rank systems as humans do? Rank correlation of their scores, with intervals.

``system_correlation``: Kendall tau-b and Spearman rho between systems'
human-based and verifier-based supported fractions, with percentile
intervals from resampling each system's responses (vectorised over
resamples by ``tau_b`` and ``spearman_rows``). Fewer than three systems, or
scores that do not vary, give ``None`` with the reason: results are
``Estimate`` objects, undefined values are None with a reason, never 0.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from types import ModuleType

import numpy as np
import pandas as pd

from .bootstrap import percentile_ci
from .estimate import Estimate

__all__ = ["system_correlation", "system_scores", "tau_b", "spearman_rows"]


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported on first use: it takes most of a second to import, which every
    process (each manage.py command, each web worker) would pay at start otherwise."""
    from scipy import stats

    return stats


def tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row pair of (B, S) arrays (NaN where a row has no untied pair)."""
    x, y = np.atleast_2d(x), np.atleast_2d(y)
    i, j = np.triu_indices(x.shape[1], k=1)
    dx, dy = np.sign(x[:, i] - x[:, j]), np.sign(y[:, i] - y[:, j])
    concordance = (dx * dy).sum(axis=1)
    untied_x, untied_y = (dx != 0).sum(axis=1), (dy != 0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((untied_x > 0) & (untied_y > 0), concordance / np.sqrt(untied_x * untied_y), np.nan)


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho (Pearson on average ranks) of each row pair of (B, S) arrays."""
    rx = _scipy_stats().rankdata(np.atleast_2d(x), axis=1)
    ry = _scipy_stats().rankdata(np.atleast_2d(y), axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        denominator = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
        return np.where(denominator > 0, (rx * ry).sum(axis=1) / denominator, np.nan)


def system_scores(responses: pd.DataFrame) -> pd.DataFrame:
    """Per system: mean per-response supported fraction by humans and by the verifier, and response counts.

    ``responses`` has columns ``system``, ``human`` and ``verifier`` (each a
    response's supported fraction, NaN when it has no countable claim).
    """
    grouped = responses.groupby("system", sort=True)
    return pd.DataFrame(
        {
            "human": grouped["human"].mean(),
            "verifier": grouped["verifier"].mean(),
            "n_responses": grouped.size(),
            "n_human": grouped["human"].count(),
            "n_verifier": grouped["verifier"].count(),
        }
    )


def system_correlation(
    responses: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    min_systems: int = 3,
) -> dict:
    """Kendall tau-b and Spearman rho of the systems' human-based and verifier-based scores.

    Intervals resample each system's responses with replacement (the
    systems are fixed; their scores vary), recomputing both scores and the
    correlation; resamples where a correlation is undefined are counted.
    """
    usable = responses.dropna(subset=["human", "verifier"], how="all")
    table = system_scores(usable) if len(usable) else system_scores(responses.iloc[:0])
    table = table.dropna(subset=["human", "verifier"])
    systems = [
        {
            "system": str(name),
            "human": float(row.human),
            "verifier": float(row.verifier),
            "n_responses": int(row.n_responses),
        }
        for name, row in table.iterrows()
    ]
    n = len(systems)
    if n < min_systems:
        reason = f"needs at least {min_systems} systems with both a human-based and a verifier-based score; found {n}"
        return {
            "n_systems": n,
            "systems": systems,
            "kendall_tau": Estimate.undefined(reason, n),
            "spearman": Estimate.undefined(reason, n),
        }
    # Scores equal up to float rounding (14/30 summed in two orders) are ties, not a ranking.
    human, verifier = np.round(table["human"].to_numpy(), 12), np.round(table["verifier"].to_numpy(), 12)
    constant = [who for who, values in (("human-based", human), ("verifier-based", verifier)) if np.ptp(values) == 0]
    if constant:
        tau = rho = np.nan
    else:
        tau = _scipy_stats().kendalltau(human, verifier).statistic
        rho = _scipy_stats().spearmanr(human, verifier).statistic
    dists = _correlation_bootstrap(
        usable[usable["system"].isin(table.index)], list(table.index), n_resamples=n_resamples, seed=seed
    )
    out: dict = {"n_systems": n, "systems": systems}
    for name, value, dist in (("kendall_tau", tau, dists[0]), ("spearman", rho, dists[1])):
        extra = {
            "ci_method": "percentile bootstrap over each system's responses",
            "n_resamples": n_resamples,
            "n_undefined": int((~np.isfinite(dist)).sum()),
            "seed": seed,
            "confidence": confidence,
        }
        if not np.isfinite(value):
            what = " and ".join(constant) if constant else "the"
            out[name] = Estimate.undefined(
                f"{what} scores are the same for every system, so a rank correlation is undefined", n, **extra
            )
        else:
            out[name] = Estimate(float(value), None, n, ci=percentile_ci(dist, confidence), extra=extra)
    return out


#: Resampled responses drawn at a time (per system): the draws of all resamples at once were 1,000 x the
#: system's responses, 0.3 GB per array at 40,000 responses, and the means took several such arrays.
CHUNK_ELEMENTS = 1 << 21


def _correlation_bootstrap(
    responses: pd.DataFrame, systems: Sequence, *, n_resamples: int, seed: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Each resample's per-system means, drawn a few resamples at a time: the generator fills the draws in
    order, so the chunks draw exactly the numbers one call for every resample would."""
    rng = np.random.default_rng(seed)
    human = np.empty((n_resamples, len(systems)))
    verifier = np.empty((n_resamples, len(systems)))
    for column, system in enumerate(systems):
        rows = responses[responses["system"] == system]
        h, v = rows["human"].to_numpy(dtype=np.float64), rows["verifier"].to_numpy(dtype=np.float64)
        step = max(1, CHUNK_ELEMENTS // max(len(rows), 1))
        for start in range(0, n_resamples, step):
            size = min(step, n_resamples - start)
            idx = rng.integers(0, len(rows), size=(size, len(rows)))
            human[start : start + size, column] = _resampled_means(h, idx)
            verifier[start : start + size, column] = _resampled_means(v, idx)
    return tau_b(np.round(human, 12), np.round(verifier, 12)), spearman_rows(
        np.round(human, 12), np.round(verifier, 12)
    )


def _resampled_means(values: np.ndarray, idx: np.ndarray) -> np.ndarray | float:
    """Each row of draws' mean of the finite values (NaN where none is; NaN for all when no value is finite)."""
    if not np.isfinite(values).any():
        return np.nan
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        drawn = values[idx]
        return np.nanmean(np.where(np.isfinite(drawn), drawn, np.nan), axis=1)
