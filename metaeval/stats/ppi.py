"""Prediction-powered inference for a mean: a verifier's labels on many items, corrected by a few human ones.

A verifier (an LLM judge) labels every claim cheaply; humans label a small random
sample. The verifier's mean is biased by its errors; the humans' mean is
unbiased but wide. Prediction-powered inference (PPI, Angelopoulos et al.,
Science 2023) uses both: the verifier's mean on the unlabelled items plus the
mean error it makes on the labelled ones (the *rectifier*), which is unbiased
whatever the verifier's bias, and narrower than the human-only interval when
the verifier is correlated with the humans. PPI++ (Angelopoulos, Duchi and
Zrnic 2023) weighs the predictions by a tuning parameter ``lambda`` chosen to
make the interval as narrow as possible, so a useless verifier costs nothing
(``lambda`` near 0 gives the classical interval back)::

    theta = lambda * mean(yhat_unlabelled) + mean(y - lambda * yhat_labelled)
    se^2  = var(lambda * yhat_unlabelled) / N + var(y - lambda * yhat_labelled) / n

A mean of 0/1 outcomes is a share (the share of supported claims), so the same
functions cover both. FActScore's mean over responses is a weighted mean of the
claims (``ppi_weighted_mean``). VeriScore's F1@K is not linear in the claims'
labels, so its unit is the response: ``f1_at_k_responses`` gives each response's
F1@K from the reference labels and from the verifier's, and ``ppi_f1_at_k`` the
PPI++ mean over responses (valid when the fully labelled responses are a random
sample of the responses).

Formulas follow the reference package ``ppi-python`` (``ppi_py.ppi_mean_pointestimate``,
``ppi_mean_ci``, ``classical_mean_ci``) exactly, so results agree with it to
rounding (tests/stats/test_stats_ppi.py):

* variances are the plain (``ddof=0``) ones, in the PPI and the classical interval;
* the power-tuned ``lambda = cov(y, yhat) / ((1 + n/N) var(yhat))`` takes the
  covariance on the labelled pairs (``ddof=0``) and the variance of the
  predictions pooled over labelled and unlabelled items (``ddof=1``), and is
  clipped to [0, 1] (``ppi_py`` clips for the mean: ``_calc_lam_glm(..., clip=True)``);
  a negatively correlated verifier is then ignored, not turned around;
* the interval is the normal (CLT) one; ``lambda`` is estimated from the same
  data, which the CLT interval ignores (asymptotically harmless; the coverage
  test simulates it at n = 200).

Where ``ppi_py`` returns NaN we say why: fewer than 2 labels, no unlabelled
predictions, or no variance at all (a zero-width interval). When every
prediction is the same value, the power-tuned ``lambda`` is 0/0 (NaN in
``ppi_py``); every ``lambda`` then gives the same estimate and interval (the
classical ones), and we report ``lambda`` = 0.

Why our own code rather than calling ``ppi_py``: the runtime must not depend on
numba and gdown, which ``ppi_py`` pulls in; the formulas are a few lines of
numpy, and written over the last axis they run thousands of simulated studies
at once (``ppi_mean_batch``). ``ppi_py`` is a test-only dependency, the
independent reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Mapping
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from .estimate import Estimate
from .scores import ALL_DOMAINS, COUNT_COLUMNS, _f1_at_k, response_counts, verdict_counts

__all__ = [
    "f1_at_k_responses",
    "labels_needed",
    "labels_needed_from_moments",
    "ppi_mean",
    "ppi_f1_at_k",
    "ppi_mean_batch",
    "ppi_weighted_mean",
    "share_moments",
]

VERIFIER_ONLY_NOTE = (
    "the mean of the verifier's predictions over all n + N items, labelled and unlabelled: "
    "biased by the verifier's errors, no interval"
)


def _z(confidence: float) -> float:
    """The two-sided normal quantile. Why the standard library: scipy.stats costs a second to import."""
    confidence = float(confidence)
    if not 0 < confidence < 1 or math.isnan(confidence):
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def _finite(name: str, values: Any) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} has missing or infinite values; leave those items out first")
    return arr


def _lambda(
    y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, power_tuned: bool, lam: float | None
) -> tuple[np.ndarray, bool]:
    """``lambda`` per study (last axis is the items), and whether it was tuned from the data."""
    shape = y.shape[:-1]
    if lam is not None:
        lam = float(lam)
        if not math.isfinite(lam):
            raise ValueError(f"lam must be a finite number, got {lam}")
        return np.full(shape, lam), False
    if not power_tuned:
        return np.ones(shape), False
    n, big_n = y.shape[-1], yhat_u.shape[-1]
    yc = y - y.mean(axis=-1, keepdims=True)
    hc = yhat - yhat.mean(axis=-1, keepdims=True)
    cov = (yc * hc).mean(axis=-1)
    pooled = np.concatenate([yhat, yhat_u], axis=-1)
    # A constant verifier has no variance: no finite ratio, and no lambda changes the result (see module doc).
    constant = np.ptp(pooled, axis=-1) == 0
    denom = (1 + n / big_n) * np.where(constant, 1.0, pooled.var(axis=-1, ddof=1))
    return np.clip(np.where(constant, 0.0, cov / denom), 0.0, 1.0), True


def ppi_mean_batch(
    y_labelled: Any,
    yhat_labelled: Any,
    yhat_unlabelled: Any,
    *,
    confidence: float = 0.95,
    power_tuned: bool = True,
    lam: float | None = None,
) -> dict[str, np.ndarray]:
    """PPI(++) and classical means of many studies at once, for simulation.

    Arrays are ``(..., n)``, ``(..., n)`` and ``(..., N)`` with the same leading
    shape (one study per leading index, items on the last axis); every result is
    an array of the leading shape: ``estimate``, ``low``, ``high``, ``se``,
    ``lambda``, ``classical``, ``classical_low``, ``classical_high``,
    ``classical_se`` and ``verifier_only``. No checks of degenerate studies here:
    a study without variance has ``se`` 0 and a zero-width interval;
    ``ppi_mean`` reports those as undefined. Needs n >= 2 and N >= 1.
    """
    y = _finite("y_labelled", y_labelled)
    yhat = _finite("yhat_labelled", yhat_labelled)
    yhat_u = _finite("yhat_unlabelled", yhat_unlabelled)
    if y.ndim == 0 or y.shape != yhat.shape or yhat_u.shape[:-1] != y.shape[:-1] or yhat_u.ndim != y.ndim:
        raise ValueError(
            f"y_labelled {y.shape} and yhat_labelled {yhat.shape} must have one shape, "
            f"and yhat_unlabelled {yhat_u.shape} the same leading axes"
        )
    n, big_n = y.shape[-1], yhat_u.shape[-1]
    if n < 2 or big_n < 1:
        raise ValueError(f"need at least 2 labelled items and 1 unlabelled prediction, got n={n}, N={big_n}")
    z = _z(confidence)
    lam_v, _ = _lambda(y, yhat, yhat_u, power_tuned, lam)
    lam_e = lam_v[..., None]
    imputed = lam_e * yhat_u
    rectifier = y - lam_e * yhat
    estimate = imputed.mean(axis=-1) + rectifier.mean(axis=-1)
    se = np.sqrt(imputed.var(axis=-1) / big_n + rectifier.var(axis=-1) / n)
    classical = y.mean(axis=-1)
    classical_se = y.std(axis=-1) / math.sqrt(n)
    return {
        "estimate": estimate,
        "low": estimate - z * se,
        "high": estimate + z * se,
        "se": se,
        "lambda": lam_v,
        "classical": classical,
        "classical_low": classical - z * classical_se,
        "classical_high": classical + z * classical_se,
        "classical_se": classical_se,
        "verifier_only": np.concatenate([yhat, yhat_u], axis=-1).mean(axis=-1),
    }


def _method(tuned: bool, lam: float) -> str:
    if tuned:
        return "PPI++ (power-tuned lambda)"
    if lam == 1:
        return "PPI (lambda = 1)"
    if lam == 0:
        return "classical (lambda = 0: the predictions are not used)"
    return "PPI with a fixed lambda"


def ppi_mean(
    y_labelled: Any,
    yhat_labelled: Any,
    yhat_unlabelled: Any,
    *,
    confidence: float = 0.95,
    power_tuned: bool = True,
    lam: float | None = None,
) -> dict[str, Any]:
    """The prediction-powered mean (or share) of one study, beside the human-only and verifier-only ones.

    ``y_labelled`` are the human labels (numbers, or 0/1 for a share) of the
    labelled items and ``yhat_labelled`` the verifier's predictions on the same
    items, in the same order; ``yhat_unlabelled`` the verifier's predictions on
    the other items. The labelled items must be a random sample of all of them.

    ``lam``: a fixed lambda (1 is plain PPI, 0 the classical estimate); when
    None, the PPI++ power-tuned lambda if ``power_tuned``, else 1.

    Returns ``{"estimate", "classical", "verifier_only"}`` as ``Estimate``
    (``estimate.extra`` holds ``method``, ``lambda``, ``se``, ``width``),
    and ``lambda``, ``n``, ``N``, ``confidence``, ``width``,
    ``width_classical`` and ``width_ratio`` (PPI over classical width, below 1
    when the verifier helps). Undefined values are None with a reason:
    fewer than 2 labels or no unlabelled predictions leave the PPI estimate
    undefined; no variance leaves an interval undefined (``ci_unavailable``).
    """
    y = _finite("y_labelled", y_labelled)
    yhat = _finite("yhat_labelled", yhat_labelled)
    yhat_u = _finite("yhat_unlabelled", yhat_unlabelled)
    if y.ndim != 1 or yhat.shape != y.shape or yhat_u.ndim != 1:
        raise ValueError(
            f"y_labelled {y.shape} and yhat_labelled {yhat.shape} must be one-dimensional and of one length, "
            f"yhat_unlabelled {yhat_u.shape} one-dimensional"
        )
    z = _z(confidence)
    n, big_n = len(y), len(yhat_u)
    all_predictions = np.concatenate([yhat, yhat_u])
    verifier_only = (
        Estimate(float(all_predictions.mean()), n_items=n + big_n, extra={"note": VERIFIER_ONLY_NOTE})
        if n + big_n
        else Estimate.undefined("no predictions")
    )
    out: dict[str, Any] = {
        "n": n,
        "N": big_n,
        "confidence": float(confidence),
        "verifier_only": verifier_only,
        "lambda": None,
        "width": None,
        "width_classical": None,
        "width_ratio": None,
    }
    if n < 2:
        reason = f"fewer than 2 labelled items (n={n}): no variance can be estimated from the labels"
        out["estimate"] = Estimate.undefined(reason, n_items=n + big_n)
        out["classical"] = Estimate.undefined(reason, n_items=n)
        return out

    mean_y = float(y.mean())
    classical_se = float(y.std()) / math.sqrt(n) if np.ptp(y) > 0 else 0.0
    classical = Estimate(mean_y, n_items=n, extra={"se": classical_se})
    if classical_se > 0:
        out["width_classical"] = 2 * z * classical_se
        classical = classical.with_ci(
            (mean_y - z * classical_se, mean_y + z * classical_se), width=out["width_classical"]
        )
    else:
        classical = classical.with_ci(
            None, ci_unavailable="the labels do not vary: a CLT interval would have zero width"
        )
    out["classical"] = classical

    if big_n < 1:
        out["estimate"] = Estimate.undefined(
            "no unlabelled predictions (N=0): the predictions add nothing; see the classical estimate", n_items=n
        )
        return out

    lam_a, tuned = _lambda(y, yhat, yhat_u, power_tuned, lam)
    lam_v = float(lam_a)
    imputed = lam_v * yhat_u
    rectifier = y - lam_v * yhat
    value = float(imputed.mean() + rectifier.mean())
    # ptp, not var: a constant column of floats can have a variance of 1e-33 rather than 0.
    var_imputed = float(imputed.var()) if np.ptp(imputed) > 0 else 0.0
    var_rectifier = float(rectifier.var()) if np.ptp(rectifier) > 0 else 0.0
    se = math.sqrt(var_imputed / big_n + var_rectifier / n)
    out["lambda"] = lam_v
    extra: dict[str, Any] = {
        "method": _method(tuned, lam_v),
        "lambda": lam_v,
        "se": se,
        "n_labelled": n,
        "n_unlabelled": big_n,
    }
    estimate = Estimate(value, n_items=n + big_n, extra=extra)
    if se > 0:
        out["width"] = 2 * z * se
        estimate = estimate.with_ci((value - z * se, value + z * se), width=out["width"])
        if out["width_classical"] is not None:
            out["width_ratio"] = out["width"] / out["width_classical"]
    else:
        estimate = estimate.with_ci(
            None,
            ci_unavailable=(
                "no variance: the labels minus lambda x the predictions, and lambda x the unlabelled "
                "predictions, are constant, so a CLT interval would have zero width"
            ),
        )
    out["estimate"] = estimate
    return out


# --- planning -----------------------------------------------------------------------


def _smallest(fits: Callable[[int], bool], hi: int) -> int:
    """Smallest integer n >= 2 with ``fits(n)``, for ``fits`` monotone in n; ``hi`` a first guess that fits.

    Why a search rather than the closed form alone: rounding can put a ceiling
    one off, and the answer must hold exactly on the width formula.
    """
    if fits(2):
        return 2
    hi = max(hi, 3)
    while not fits(hi):
        hi *= 2
    lo = 2  # does not fit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def labels_needed(
    y_pilot: Any,
    yhat_pilot: Any,
    *,
    n_unlabelled: int,
    width: float,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Human labels for an interval at most ``width`` wide, without PPI and with PPI++.

    From a pilot's labelled pairs (human label ``y_pilot``, verifier prediction
    ``yhat_pilot``): their variances and covariance (``ddof=1``). With ``N`` =
    ``n_unlabelled`` items labelled only by the verifier, the full width of the
    interval on ``n`` human labels is ``2 z sqrt(V)``:

    * classical: ``V = var(y) / n``;
    * PPI++: ``V = lam^2 var(yhat) / N + var(y - lam yhat) / n`` at the optimal
      ``lam = cov(y, yhat) / ((1 + n/N) var(yhat))``, clipped to [0, 1] as the
      estimator clips it (``ppi_mean``).

    Both shrink as n grows, so the smallest ``n`` (at least 2, the estimator's
    minimum) is found exactly by a binary search on the width formula, below the
    closed-form classical ``n = var(y) / V`` (the returned n meets ``width``,
    n - 1 does not, unless n is 2).
    PPI++ never needs more labels than classical (lam = 0 is the classical
    interval). Returns ``n_classical``, ``n_ppi``, ``ratio`` (``n_ppi /
    n_classical``), ``lambda`` at ``n_ppi``, the widths they reach and the
    pilot's moments; with a pilot of fewer than 2 items, or labels that do not
    vary, the numbers are None with a ``reason``.
    """
    y = _finite("y_pilot", y_pilot)
    yhat = _finite("yhat_pilot", yhat_pilot)
    if y.ndim != 1 or yhat.shape != y.shape:
        raise ValueError(f"y_pilot {y.shape} and yhat_pilot {yhat.shape} must be one-dimensional and of one length")
    if len(y) < 2:
        out = labels_needed_from_moments(0.0, 0.0, 0.0, n_unlabelled=n_unlabelled, width=width, confidence=confidence)
        out["reason"] = f"the pilot has fewer than 2 labelled items (n={len(y)}): no variance to plan from"
        out["pilot"] = {"n": len(y)}
        return out
    var_y = float(y.var(ddof=1)) if np.ptp(y) > 0 else 0.0
    var_h = float(yhat.var(ddof=1)) if np.ptp(yhat) > 0 else 0.0
    cov = float(np.cov(y, yhat)[0, 1]) if var_y > 0 and var_h > 0 else 0.0
    out = labels_needed_from_moments(var_y, var_h, cov, n_unlabelled=n_unlabelled, width=width, confidence=confidence)
    out["pilot"] = {"n": len(y), **out["pilot"]}
    return out


