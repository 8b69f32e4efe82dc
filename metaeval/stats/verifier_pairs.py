"""Comparing verifiers on the same items: paired differences, McNemar tests and a leaderboard.

Two verifiers scored on the same items are not independent samples: an item
that is hard for one is usually hard for the other. A paired comparison uses
that, and is much sharper than comparing two separate intervals. For every
pair of verifiers, ``compare_verifiers`` keeps the items both predicted and
the reference labels, and reports

* each verifier's accuracy, balanced accuracy and Cohen's kappa against the
  reference, from the package's confusion kernel (``classification``);
* the differences A − B with a paired percentile bootstrap: one resample of
  items feeds both verifiers, so what the items share cancels in the difference;
* an exact McNemar test of the items one verifier gets right and the other
  wrong, and Holm's step-down correction over all pairs (many pairs, many
  chances of a spurious "significant" difference).

``leaderboard`` puts per-study balanced accuracies side by side, as
LLM-AggreFact does, with the mean over studies and a rank.

Resample ``r`` of a pair is row ``r`` of
``numpy.random.default_rng(seed).integers(0, n, size=(n_boot, n))`` over the
pair's shared items in frame order (drawn in row chunks: the stream is the
same), so a plain loop reproduces every interval.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from .bootstrap import percentile_ci
from .classification import confusion_metrics, confusions
from .estimate import Estimate, json_ready

__all__ = ["PAIR_METRICS", "compare_verifiers", "leaderboard", "mcnemar_exact", "paired_distributions"]

#: The metrics reported per verifier and differenced per pair.
PAIR_METRICS = ("accuracy", "balanced_accuracy", "cohen_kappa")

TOO_FEW = "fewer than 2 items have a reference label and a prediction from both verifiers"
ONE_CLASS = (
    "the reference has a single class on the shared items: balanced accuracy is then plain accuracy "
    "and kappa is 0 whatever the verifier predicts, so neither is reported"
)
TEST = (
    "exact McNemar: two-sided exact binomial test of b (A right, B wrong) among the b + c discordant items "
    "at 0.5, p = min(1, 2 * P(X <= min(b, c))), X ~ Binomial(b + c, 0.5); p = 1 when b + c = 0"
)

_CHUNK = 2_000_000  # resampled items held in memory at once


# --- the tests ----------------------------------------------------------------------


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of ``b`` against ``c`` discordant items.

    The same number as statsmodels' ``mcnemar(table, exact=True)`` and scipy's
    ``binomtest(min(b, c), b + c, 0.5)`` (for p = 0.5 the distribution is
    symmetric, so scipy's "as or less likely" two-sided rule is twice the
    smaller tail, capped at 1).
    """
    n = b + c
    if n == 0:
        return 1.0
    # Imported here: scipy.stats takes most of a second to import, at every process start otherwise.
    from scipy.stats import binom

    return float(min(1.0, 2.0 * binom.cdf(min(b, c), n, 0.5)))


