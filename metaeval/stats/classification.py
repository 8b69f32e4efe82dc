"""Accuracy, balanced accuracy, Cohen kappa and macro-F1 of predictions against reference labels, with intervals.

Every one of these metrics is a function of the K x K confusion matrix
(reference labels as rows, predictions as columns), and ``confusion_metrics``
computes them for a whole stack (..., K, K) of confusions at once. The point
estimate is that function on the confusion of the items as they are (the
identity resample), the bootstrap the same function on the confusions of all
resamples, built by one ``bincount`` per chunk of resamples: a point estimate
and its interval come from the same code and cannot disagree.

Conventions are scikit-learn's: kappa over the full category list (undefined
when chance disagreement is 0), balanced accuracy averages recall over the
classes present in the reference, macro-F1 averages F1 = 2TP / (2TP + FP + FN)
over the classes present in either. Undefined values are NaN here and an
``Estimate`` with a reason in ``classification_metrics``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .agreement import cohen_weights, kappa_from_confusion
from .bootstrap import percentile_ci
from .estimate import Estimate

__all__ = [
    "CLASSIFICATION_METRICS",
    "classification_bootstrap",
    "classification_distribution",
    "classification_metrics",
    "confusion_metrics",
    "confusions",
]

CLASSIFICATION_METRICS = ("accuracy", "balanced_accuracy", "cohen_kappa", "macro_f1")
NO_OVERLAP = "no item has both a human majority label and a prediction"
SAME_CATEGORY = "humans and verifier used one and the same category: chance disagreement is 0, so kappa is undefined"

_CHUNK = 2_000_000  # resampled items held in memory at once


def confusions(
    y_true: np.ndarray, y_pred: np.ndarray, n_categories: int, index: np.ndarray | None = None
) -> np.ndarray:
    """The (B, K, K) confusions of the items that each row of ``index`` (B, n) picks.

    Without ``index``, the items as they are: the identity resample, B = 1.
    """
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = np.asarray(y_pred, dtype=np.int64)
    k = n_categories
    if index is None:
        index = np.arange(len(y_true))[None, :]
    b = len(index)
    pair = y_true * k + y_pred
    flat = (np.arange(b)[:, None] * (k * k) + pair[index]).ravel()
    return np.bincount(flat, minlength=b * k * k).reshape(b, k, k)


def _mean_where(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Mean over the last axis of the entries where ``present`` (NaN when there are none)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(present, values, 0.0).sum(axis=-1) / present.sum(axis=-1)


def confusion_metrics(conf: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy, balanced accuracy, Cohen kappa and macro-F1 of each confusion in a (..., K, K) stack.

    NaN where a metric is undefined: no items, or (kappa) chance disagreement 0.
    """
    conf = np.asarray(conf)
    k = conf.shape[-1]
    n = conf.sum(axis=(-2, -1)).astype(np.float64)
    diag = np.diagonal(conf, axis1=-2, axis2=-1).astype(np.float64)
    support = conf.sum(axis=-1).astype(np.float64)  # reference labels per class
    predicted = conf.sum(axis=-2).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        accuracy = diag.sum(axis=-1) / n
        recall = diag / support
        f1 = 2 * diag / (support + predicted)
        kappa, _, _, d_e = kappa_from_confusion(conf, cohen_weights(k))
    return {
        "accuracy": accuracy,
        "balanced_accuracy": _mean_where(recall, support > 0),
        "cohen_kappa": np.where(d_e > 1e-12, kappa, np.nan),
        "macro_f1": _mean_where(f1, (support + predicted) > 0),
    }