def _moments(var_y: float, var_h: float, cov: float) -> dict[str, Any]:
    corr = cov / math.sqrt(var_y * var_h) if var_y > 0 and var_h > 0 else None
    return {"var_y": var_y, "var_yhat": var_h, "cov": cov, "correlation": corr}


def share_moments(share: float, sensitivity: float, specificity: float) -> tuple[float, float, float]:
    """(var(y), var(yhat), cov(y, yhat)) of 0/1 labels with P(y = 1) = ``share`` and a verifier that says 1 on
    a share ``sensitivity`` of the 1s and 0 on a share ``specificity`` of the 0s: what a pilot's
    agreement table gives the planner without its raw labels."""
    for name, value in (("share", share), ("sensitivity", sensitivity), ("specificity", specificity)):
        if not 0 <= value <= 1:
            raise ValueError(f"{name} must be between 0 and 1, got {value}")
    said_yes = share * sensitivity + (1 - share) * (1 - specificity)
    return share * (1 - share), said_yes * (1 - said_yes), share * sensitivity - share * said_yes


def labels_needed_from_moments(
    var_y: float, var_h: float, cov: float, *, n_unlabelled: int, width: float, confidence: float = 0.95
) -> dict[str, Any]:
    """``labels_needed`` from the pilot's moments (``share_moments`` for a share and a verifier's
    sensitivity and specificity); the same numbers and keys, ``pilot`` holding the moments."""
    big_n = int(n_unlabelled)
    if big_n != n_unlabelled or big_n < 1:
        raise ValueError(f"n_unlabelled must be a whole number of at least 1, got {n_unlabelled}")
    width = float(width)
    if not width > 0 or not math.isfinite(width):
        raise ValueError(f"width must be a positive number, got {width}")
    z = _z(confidence)
    out: dict[str, Any] = {
        "n_classical": None,
        "n_ppi": None,
        "ratio": None,
        "lambda": None,
        "width_classical_at_n": None,
        "width_ppi_at_n": None,
        "reason": None,
        "width": width,
        "confidence": float(confidence),
        "n_unlabelled": big_n,
        "pilot": _moments(var_y, var_h, cov),
    }
    if var_y == 0:
        out["reason"] = "the pilot's labels do not vary: no variance to plan from"
        return out

    target = (width / (2 * z)) ** 2  # the largest variance V with 2 z sqrt(V) <= width

    def lam_at(n: int) -> float:
        return min(max(cov / ((1 + n / big_n) * var_h), 0.0), 1.0) if var_h > 0 else 0.0

    def var_ppi(n: int) -> float:
        lam = lam_at(n)
        return lam * lam * var_h / big_n + max(var_y - 2 * lam * cov + lam * lam * var_h, 0.0) / n

    guess = var_y / target  # classical: n >= var(y) / V
    if not math.isfinite(guess) or guess > 1e15:
        raise ValueError(f"no practical number of labels reaches a width of {width}")
    n_classical = _smallest(lambda n: var_y / n <= target, math.ceil(guess))
    # PPI++ fits at n_classical (lam = 0 is allowed), so the search runs below it
    n_ppi = _smallest(lambda n: var_ppi(n) <= target, n_classical)
    out.update(
        n_classical=n_classical,
        n_ppi=n_ppi,
        ratio=n_ppi / n_classical,
        width_classical_at_n=2 * z * math.sqrt(var_y / n_classical),
        width_ppi_at_n=2 * z * math.sqrt(var_ppi(n_ppi)),
    )
    out["lambda"] = lam_at(n_ppi)
    return out


