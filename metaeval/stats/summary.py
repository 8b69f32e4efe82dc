"""Every agreement figure of a study in one JSON-ready dict.

This is what the report service, the CLI and a notebook print; it only
assembles the functions of ``agreement`` and ``bootstrap`` so each number
keeps its own tests.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .agreement import (
    Weights,
    consensus_distribution,
    fleiss_kappa,
    fleiss_kappa_generalized,
    full_agreement,
    gwet_ac1,
    krippendorff_alpha,
    label_distribution,
    majority_agreement,
    mean_cohen_kappa,
    pairwise_cohen_kappa,
    percent_agreement,
    randolph_kappa,
)
from .bootstrap import BOOTSTRAP_STATISTICS, bootstrap_ci, percentile_ci
from .cohen_bootstrap import cohen_bootstrap, cohen_bootstrap_unavailable
from .estimate import Estimate, json_ready
from .table import RatingTable, as_table

__all__ = ["agreement_summary", "summary_statistics"]


PairBoot = dict[Weights, tuple[np.ndarray, np.ndarray]] | str | None


def _with_ci(est: Estimate, dist: np.ndarray, confidence: float, seed: int | None) -> Estimate:
    if not est.defined:
        return est
    return est.with_ci(
        percentile_ci(dist, confidence),
        ci_method="percentile bootstrap over items",
        confidence=confidence,
        n_resamples=len(dist),
        n_undefined=int((~np.isfinite(dist)).sum()),
        seed=seed,
    )


def _pairs(
    table: RatingTable, weights: Weights, boot: PairBoot = None, confidence: float = 0.95, seed: int | None = 0
) -> tuple[list[dict], dict]:
    """Pairwise kappas and their mean, with bootstrap intervals when ``boot`` holds the resamples.

    ``boot`` is None (no intervals asked for), the reason none could be
    computed, or ``cohen_bootstrap``'s output.
    """
    pairs = pairwise_cohen_kappa(table, weights=weights)  # confusions are cached on the table
    mean = mean_cohen_kappa(table, weights=weights)
    if isinstance(boot, dict):
        per_pair, mean_dist = boot[weights]
        pairs = [_with_ci(p, per_pair[:, q], confidence, seed) for q, p in enumerate(pairs)]
        mean = _with_ci(mean, mean_dist, confidence, seed)
    elif isinstance(boot, str) and mean.defined:
        mean = mean.with_ci(None, ci_unavailable=boot)
    return [p.to_dict() for p in pairs], mean.to_dict()


def summary_statistics(*, ordinal: bool = False) -> list[str]:
    """The coefficients ``agreement_summary`` gives a bootstrap interval when they are defined."""
    ordinal_only = {"krippendorff_alpha_ordinal", "krippendorff_alpha_interval"}
    return [name for name in BOOTSTRAP_STATISTICS if ordinal or name not in ordinal_only]


def agreement_summary(
    data: RatingTable | pd.DataFrame,
    categories: Sequence[Hashable] | None = None,
    *,
    ordinal: bool = False,
    values: Sequence[float] | None = None,
    n_raters: int | None = None,
    ci: bool = True,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
    collapse: Mapping[Hashable, Hashable | None] | None = None,
    collapse_key: str = "binary",
    distributions: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """All agreement coefficients, with bootstrap intervals where defined.

    ``ordinal`` adds Krippendorff ordinal/interval alpha and linearly and
    quadratically weighted Cohen kappa; ``collapse`` adds the same summary
    under ``collapse_key`` (default ``"binary"``; e.g. ``"three_way"`` for
    ``PREFERENCE_3WAY``) for the labels mapped through it.
    """
    table = as_table(data, categories)
    est: dict[str, Estimate] = {
        "fleiss_kappa": fleiss_kappa(table, n_raters=n_raters),
        "fleiss_kappa_generalized": fleiss_kappa_generalized(table),
        "krippendorff_alpha": krippendorff_alpha(table, level="nominal"),
        "percent_agreement": percent_agreement(table),
        "full_agreement": full_agreement(table),
        "majority_agreement": majority_agreement(table),
        "gwet_ac1": gwet_ac1(table),
        "randolph_kappa": randolph_kappa(table),
    }
    if ordinal:
        est["krippendorff_alpha_ordinal"] = krippendorff_alpha(table, level="ordinal")
        est["krippendorff_alpha_interval"] = krippendorff_alpha(table, level="interval", values=values)
    if ci and distributions is not None:
        est = {name: _with_ci(e, distributions[name], confidence, seed) for name, e in est.items()}
    elif ci:
        wanted = [name for name, e in est.items() if e.defined]
        intervals = bootstrap_ci(
            table, wanted, n_resamples=n_resamples, confidence=confidence, seed=seed, n_raters=n_raters, values=values
        )
        for name, info in intervals.items():
            interval = info.pop("ci")
            est[name] = est[name].with_ci(interval, **info)
    out: dict[str, Any] = {
        "n_items": table.n_items,
        "n_annotators": table.n_annotators,
        "n_annotations": table.n_ratings,
        "n_missing_dropped": table.n_missing_dropped,
        "categories": list(table.categories),
    }
    out.update({name: e.to_dict() for name, e in est.items()})
    weights: list[Weights] = [None, "linear", "quadratic"] if ordinal else [None]
    boot: PairBoot = None
    if ci:
        boot = cohen_bootstrap_unavailable(table) or cohen_bootstrap(table, weights, n_resamples=n_resamples, seed=seed)
    for w in weights:
        suffix = f"_{w}" if w else ""
        out[f"pairwise_cohen_kappa{suffix}"], out[f"mean_cohen_kappa{suffix}"] = _pairs(
            table, w, boot, confidence, seed
        )
    out["consensus"] = consensus_distribution(table)
    out["label_distribution"] = label_distribution(table)
    if collapse is not None:
        out[collapse_key] = agreement_summary(
            table.collapse(collapse),
            ci=ci,
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
            n_raters=n_raters,
        )
    return json_ready(out)
