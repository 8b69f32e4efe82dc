"""One implementation of the verifier metrics: point estimates and intervals from the same confusion kernel."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score, cohen_kappa_score, f1_score

from metaeval import stats
from metaeval.stats.classification import (
    classification_distribution,
    confusion_metrics,
    confusions,
)

WICE = ["supported", "partially_supported", "not_supported"]
SKLEARN = {
    "accuracy": accuracy_score,
    "balanced_accuracy": balanced_accuracy_score,
    "cohen_kappa": lambda t, p: cohen_kappa_score(t, p, labels=WICE),
    "macro_f1": lambda t, p: f1_score(t, p, average="macro"),
}


def test_wice_point_estimates_equal_scikit_learn_and_lie_in_their_intervals(wice):
    human, preds = wice
    result = stats.verifier_vs_majority(human, preds, WICE, n_resamples=1000, seed=0)
    merged = preds.merge(human, on="item", suffixes=("_pred", "_human"))
    y_true, y_pred = merged["label_human"], merged["label_pred"]
    assert result["n_predicted"] == len(merged) == 100
    for name in stats.CLASSIFICATION_METRICS:
        estimate = result[name]
        assert estimate.value == pytest.approx(SKLEARN[name](y_true, y_pred), abs=1e-12), name
        low, high = estimate.ci
        assert low <= estimate.value <= high and low < high, (name, estimate)
        assert estimate.extra["n_resamples"] == 1000 and estimate.extra["n_undefined"] == 0


def test_the_point_estimate_is_the_kernel_on_the_identity_resample(wice):
    human, preds = wice
    merged = preds.merge(human, on="item", suffixes=("_pred", "_human"))
    codes = {label: code for code, label in enumerate(WICE)}
    y_true = merged["label_human"].map(codes).to_numpy()
    y_pred = merged["label_pred"].map(codes).to_numpy()
    point = stats.classification_metrics(y_true, y_pred, WICE)
    identity = np.arange(len(y_true))[None, :]
    kernel = confusion_metrics(confusions(y_true, y_pred, len(WICE), identity))
    for name in stats.CLASSIFICATION_METRICS:
        assert kernel[name].shape == (1,) and point[name].value == kernel[name][0]
    assert (confusions(y_true, y_pred, len(WICE))[0] == np.array(point["confusion_matrix"]["matrix"])).all()


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_every_resample_equals_scikit_learn_on_the_resampled_items():
    rng = np.random.default_rng(4)
    y_true, y_pred = rng.integers(0, 3, 60), np.where(rng.random(60) < 0.6, rng.integers(0, 3, 60), 2)
    y_true[:20] = 0  # skewed reference: some resamples lack a class
    dists = classification_distribution(y_true, y_pred, 3, n_resamples=40, seed=2)
    draws = np.random.default_rng(2).integers(0, 60, size=(40, 60))
    for b, draw in enumerate(draws):
        t, p = y_true[draw], y_pred[draw]
        assert dists["accuracy"][b] == pytest.approx(accuracy_score(t, p))
        assert dists["cohen_kappa"][b] == pytest.approx(cohen_kappa_score(t, p, labels=[0, 1, 2]))
        assert dists["balanced_accuracy"][b] == pytest.approx(balanced_accuracy_score(t, p))
        assert dists["macro_f1"][b] == pytest.approx(f1_score(t, p, average="macro"))


def test_undefined_metrics_are_nan_in_the_kernel_and_none_with_a_reason_in_the_estimate():
    same = np.zeros(5, dtype=int)
    assert np.isnan(confusion_metrics(confusions(same, same, 3))["cohen_kappa"][0])
    point = stats.classification_metrics(same, same, ["a", "b", "c"], n_resamples=50)
    assert point["cohen_kappa"].value is None and "chance disagreement is 0" in point["cohen_kappa"].reason
    assert point["cohen_kappa"].ci is None and point["accuracy"].ci == (1.0, 1.0)
    empty = stats.classification_metrics(np.array([], dtype=int), np.array([], dtype=int), ["a", "b"], n_resamples=50)
    assert empty["n_items"] == 0 and empty["accuracy"].value is None and empty["accuracy"].ci is None