def ppi_weighted_mean(
    y_labelled: Any,
    yhat_labelled: Any,
    yhat_unlabelled: Any,
    w_labelled: Any,
    w_unlabelled: Any,
    *,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """PPI++ for a weighted mean, the weights known for every item: FActScore's mean over responses of each
    response's share of supported claims is the claims' mean weighted by 1 / (the response's claim count).

    As ``ppi_py``'s ``ppi_mean_ci(..., w=, w_unlabeled=)``: each set's weights are scaled to average 1,
    lambda is power-tuned from the lam = 1 estimate's gradients (clipped to [0, 1]), and the interval is
    the normal one with ``std(w_u lam yhat_u)^2 / N + std(w (y - lam yhat))^2 / n`` (``ddof=0``). The
    classical estimate is ``mean(w y)`` with ``std(w y) / sqrt(n)``, as ``classical_mean_ci(y, w=)``.
    Returns the keys of ``ppi_mean``.
    """
    y = _finite("y_labelled", y_labelled)
    yhat = _finite("yhat_labelled", yhat_labelled)
    yhat_u = _finite("yhat_unlabelled", yhat_unlabelled)
    w = _finite("w_labelled", w_labelled)
    w_u = _finite("w_unlabelled", w_unlabelled)
    if not (y.shape == yhat.shape == w.shape and yhat_u.shape == w_u.shape):
        raise ValueError("labels, predictions and weights must be one length per set")
    if (w <= 0).any() or (w_u <= 0).any():
        raise ValueError("weights must be positive")
    z = _z(confidence)
    n, big_n = len(y), len(yhat_u)
    out: dict[str, Any] = {
        "n": n,
        "N": big_n,
        "confidence": float(confidence),
        "lambda": None,
        "width": None,
        "width_classical": None,
        "width_ratio": None,
        "verifier_only": (
            Estimate(
                float(np.average(np.concatenate([yhat, yhat_u]), weights=np.concatenate([w, w_u]))),
                n_items=n + big_n,
                extra={"note": VERIFIER_ONLY_NOTE + ", weighted"},
            )
            if n + big_n
            else Estimate.undefined("no predictions")
        ),
    }
    if n < 2:
        reason = f"fewer than 2 labelled items (n={n}): no variance can be estimated from the labels"
        out["estimate"] = Estimate.undefined(reason, n_items=n + big_n)
        out["classical"] = Estimate.undefined(reason, n_items=n)
        return out
    w = w / w.sum() * n
    classical_value = float((w * y).mean())
    classical_se = float((w * y).std()) / math.sqrt(n)
    classical = Estimate(classical_value, n_items=n, extra={"se": classical_se})
    if classical_se > 0:
        out["width_classical"] = 2 * z * classical_se
        classical = classical.with_ci(
            (classical_value - z * classical_se, classical_value + z * classical_se), width=out["width_classical"]
        )
    out["classical"] = classical
    if big_n < 1:
        out["estimate"] = Estimate.undefined("no unlabelled predictions (N=0): see the classical estimate", n_items=n)
        return out
    w_u = w_u / w_u.sum() * big_n
    first = float((w_u * yhat_u).mean() + (w * (y - yhat)).mean())  # lam = 1, where the tuning starts
    grads, grads_hat = w * (y - first), w * (yhat - first)
    cov = float(((grads - grads.mean()) * (grads_hat - grads_hat.mean())).sum()) * 2 / n
    pooled = np.concatenate([grads_hat, w_u * (yhat_u - first)])
    var_hat = float(pooled.var(ddof=1)) if np.ptp(pooled) > 0 else 0.0
    lam = min(max(cov / (2 * (1 + n / big_n) * var_hat), 0.0), 1.0) if var_hat > 0 else 0.0
    imputed, rectifier = w_u * lam * yhat_u, w * (y - lam * yhat)
    value = float(imputed.mean() + rectifier.mean())
    se = math.sqrt(float(imputed.std()) ** 2 / big_n + float(rectifier.std()) ** 2 / n)
    out["lambda"] = lam
    estimate = Estimate(
        value, n_items=n + big_n, extra={"method": _method(True, lam), "lambda": lam, "se": se, "n_labelled": n}
    )
    if se > 0:
        out["width"] = 2 * z * se
        estimate = estimate.with_ci((value - z * se, value + z * se), width=out["width"])
        if out["width_classical"]:
            out["width_ratio"] = out["width"] / out["width_classical"]
    out["estimate"] = estimate
    return out


# --- VeriScore's F1@K, response by response -------------------------------------------------

#: A response's part in the F1@K estimate (``f1_at_k_responses``' ``role``).
LABELLED = "labelled"
UNLABELLED = "unlabelled"
LEFT_OUT_PREDICTION = "left out: the verifier has no label for some of its claims"
LEFT_OUT_K = "left out: its domain has no K"


def f1_at_k_responses(
    claims: pd.DataFrame,
    *,
    supported: Collection[Hashable],
    unsupported: Collection[Hashable],
    excluded: Collection[Hashable] = (),
    k: int | Mapping[Hashable, int | None],
    labelled: Collection[Hashable] | None = None,
    response: str = "response_id",
    system: str = "system",
    domain: str = "domain",
    reference: str = "reference",
    prediction: str = "prediction",
    response_codes: tuple[np.ndarray, Any] | None = None,
) -> pd.DataFrame:
    """Per response, the pair prediction-powered inference needs for VeriScore's F1@K.

    Why responses, not claims: F1@K is not linear in the claims' labels (its recall is capped at K
    supported claims, and precision divides by the response's countable claims), so no claim-level
    correction gives its mean. A response is the unit instead: ``y`` its F1@K from the reference
    labels, ``yhat`` its F1@K from the verifier's labels, both by ``scores.veriscore_f1_at_k``'s
    rule with the K of its domain (``k``: one K, or K per domain as VeriScore freezes it).

    ``claims`` has one row per claim: ``response``, optional ``system`` and ``domain``, and the
    claim's ``reference`` and ``prediction`` labels (NaN / None: none). A response is *fully
    labelled* when every claim of it has a reference label (an excluded one, such as IR, counts as
    labelled: it is then not countable), *fully predicted* likewise. ``labelled``: the response ids
    counted as labelled (a random draw among the fully labelled ones); None: every fully labelled one.

    Columns: ``response_id, system, domain, n_claims, k, fully_labelled, fully_predicted, role, y,
    yhat``. ``role`` is ``labelled`` (``y`` and ``yhat`` set), ``unlabelled`` (``yhat`` set) or, left
    out of the estimate and saying why, a response the verifier did not label in full (as the
    claim-level share leaves out claims without a prediction) or whose domain has no K. ``response_codes``:
    ``pd.factorize(claims[response], sort=False, use_na_sentinel=True)`` when the caller has it (a report
    counts the same claims for each verifier).
    """
    absent = [c for c in (response, reference, prediction) if c not in claims.columns]
    if absent:
        raise ValueError(f"claim table lacks columns {absent!r} (has {list(claims.columns)!r})")
    base = pd.DataFrame(
        {
            "response_id": claims[response].to_numpy(dtype=object),
            "system": claims[system].to_numpy(dtype=object) if system in claims.columns else "",
            "domain": claims[domain].to_numpy(dtype=object) if domain in claims.columns else ALL_DOMAINS,
        }
    )
    codes = response_codes or pd.factorize(base["response_id"], sort=False, use_na_sentinel=True)
    ref = response_counts(
        base.assign(label=claims[reference].to_numpy(dtype=object)),
        supported=supported,
        unsupported=unsupported,
        excluded=excluded,
        response_codes=codes,
    )
    # the verifier's counts alone, in the same responses' order (no second frame of every response: issue 35)
    hat_counts = verdict_counts(claims[prediction], codes[0], len(codes[1]), supported, unsupported, excluded)
    hat = {name: hat_counts[:, i] for i, name in enumerate(COUNT_COLUMNS)}
    hat["n_countable"] = hat["supported"] + hat["not_supported"]
    out = ref[["response_id", "system", "domain", "n_claims"]].copy()
    domains, distinct = pd.factorize(out["domain"].to_numpy(dtype=object), use_na_sentinel=False)
    k_of: list[int | None] = []
    for dom in distinct:
        given = k.get(dom) if isinstance(k, Mapping) else k
        k_of.append(int(given) if given is not None and given > 0 else None)
    out["k"] = np.array(k_of, dtype=object)[domains]
    out["fully_labelled"] = (ref["no_verdict"] == 0).to_numpy()
    out["fully_predicted"] = hat["no_verdict"] == 0
    chosen = out["fully_labelled"].to_numpy().copy()
    if labelled is not None:
        wanted = pd.Index(list(labelled))
        not_full = wanted.difference(out.loc[out["fully_labelled"], "response_id"])
        if len(not_full):
            raise ValueError(f"responses counted as labelled must be fully labelled: {list(not_full[:5])!r}")
        chosen &= out["response_id"].isin(wanted).to_numpy()
    has_k = out["k"].notna().to_numpy()
    full_hat = out["fully_predicted"].to_numpy()
    # chosen as codes, then named: np.select over the names made fixed-width unicode arrays of 1M x 60
    # characters (240 MB each) at a million responses (issue 35)
    roles = np.array([LEFT_OUT_K, LEFT_OUT_PREDICTION, LABELLED, UNLABELLED], dtype=object)
    out["role"] = roles[np.select([~has_k, ~full_hat, chosen], [0, 1, 2], default=3)]
    y = np.full(len(out), np.nan)
    yhat = np.full(len(out), np.nan)
    for value in sorted({int(v) for v in out["k"].dropna()}):
        at = (out["k"] == value).to_numpy() & has_k
        y[at] = _f1_at_k(ref["supported"].to_numpy()[at], ref["n_countable"].to_numpy()[at], value)[2]
        yhat[at] = _f1_at_k(hat["supported"][at], hat["n_countable"][at], value)[2]
    role = out["role"].to_numpy()
    out["y"] = np.where(role == LABELLED, y, np.nan)
    out["yhat"] = np.where((role == LABELLED) | (role == UNLABELLED), yhat, np.nan)
    return out


def ppi_f1_at_k(responses: pd.DataFrame, *, confidence: float = 0.95) -> dict[str, Any]:
    """PPI++ for the mean F1@K over responses, from ``f1_at_k_responses`` (or some of its rows, e.g. one system's).

    ``ppi_mean`` with the labelled responses' (``y``, ``yhat``) and the unlabelled ones' ``yhat``:
    the same keys (``estimate``, ``classical``: the human-only mean over the labelled responses,
    ``verifier_only``: the verifier's mean F1@K over labelled and unlabelled ones; ``n`` and ``N``
    count responses), plus ``n_responses`` and ``n_left_out`` (responses left out, by reason).
    Valid only if the labelled responses are a random sample of the responses.
    """
    role = responses["role"].to_numpy()
    lab, unl = role == LABELLED, role == UNLABELLED
    fit = ppi_mean(
        responses["y"].to_numpy(dtype=float)[lab],
        responses["yhat"].to_numpy(dtype=float)[lab],
        responses["yhat"].to_numpy(dtype=float)[unl],
        confidence=confidence,
    )
    left = responses.loc[~(lab | unl), "role"].value_counts()
    fit["n_responses"] = len(responses)
    fit["n_left_out"] = {str(reason): int(count) for reason, count in left.items()}
    return fit