def _holm(p_values: list[float], alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm-adjusted p-values and step-down rejections at ``alpha``, as statsmodels' ``multipletests``.

    Written out rather than called: statsmodels' Holm runs a full ``gc.collect()``
    on every call (0.1 s in a loaded process) and its import takes another half second.
    The i-th smallest of m p-values is multiplied by m - i (i from 0), the
    products are made non-decreasing and capped at 1; hypotheses are rejected
    in that order until the first p > alpha / (m - i).
    """
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p)
    steps = np.arange(len(p), 0, -1, dtype=np.float64)
    adjusted, reject = np.empty(len(p)), np.empty(len(p), dtype=bool)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(p[order] * steps))
    reject[order] = np.logical_and.accumulate(p[order] <= alpha / steps)
    return adjusted, reject


# --- the metrics --------------------------------------------------------------------


def _metrics(conf: np.ndarray) -> dict[str, np.ndarray]:
    """``PAIR_METRICS`` of each confusion in a (..., K, K) stack; NaN where undefined here.

    Balanced accuracy and kappa need at least two reference classes (``ONE_CLASS``).
    """
    values = confusion_metrics(conf)
    several = (conf.sum(axis=-1) > 0).sum(axis=-1) >= 2
    return {
        "accuracy": values["accuracy"],
        "balanced_accuracy": np.where(several, values["balanced_accuracy"], np.nan),
        "cohen_kappa": np.where(several, values["cohen_kappa"], np.nan),
    }


def paired_distributions(
    ref: np.ndarray, pred_a: np.ndarray, pred_b: np.ndarray, n_categories: int, *, n_boot: int = 1000, seed: int = 0
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{metric: (A on every resample, B on every resample)}``, both on the SAME resamples of items.

    Inputs are category codes of the shared items. One chunk of resamples is
    one index matrix; each verifier's confusions are one ``bincount`` over it.
    """
    n = len(ref)
    rng = np.random.default_rng(seed)
    step = max(1, _CHUNK // max(n, 1))
    parts: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {m: ([], []) for m in PAIR_METRICS}
    for start in range(0, n_boot, step):
        index = rng.integers(0, n, size=(min(step, n_boot - start), n))
        on_a = _metrics(confusions(ref, pred_a, n_categories, index))
        on_b = _metrics(confusions(ref, pred_b, n_categories, index))
        for m in PAIR_METRICS:
            parts[m][0].append(on_a[m])
            parts[m][1].append(on_b[m])
    return {
        m: (np.concatenate(a) if a else np.empty(0), np.concatenate(b) if b else np.empty(0))
        for m, (a, b) in parts.items()
    }


def _ci_extra(dist: np.ndarray, n_boot: int, seed: int, confidence: float) -> dict[str, Any]:
    return {
        "ci_method": "paired percentile bootstrap over items",
        "n_resamples": n_boot,
        "n_undefined": int((~np.isfinite(dist)).sum()),
        "seed": seed,
        "confidence": confidence,
    }


def _estimate(value: float, n: int, reason: str, dist: np.ndarray | None, boot: dict[str, Any]) -> Estimate:
    """A value with its interval from ``dist``; undefined (with ``reason``) when the value is NaN."""
    if not np.isfinite(value):
        return Estimate.undefined(reason, n)
    est = Estimate(float(value), None, n)
    if dist is None:
        return est.with_ci(None, ci_unavailable="no resamples asked for (n_boot=0)")
    return est.with_ci(percentile_ci(dist, boot["confidence"]), **_ci_extra(dist, **boot))


# --- compare_verifiers --------------------------------------------------------------


def _codes(values: pd.Series, index: pd.Index, what: str) -> np.ndarray:
    """Category codes of a column, -1 where missing; a label outside ``labels`` is a ValueError."""
    present = values.notna().to_numpy()
    codes = np.full(len(values), -1, dtype=np.int64)
    got = index.get_indexer(values[present].to_numpy(dtype=object))
    if (got < 0).any():
        bad = pd.unique(values[present].to_numpy(dtype=object)[got < 0])[:10]
        raise ValueError(f"{what} has labels not in the labels {list(index)!r}: {list(bad)!r}")
    codes[present] = got
    return codes


def _pair(
    names: tuple[Hashable, Hashable],
    ref: np.ndarray,
    pred_a: np.ndarray,
    pred_b: np.ndarray,
    k: int,
    boot: dict[str, Any],
) -> dict[str, Any]:
    """One pair's numbers (its p-value still uncorrected)."""
    a, b = names
    has_ref = ref >= 0
    use = has_ref & (pred_a >= 0) & (pred_b >= 0)
    n = int(use.sum())
    out: dict[str, Any] = {
        "a": a,
        "b": b,
        "n_items": n,
        "n_left_out": {
            "no_reference": int((~has_ref).sum()),
            "no_prediction": {a: int((has_ref & (pred_a < 0)).sum()), b: int((has_ref & (pred_b < 0)).sum())},
            "note": "of the items with a reference; an item neither verifier predicted counts for both",
        },
    }
    r, pa, pb = ref[use], pred_a[use], pred_b[use]
    right_a, right_b = pa == r, pb == r
    b_count, c_count = int((right_a & ~right_b).sum()), int((~right_a & right_b).sum())
    counts = {
        "b": b_count,
        "c": c_count,
        "both_right": int((right_a & right_b).sum()),
        "both_wrong": int((~right_a & ~right_b).sum()),
        "n_discordant": b_count + c_count,
    }
    if n < 2:
        undefined = Estimate.undefined(TOO_FEW, n)
        out["verifiers"] = {name: dict.fromkeys(PAIR_METRICS, undefined) for name in (a, b)}
        out["difference"] = dict.fromkeys(PAIR_METRICS, undefined)
        out["mcnemar"] = {**counts, "p_value": None, "p_holm": None, "significant": None, "reason": TOO_FEW}
        return out

    point_a = {m: float(v) for m, v in _metrics(confusions(r, pa, k)[0]).items()}  # the identity resample
    point_b = {m: float(v) for m, v in _metrics(confusions(r, pb, k)[0]).items()}
    dists = paired_distributions(r, pa, pb, k, n_boot=boot["n_boot"], seed=boot["seed"]) if boot["n_boot"] > 0 else None
    out["verifiers"] = {
        name: {m: _estimate(point[m], n, ONE_CLASS, dists[m][side] if dists else None, boot) for m in PAIR_METRICS}
        for side, (name, point) in enumerate(((a, point_a), (b, point_b)))
    }
    difference = {}
    for m in PAIR_METRICS:
        est = _estimate(point_a[m] - point_b[m], n, ONE_CLASS, dists[m][0] - dists[m][1] if dists else None, boot)
        difference[m] = est.with_ci(est.ci, a_value=out["verifiers"][a][m].value, b_value=out["verifiers"][b][m].value)
    out["difference"] = difference
    out["mcnemar"] = {**counts, "p_value": mcnemar_exact(b_count, c_count)}
    return out


def compare_verifiers(
    frame: pd.DataFrame,
    *,
    reference_col: str = "reference",
    verifiers: list[str] | None = None,
    labels: list[str] | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Every pair of verifiers on the items both predicted: metrics, paired differences, McNemar, Holm.

    ``frame`` has one row per ``item``, the reference label in
    ``reference_col`` and one column per verifier with its predicted label
    (missing: that verifier did not predict the item; such an item leaves
    only the pairs with that verifier). ``verifiers`` defaults to every other
    column; ``labels`` to the labels seen (unweighted metrics do not depend
    on unused labels). Differences are A − B, A the earlier verifier.

    Returns (JSON-ready) ``{"pairs": [{"a", "b", "n_items", "n_left_out",
    "verifiers": {name: {metric: estimate}}, "difference": {metric: estimate},
    "mcnemar": {"b", "c", "both_right", "both_wrong", "n_discordant",
    "p_value", "p_holm", "significant"}}, ...], "correction", "test",
    "interval", ...}``. ``significant`` is Holm's rejection at
    alpha = 1 - confidence; a pair with fewer than 2 shared items has no
    test and is not counted in the correction.
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    if n_boot < 0:
        raise ValueError("n_boot must be at least 0")
    for column in ("item", reference_col):
        if column not in frame.columns:
            raise ValueError(f"the frame has no {column!r} column")
    if frame["item"].duplicated().any():
        raise ValueError("the frame must have one row per item; some items appear more than once")
    names = list(verifiers) if verifiers is not None else [c for c in frame.columns if c not in ("item", reference_col)]
    missing = [v for v in names if v not in frame.columns]
    if missing:
        raise ValueError(f"the frame has no column for the verifier(s) {missing!r}")
    if len(set(names)) != len(names):
        raise ValueError("verifiers must be distinct")
    columns = [reference_col, *names]
    if labels is None:
        seen = pd.unique(pd.concat([frame[c] for c in columns], ignore_index=True).dropna().to_numpy(dtype=object))
        labels = sorted(seen, key=str)
    index = pd.Index(list(labels), dtype=object)
    ref = _codes(frame[reference_col], index, f"the reference column {reference_col!r}")
    preds = {v: _codes(frame[v], index, f"verifier {v!r}") for v in names}

    boot = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    pairs = [_pair((a, b), ref, preds[a], preds[b], len(index), boot) for a, b in combinations(names, 2)]
    tested = [p for p in pairs if "reason" not in p["mcnemar"]]
    alpha = round(1 - confidence, 12)  # 0.05, not 0.050000000000000044
    adjusted, reject = _holm([p["mcnemar"]["p_value"] for p in tested], alpha)
    for p, p_holm, significant in zip(tested, adjusted, reject, strict=True):
        p["mcnemar"]["p_holm"] = float(p_holm)
        p["mcnemar"]["significant"] = bool(significant)
    return json_ready(
        {
            "pairs": pairs,
            "correction": f"Holm (step-down) over {len(tested)} pairs",
            "test": TEST,
            "interval": f"paired percentile bootstrap over items, {n_boot} resamples",
            "alpha": alpha,
            "confidence": confidence,
            "n_boot": n_boot,
            "seed": seed,
            "labels": list(index),
            "verifiers": names,
            "n_items": len(frame),
        }
    )


# --- leaderboard --------------------------------------------------------------------

_TIE = 1e-12  # means closer than this share a rank (float sums in another order differ in the last bit)


def _cell_value(value: Any) -> tuple[float | None, tuple[float, float] | None]:
    """(value, ci) of an ``Estimate``, its dict, or a plain number (None / NaN: undefined)."""
    if isinstance(value, Mapping):
        ci = value.get("ci")
        value = Estimate(value.get("value"), "", ci=(ci[0], ci[1]) if ci is not None else None)
    if isinstance(value, Estimate):
        return value.value, value.ci
    return Estimate(value, "").value, None  # Estimate turns NaN and inf into None


def leaderboard(cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Balanced accuracy per verifier and study, the mean over studies and a rank by it.

    ``cells`` are ``{"verifier", "study", "balanced_accuracy", "n_items"}``
    (the accuracy an ``Estimate``, its dict or a number). Studies are columns
    in order of first appearance. A verifier's mean is the unweighted mean
    over the studies where it has a defined value (each study counts once,
    as in LLM-AggreFact); rank 1 is the best mean, tied means share the lower
    rank, a verifier with no defined value has none. A verifier missing
    studies is ranked on those it has, which ``note`` says: its mean is over
    other data than its neighbours'.

    Returns ``{"columns": [study, ...], "rows": [{"verifier", "rank", "mean",
    "n_studies", "missing_studies", "n_items", "cells": {study: {"value",
    "ci", "n_items"} or None}}, ...] (best first), "note"}``.
    """
    studies: list[Hashable] = []
    order: list[Hashable] = []
    table: dict[Hashable, dict[Hashable, dict[str, Any]]] = {}
    for cell in cells:
        verifier, study = cell["verifier"], cell["study"]
        if verifier not in table:
            table[verifier] = {}
            order.append(verifier)
        if study not in studies:
            studies.append(study)
        if study in table[verifier]:
            raise ValueError(f"more than one cell for verifier {verifier!r} and study {study!r}")
        value, ci = _cell_value(cell.get("balanced_accuracy"))
        n_items = cell.get("n_items")
        table[verifier][study] = {"value": value, "ci": ci, "n_items": None if n_items is None else int(n_items)}

    rows: list[dict[str, Any]] = []
    for verifier in order:
        own = table[verifier]
        values = [c["value"] for c in own.values() if c["value"] is not None]
        rows.append(
            {
                "verifier": verifier,
                "mean": float(np.mean(values)) if values else None,
                "n_studies": len(values),
                "missing_studies": [s for s in studies if own.get(s, {}).get("value") is None],
                "n_items": sum(c["n_items"] or 0 for c in own.values() if c["value"] is not None),
                "cells": {s: own.get(s) for s in studies},
            }
        )
    means = np.array([r["mean"] for r in rows if r["mean"] is not None], dtype=np.float64)
    for row in rows:
        row["rank"] = None if row["mean"] is None else 1 + int((means > row["mean"] + _TIE).sum())
    rows.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0))  # stable: ties keep the input order

    partial = [r for r in rows if r["mean"] is not None and r["missing_studies"]]
    note = None
    if partial:
        listed = "; ".join(
            f"{r['verifier']} on {r['n_studies']} of {len(studies)} (missing {', '.join(map(str, r['missing_studies']))})"
            for r in partial
        )
        note = (
            f"some verifiers are ranked on the studies they have, not on all {len(studies)}: {listed}. "
            "Their means are over other studies than the others', so their ranks are not strictly comparable."
        )
    unranked = [str(r["verifier"]) for r in rows if r["mean"] is None]
    if unranked:
        note = (note + " " if note else "") + f"Not ranked (no defined value in any study): {', '.join(unranked)}."
    return json_ready({"columns": studies, "rows": rows, "note": note})