def classification_distribution(
    y_true: np.ndarray, y_pred: np.ndarray, n_categories: int, *, n_resamples: int = 1000, seed: int | None = 0
) -> dict[str, np.ndarray]:
    """Each metric on every bootstrap resample of the items: ``{metric: array of n_resamples}``.

    Resample ``b`` is row ``b`` of ``default_rng(seed).integers(0, n, (n_resamples, n))``
    (drawn in row chunks: the stream is the same), so a plain loop reproduces it.
    """
    n = len(y_true)
    rng = np.random.default_rng(seed)
    step = max(1, _CHUNK // max(n, 1))
    parts: dict[str, list[np.ndarray]] = {name: [] for name in CLASSIFICATION_METRICS}
    for start in range(0, n_resamples, step):
        index = rng.integers(0, n, size=(min(step, n_resamples - start), n))
        for name, values in confusion_metrics(confusions(y_true, y_pred, n_categories, index)).items():
            parts[name].append(values)
    return {name: np.concatenate(chunks) if chunks else np.empty(0) for name, chunks in parts.items()}


def classification_bootstrap(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    n_categories: int,
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> dict[str, dict]:
    """Percentile CIs over items: ``{metric: {"ci", "n_undefined", ...}}`` (empty when fewer than 2 items)."""
    if len(y_true) < 2 or n_resamples < 1:
        return {}
    dists = classification_distribution(y_true, y_pred, n_categories, n_resamples=n_resamples, seed=seed)
    return {
        name: {
            "ci": percentile_ci(dist, confidence),
            "ci_method": "percentile bootstrap over items",
            "n_resamples": n_resamples,
            "n_undefined": int((~np.isfinite(dist)).sum()),
            "seed": seed,
            "confidence": confidence,
        }
        for name, dist in dists.items()
    }


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def classification_metrics(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    categories: Sequence,
    *,
    n_resamples: int = 0,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Accuracy, balanced accuracy, Cohen kappa, macro-F1, per class, confusion.

    Inputs are category codes (0..K-1). Kappa uses the full category list.
    Balanced accuracy averages recall over classes present in ``y_true``;
    macro-F1 averages F1 = 2TP / (2TP + FP + FN) over classes present in
    either (scikit-learn's conventions). The confusion matrix has human
    labels as rows and predictions as columns, in category order. With
    ``n_resamples``, every defined metric carries its percentile bootstrap
    interval over items (see ``classification_bootstrap``).
    """
    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = np.asarray(y_pred, dtype=np.int64)
    k = len(categories)
    n = len(y_true)
    conf = confusions(y_true, y_pred, k)[0]
    tp = np.diag(conf).astype(np.float64)
    support = conf.sum(axis=1).astype(np.float64)
    predicted = conf.sum(axis=0).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = tp / predicted
        recall = tp / support
        f1 = 2 * tp / (support + predicted)
    per_class = {
        c: {
            "precision": _finite(precision[i]),
            "recall": _finite(recall[i]),
            "f1": _finite(f1[i]),
            "support": int(support[i]),
            "predicted": int(predicted[i]),
        }
        for i, c in enumerate(categories)
    }
    matrix = {"labels": list(categories), "rows": "human", "columns": "prediction", "matrix": conf.tolist()}
    if n == 0:
        undefined = Estimate.undefined(NO_OVERLAP, 0)
        return {
            "n_items": 0,
            **dict.fromkeys(CLASSIFICATION_METRICS, undefined),
            "per_class": per_class,
            "confusion_matrix": matrix,
        }
    point = {name: float(values) for name, values in confusion_metrics(conf).items()}
    estimates = {
        "accuracy": Estimate(point["accuracy"], None, n),
        "balanced_accuracy": Estimate(
            point["balanced_accuracy"], None, n, extra={"n_classes": int((support > 0).sum())}
        ),
        "cohen_kappa": (
            Estimate(point["cohen_kappa"], None, n)
            if np.isfinite(point["cohen_kappa"])
            else Estimate.undefined(SAME_CATEGORY, n)
        ),
        "macro_f1": Estimate(point["macro_f1"], None, n, extra={"n_classes": int(((support + predicted) > 0).sum())}),
    }
    intervals = classification_bootstrap(y_true, y_pred, k, n_resamples=n_resamples, seed=seed, confidence=confidence)
    for name, interval in intervals.items():
        if estimates[name].defined:
            estimates[name] = estimates[name].with_ci(
                interval["ci"], **{key: value for key, value in interval.items() if key != "ci"}
            )
    return {"n_items": n, **estimates, "per_class": per_class, "confusion_matrix": matrix}
