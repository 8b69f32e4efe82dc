"""PPI / PPI++ means against the reference package ppi-python (``ppi_py``), and by simulation.

Tolerance against ``ppi_py``: 1e-6 absolute on every point, interval end and
lambda (the formulas are the same, so the differences are rounding, about 1e-15).
Coverage: 2,000 seeded simulated studies per case, all at once through
``ppi_mean_batch`` (which ``ppi_mean`` is checked to agree with).
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import ppi_py
import pytest

from metaeval import stats
from metaeval.stats import labels_needed, ppi_mean, ppi_mean_batch

TOL = 1e-6
Z95 = 1.959963984540054  # the two-sided 95 % normal quantile


def _continuous(rng: np.random.Generator, n: int, big_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A score whose verifier is correlated but biased (offset and shrunk) and noisy."""
    x = rng.normal(size=n + big_n)
    y = 2 + x + rng.normal(scale=0.5, size=n + big_n)
    yhat = 0.3 + 0.8 * x + rng.normal(scale=0.3, size=n + big_n)
    return y[:n], yhat[:n], yhat[n:]


def _share(rng: np.random.Generator, n: int, big_n: int, p: float = 0.3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """0/1 claims supported with share p; the verifier says supported with 0.85 / 0.2 (biased upwards)."""
    y = (rng.random(n + big_n) < p).astype(float)
    yhat = (rng.random(n + big_n) < np.where(y == 1, 0.85, 0.2)).astype(float)
    return y[:n], yhat[:n], yhat[n:]


def _negative(rng: np.random.Generator, n: int, big_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A verifier that gets it backwards: the tuned lambda is clipped to 0."""
    y, yhat, yhat_u = _continuous(rng, n, big_n)
    return y, -yhat, -yhat_u


def _underdispersed(rng: np.random.Generator, n: int, big_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predictions on a fifth of the labels' scale: cov / var(yhat) is near 5, so the tuned lambda is clipped to 1."""
    y, yhat, yhat_u = _continuous(rng, n, big_n)
    return y, 0.2 * yhat, 0.2 * yhat_u


DATASETS = {
    "continuous": lambda rng: _continuous(rng, 150, 2000),
    "share": lambda rng: _share(rng, 300, 3000),
    "small": lambda rng: _continuous(rng, 12, 40),
    "negative": lambda rng: _negative(rng, 200, 500),
    "underdispersed": lambda rng: _underdispersed(rng, 100, 1000),
}


def _ppi_py_lambda(y, yhat, yhat_u, point) -> float:
    """The lambda ppi_py used, read back from its point estimate (linear in lambda)."""
    return (point - y.mean()) / (yhat_u.mean() - yhat.mean())


@pytest.mark.parametrize("name", list(DATASETS))
@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.4])
@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_point_and_interval_equal_ppi_py(name, lam, confidence):
    y, yhat, yhat_u = DATASETS[name](np.random.default_rng(len(name)))
    result = ppi_mean(y, yhat, yhat_u, confidence=confidence, lam=lam)
    est = result["estimate"]

    point = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam)))
    low, high = (float(np.squeeze(v)) for v in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=1 - confidence, lam=lam))
    assert est.value == pytest.approx(point, abs=TOL)
    assert est.ci == pytest.approx((low, high), abs=TOL)
    assert result["width"] == pytest.approx(high - low, abs=TOL)
    assert result["lambda"] == pytest.approx(
        lam if lam is not None else _ppi_py_lambda(y, yhat, yhat_u, point), abs=TOL
    )

    c_low, c_high = ppi_py.classical_mean_ci(y, alpha=1 - confidence)
    assert result["classical"].value == pytest.approx(y.mean(), abs=TOL)
    assert result["classical"].ci == pytest.approx((c_low, c_high), abs=TOL)
    assert result["width_classical"] == pytest.approx(c_high - c_low, abs=TOL)
    assert result["width_ratio"] == pytest.approx((high - low) / (c_high - c_low), abs=TOL)
    assert result["verifier_only"].value == pytest.approx(np.concatenate([yhat, yhat_u]).mean(), abs=TOL)
    assert (result["n"], result["N"]) == (len(y), len(yhat_u))


def test_tuned_lambda_is_clipped_like_ppi_py():
    """The clipped datasets really hit the clip, and plain PPI (power_tuned=False) is lambda = 1."""
    y, yhat, yhat_u = DATASETS["negative"](np.random.default_rng(len("negative")))
    assert ppi_mean(y, yhat, yhat_u)["lambda"] == 0.0
    y, yhat, yhat_u = DATASETS["underdispersed"](np.random.default_rng(len("underdispersed")))
    assert ppi_mean(y, yhat, yhat_u)["lambda"] == 1.0
    y, yhat, yhat_u = DATASETS["continuous"](np.random.default_rng(len("continuous")))
    tuned = ppi_mean(y, yhat, yhat_u)
    assert 0 < tuned["lambda"] < 1
    assert tuned["estimate"].extra["method"].startswith("PPI++")
    plain = ppi_mean(y, yhat, yhat_u, power_tuned=False)
    assert plain["lambda"] == 1.0
    point = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u, lam=1)))
    assert plain["estimate"].value == pytest.approx(point, abs=TOL)
    # power tuning minimises the variance: never wider than plain PPI or the classical interval here
    assert tuned["width"] <= plain["width"] + 1e-12
    assert tuned["width"] <= tuned["width_classical"] + 1e-12


def test_batch_agrees_with_ppi_mean_and_ppi_py():
    rng = np.random.default_rng(7)
    ys, yhats, yhat_us = zip(*(_share(rng, 80, 400) for _ in range(5)), strict=True)
    batch = ppi_mean_batch(np.stack(ys), np.stack(yhats), np.stack(yhat_us), confidence=0.9)
    for i in range(5):
        one = ppi_mean(ys[i], yhats[i], yhat_us[i], confidence=0.9)
        assert batch["estimate"][i] == pytest.approx(one["estimate"].value, abs=1e-12)
        assert (batch["low"][i], batch["high"][i]) == pytest.approx(one["estimate"].ci, abs=1e-12)
        assert batch["lambda"][i] == pytest.approx(one["lambda"], abs=1e-12)
        assert (batch["classical_low"][i], batch["classical_high"][i]) == pytest.approx(one["classical"].ci, abs=1e-12)
        assert batch["verifier_only"][i] == pytest.approx(one["verifier_only"].value, abs=1e-12)
        low, high = ppi_py.ppi_mean_ci(ys[i], yhats[i], yhat_us[i], alpha=0.1)
        assert (batch["low"][i], batch["high"][i]) == pytest.approx((float(low[0]), float(high[0])), abs=TOL)


# --- coverage by simulation -----------------------------------------------------------------

RUNS, N_LAB, N_UNLAB = 2000, 200, 1000


def _simulated_mean(rng):
    """Each run a fresh random study; the truth is 1.0, the verifier's mean 0.5 (biased by -0.5)."""
    shape = (RUNS, N_LAB + N_UNLAB)
    x = rng.normal(size=shape)
    y = 1.0 + x + rng.normal(scale=0.6, size=shape)
    yhat = 0.5 + 0.7 * x + rng.normal(scale=0.4, size=shape)
    return y[:, :N_LAB], yhat[:, :N_LAB], yhat[:, N_LAB:], 1.0


def _simulated_share(rng):
    """True share 0.3; the verifier calls 85 % of supported and 20 % of unsupported claims supported (mean 0.395)."""
    shape = (RUNS, N_LAB + N_UNLAB)
    y = (rng.random(shape) < 0.3).astype(float)
    yhat = (rng.random(shape) < np.where(y == 1, 0.85, 0.2)).astype(float)
    return y[:, :N_LAB], yhat[:, :N_LAB], yhat[:, N_LAB:], 0.3


@pytest.mark.parametrize(
    ("simulate", "max_width_ratio"),
    [(_simulated_mean, 0.8), (_simulated_share, 0.9)],
    ids=["mean", "share"],
)
def test_ppi_plus_plus_covers_the_truth_with_a_biased_verifier(simulate, max_width_ratio):
    y, yhat, yhat_u, truth = simulate(np.random.default_rng(2023))
    tuned = ppi_mean_batch(y, yhat, yhat_u, confidence=0.95)
    covered = (tuned["low"] <= truth) & (truth <= tuned["high"])
    assert 0.93 <= covered.mean() <= 0.97
    # the verifier alone is off: its mean misses the truth by far more than the PPI++ interval's half-width
    bias = tuned["verifier_only"].mean() - truth
    half_width = ((tuned["high"] - tuned["low"]) / 2).mean()
    assert abs(bias) > 0.09 and abs(bias) > half_width
    # and PPI++ is unbiased in spite of it
    assert abs(tuned["estimate"].mean() - truth) < 3 * tuned["estimate"].std() / math.sqrt(RUNS)
    # a good verifier narrows the interval against the human-only one
    width = (tuned["high"] - tuned["low"]).mean()
    width_classical = (tuned["classical_high"] - tuned["classical_low"]).mean()
    assert width < max_width_ratio * width_classical
    classical_covered = (tuned["classical_low"] <= truth) & (truth <= tuned["classical_high"])
    assert 0.93 <= classical_covered.mean() <= 0.97
    plain = ppi_mean_batch(y, yhat, yhat_u, power_tuned=False)
    assert 0.93 <= ((plain["low"] <= truth) & (truth <= plain["high"])).mean() <= 0.97
    # the first runs through the one-study function give the same intervals
    for i in range(3):
        assert ppi_mean(y[i], yhat[i], yhat_u[i])["estimate"].ci == pytest.approx(
            (tuned["low"][i], tuned["high"][i]), abs=1e-12
        )


def test_useless_verifier_costs_little_width():
    """Independent predictions: the tuned lambda stays near 0 and the width near the classical one."""
    rng = np.random.default_rng(5)
    y = rng.normal(size=(RUNS, N_LAB))
    yhat_all = rng.normal(size=(RUNS, N_LAB + N_UNLAB))
    tuned = ppi_mean_batch(y, yhat_all[:, :N_LAB], yhat_all[:, N_LAB:])
    ratio = (tuned["high"] - tuned["low"]).mean() / (tuned["classical_high"] - tuned["classical_low"]).mean()
    assert 0.97 < ratio <= 1.0 + 1e-9
    assert np.median(tuned["lambda"]) < 0.05
    assert 0.93 <= ((tuned["low"] <= 0) & (tuned["high"] >= 0)).mean() <= 0.97


# --- undefined cases ------------------------------------------------------------------------


def _no_nan(result) -> None:
    json.dumps(stats.json_ready(result), allow_nan=False)


@pytest.mark.parametrize("n", [0, 1])
def test_fewer_than_two_labels_is_undefined(n):
    result = ppi_mean(np.ones(n), np.ones(n), np.array([0.0, 1.0, 1.0]))
    assert result["estimate"].value is None and "fewer than 2 labelled" in result["estimate"].reason
    assert result["classical"].value is None and result["classical"].reason
    assert result["lambda"] is None and result["width"] is None and result["width_ratio"] is None
    assert result["verifier_only"].value == pytest.approx((n + 2) / (n + 3))
    _no_nan(result)


def test_no_unlabelled_predictions_is_undefined_but_classical_stands():
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    result = ppi_mean(y, y, [])
    assert result["estimate"].value is None and "N=0" in result["estimate"].reason
    assert result["classical"].value == pytest.approx(0.6)
    assert result["classical"].ci is not None
    _no_nan(result)


def test_no_variance_in_labels_or_predictions_leaves_the_intervals_undefined():
    result = ppi_mean(np.ones(30), np.ones(30), np.ones(300))
    est = result["estimate"]
    assert est.value == 1.0 and est.ci is None and "zero width" in est.extra["ci_unavailable"]
    assert result["classical"].ci is None and "zero width" in result["classical"].extra["ci_unavailable"]
    assert result["width"] is None and result["width_classical"] is None and result["width_ratio"] is None
    _no_nan(result)
    # ppi_py gives NaN here (the tuned lambda is 0/0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(ppi_py.ppi_mean_pointestimate(np.ones(30), np.ones(30), np.ones(300))).all()


def test_constant_predictions_give_the_classical_result_for_every_lambda():
    """Where ppi_py's tuned lambda is 0/0 (NaN), every fixed lambda gives one answer; we report it."""
    y = np.random.default_rng(3).normal(size=50)
    result = ppi_mean(y, np.full(50, 0.7), np.full(500, 0.7))
    assert result["lambda"] == 0.0
    for lam in (0, 1):
        low, high = ppi_py.ppi_mean_ci(y, np.full(50, 0.7), np.full(500, 0.7), alpha=0.05, lam=lam)
        assert result["estimate"].ci == pytest.approx((float(low[0]), float(high[0])), abs=TOL)
    assert result["estimate"].ci == pytest.approx(result["classical"].ci, abs=1e-12)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="missing or infinite"):
        ppi_mean([1.0, np.nan, 0.0], [1.0, 1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="one length"):
        ppi_mean([1.0, 0.0, 1.0], [1.0, 1.0], [1.0])
    with pytest.raises(ValueError, match="confidence"):
        ppi_mean([1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [1.0], confidence=1.0)
    with pytest.raises(ValueError, match="n=1"):
        ppi_mean_batch(np.ones((3, 1)), np.ones((3, 1)), np.ones((3, 4)))


# --- planning -------------------------------------------------------------------------------


def _width(n: int, big_n: int, var_y: float, var_h: float, cov: float, z: float) -> tuple[float, float]:
    """The planned full widths (classical, PPI++) on n labels, from the formulas of PPI++ (lambda clipped to [0, 1])."""
    lam = min(max(cov / ((1 + n / big_n) * var_h), 0.0), 1.0)
    v_ppi = lam**2 * var_h / big_n + (var_y - 2 * lam * cov + lam**2 * var_h) / n
    return 2 * z * math.sqrt(var_y / n), 2 * z * math.sqrt(v_ppi)


def _moments(y, yhat) -> tuple[float, float, float]:
    c = np.cov(y, yhat)
    return float(c[0, 0]), float(c[1, 1]), float(c[0, 1])


@pytest.mark.parametrize(
    ("pilot", "big_n", "width"),
    [("continuous", 2000, 0.15), ("share", 3000, 0.06), ("underdispersed", 1000, 0.2), ("small", 500, 0.5)],
)
def test_labels_needed_is_the_smallest_n_on_the_width_formula(pilot, big_n, width):
    y, yhat, _ = DATASETS[pilot](np.random.default_rng(11))
    plan = labels_needed(y, yhat, n_unlabelled=big_n, width=width)
    var_y, var_h, cov = _moments(y, yhat)
    n_c, n_p = plan["n_classical"], plan["n_ppi"]
    assert n_p > 2 and n_c > 2
    assert _width(n_c, big_n, var_y, var_h, cov, Z95)[0] <= width < _width(n_c - 1, big_n, var_y, var_h, cov, Z95)[0]
    assert _width(n_p, big_n, var_y, var_h, cov, Z95)[1] <= width < _width(n_p - 1, big_n, var_y, var_h, cov, Z95)[1]
    assert n_p <= n_c and plan["ratio"] == pytest.approx(n_p / n_c)
    assert plan["width_ppi_at_n"] == pytest.approx(_width(n_p, big_n, var_y, var_h, cov, Z95)[1], rel=1e-9)


def test_useless_verifier_needs_about_the_classical_number_of_labels():
    rng = np.random.default_rng(12)
    y, yhat = rng.normal(size=500), rng.normal(size=500)
    plan = labels_needed(y, yhat, n_unlabelled=5000, width=0.1)
    assert plan["n_classical"] > 1000
    assert 0.97 * plan["n_classical"] <= plan["n_ppi"] <= plan["n_classical"]


def test_perfect_verifier_needs_far_fewer_labels():
    """yhat = y: the PPI++ variance is var(y) / (n + N), so n = 4 z^2 var(y) / w^2 - N labels."""
    y = (np.random.default_rng(13).random(400) < 0.3).astype(float)
    big_n, width = 1000, 0.05
    plan = labels_needed(y, y, n_unlabelled=big_n, width=width)
    var_y = float(np.var(y, ddof=1))
    assert plan["n_classical"] == math.ceil(4 * Z95**2 * var_y / width**2)
    assert plan["n_ppi"] == math.ceil(4 * Z95**2 * var_y / width**2 - big_n)
    assert plan["n_ppi"] < 0.3 * plan["n_classical"]


def test_planned_labels_give_the_planned_width_in_simulated_studies():
    """Plan from a large pilot, then run 1,000 studies of that size through the estimator: the widths land on target."""
    rng = np.random.default_rng(14)
    y, yhat, _ = _continuous(rng, 5000, 1)
    big_n, width = 800, 0.25
    plan = labels_needed(y, yhat, n_unlabelled=big_n, width=width)
    runs = [_continuous(rng, plan["n_ppi"], big_n) for _ in range(1000)]
    ys, yhats, yhat_us = (np.stack(a) for a in zip(*runs, strict=True))
    sim = ppi_mean_batch(ys, yhats, yhat_us)
    assert (sim["high"] - sim["low"]).mean() == pytest.approx(width, rel=0.03)
    classical_sim = [_continuous(rng, plan["n_classical"], 1)[0] for _ in range(300)]
    classical_width = 2 * Z95 * np.std(np.stack(classical_sim), axis=1) / math.sqrt(plan["n_classical"])
    assert classical_width.mean() == pytest.approx(width, rel=0.03)


def test_labels_needed_undefined_and_refused():
    tiny = labels_needed([1.0], [1.0], n_unlabelled=100, width=0.1)
    assert tiny["n_ppi"] is None and tiny["n_classical"] is None and "fewer than 2" in tiny["reason"]
    flat = labels_needed(np.ones(50), np.r_[np.ones(25), np.zeros(25)], n_unlabelled=100, width=0.1)
    assert flat["n_ppi"] is None and "do not vary" in flat["reason"]
    _no_nan(flat)
    with pytest.raises(ValueError, match="width"):
        labels_needed([0.0, 1.0, 1.0], [0.0, 1.0, 1.0], n_unlabelled=100, width=0)
    with pytest.raises(ValueError, match="n_unlabelled"):
        labels_needed([0.0, 1.0, 1.0], [0.0, 1.0, 1.0], n_unlabelled=0, width=0.1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_weighted_mean_equals_ppi_python_with_weights(seed):
    """FActScore-style weights (1 / the response's claim count): point, interval and the classical interval
    equal ppi_py's ``ppi_mean_pointestimate`` / ``ppi_mean_ci`` / ``classical_mean_ci`` with ``w``."""
    import ppi_py as reference

    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, size=400)  # claims per response
    weights = np.repeat(1.0 / sizes, sizes)
    truth = (rng.random(weights.size) < np.repeat(rng.beta(4, 2, size=sizes.size), sizes)).astype(float)
    predicted = np.where(rng.random(weights.size) < 0.85, truth, 1.0).astype(float)
    labelled = rng.permutation(weights.size)[:300]
    rest = np.setdiff1d(np.arange(weights.size), labelled)
    y, yhat, yhat_u = truth[labelled], predicted[labelled], predicted[rest]
    w, w_u = weights[labelled], weights[rest]
    fit = stats.ppi_weighted_mean(y, yhat, yhat_u, w, w_u)
    point = float(np.ravel(reference.ppi_mean_pointestimate(y, yhat, yhat_u, w=w, w_unlabeled=w_u))[0])
    low, high = (
        float(np.ravel(b)[0]) for b in reference.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, w=w, w_unlabeled=w_u)
    )
    assert fit["estimate"].value == pytest.approx(point, abs=1e-9)
    assert fit["estimate"].ci == pytest.approx((low, high), abs=1e-9)
    c_low, c_high = (float(np.ravel(b)[0]) for b in reference.classical_mean_ci(y, w=w, alpha=0.05))
    assert fit["classical"].ci == pytest.approx((c_low, c_high), abs=1e-9)
    assert 0 <= fit["lambda"] <= 1 and fit["width_ratio"] < 1


# --- VeriScore's F1@K, response by response ----------------------------------------------------


def _f1_by_hand(labels: list[str | None], k: int) -> float:
    """VeriScore's F1@K of one response, written out: S supported, NS not, IR (and no label) left out."""
    supported = sum(label == "S" for label in labels)
    countable = sum(label in ("S", "NS") for label in labels)
    if supported == 0:
        return 0.0
    precision, recall = supported / countable, min(supported / k, 1.0)
    return 2 * precision * recall / (precision + recall)


def _seeded_claims(seed: int) -> tuple[pd.DataFrame, dict[str, int]]:
    """300 responses in two domains (K 4 and 7), 1-14 claims each; labels S / NS / IR. Half the responses are
    labelled in full, the others on a random part of their claims at most (not labelled: some claim lacks one);
    a verifier right 80 % of the time, saying S when wrong; a few responses with a claim it did not label."""
    rng = np.random.default_rng(seed)
    k = {"bio": 4, "science": 7}
    rows = []
    for number in range(300):
        domain = "bio" if number % 3 else "science"
        truth_share = rng.beta(3, 2)
        full = rng.random() < 0.5
        for claim in range(int(rng.integers(1, 15))):
            truth = "IR" if rng.random() < 0.08 else ("S" if rng.random() < truth_share else "NS")
            predicted = truth if rng.random() < 0.8 else "S"
            rows.append(
                {
                    "response_id": f"r{number:03d}",
                    "system": f"sys-{number % 2}",
                    "domain": domain,
                    "reference": truth if full or rng.random() < 0.6 else None,
                    "prediction": None if number % 50 == 7 and claim == 0 else predicted,
                }
            )
    claims = pd.DataFrame(rows)
    claims.loc[claims["response_id"] == "r001", "reference"] = None  # one response with no reference at all
    return claims, k


def _by_hand(claims: pd.DataFrame, k: dict[str, int], labelled: set[str] | None = None):
    """(y, yhat labelled, yhat unlabelled) by response, computed without Claimlab's counting."""
    y, yhat, yhat_u = [], [], []
    for response, group in claims.groupby("response_id", sort=False):
        references = [None if pd.isna(r) else r for r in group["reference"]]
        predictions = [None if pd.isna(p) else p for p in group["prediction"]]
        if None in predictions:
            continue  # the verifier did not label every claim: left out
        kk = k[group["domain"].iloc[0]]
        full = None not in references and (labelled is None or response in labelled)
        if full:
            y.append(_f1_by_hand(references, kk))
            yhat.append(_f1_by_hand(predictions, kk))
        else:
            yhat_u.append(_f1_by_hand(predictions, kk))
    return np.array(y), np.array(yhat), np.array(yhat_u)


@pytest.mark.parametrize("seed", [1, 2])
def test_f1_at_k_per_response_equals_ppi_python(seed):
    """F1@K's PPI++ by response: y and yhat written out by hand, then ppi_py's point and interval on them."""
    from metaeval.stats.ppi import LABELLED, LEFT_OUT_PREDICTION, f1_at_k_responses, ppi_f1_at_k

    claims, k = _seeded_claims(seed)
    roles = {"supported": ["S"], "unsupported": ["NS"], "excluded": ["IR"]}
    responses = f1_at_k_responses(claims, k=k, **roles)
    y, yhat, yhat_u = _by_hand(claims, k)
    assert (responses["role"] == LABELLED).sum() == len(y) > 100
    assert (responses["role"] == LEFT_OUT_PREDICTION).sum() == 6  # r007, r057, ..., r257
    assert responses.loc[responses["response_id"] == "r001", "fully_labelled"].item() is False
    fit = ppi_f1_at_k(responses)
    point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u))[0])
    low, high = (float(np.ravel(b)[0]) for b in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
    assert fit["estimate"].value == pytest.approx(point, abs=TOL)
    assert fit["estimate"].ci == pytest.approx((low, high), abs=TOL)
    c_low, c_high = (float(np.ravel(b)[0]) for b in ppi_py.classical_mean_ci(y, alpha=0.05))
    assert fit["classical"].ci == pytest.approx((c_low, c_high), abs=TOL)
    assert fit["verifier_only"].value == pytest.approx(np.concatenate([yhat, yhat_u]).mean(), abs=TOL)
    assert (fit["n"], fit["N"], fit["n_responses"]) == (len(y), len(yhat_u), 300)
    assert fit["n_left_out"] == {LEFT_OUT_PREDICTION: 6}
    assert fit["width_ratio"] < 1  # the verifier is right 80 % of the time: it helps

    # a seeded draw among the fully labelled responses (what ppi_labelled_share does), and one system alone
    full = sorted(responses.loc[responses["fully_labelled"], "response_id"])
    drawn = set(np.random.default_rng(seed).permutation(np.array(full, dtype=object))[: len(full) // 2])
    some = f1_at_k_responses(claims, k=k, labelled=drawn, **roles)
    one = some[some["system"] == "sys-1"]
    y, yhat, yhat_u = _by_hand(claims[claims["system"] == "sys-1"], k, labelled=drawn)
    low, high = (float(np.ravel(b)[0]) for b in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.1))
    assert ppi_f1_at_k(one, confidence=0.9)["estimate"].ci == pytest.approx((low, high), abs=TOL)


def test_f1_at_k_responses_refuse_and_leave_out_by_name():
    from metaeval.stats.ppi import LEFT_OUT_K, f1_at_k_responses

    claims = pd.DataFrame(
        {
            "response_id": ["a", "a", "b", "c"],
            "domain": ["x", "x", "x", "y"],
            "reference": ["S", None, "S", "NS"],
            "prediction": ["S", "NS", "S", "S"],
        }
    )
    roles = {"supported": ["S"], "unsupported": ["NS"]}
    out = f1_at_k_responses(claims, k={"x": 2}, **roles).set_index("response_id")
    assert out.loc["c", "role"] == LEFT_OUT_K and np.isnan(out.loc["c", "yhat"])
    assert list(out.loc[["a", "b"], "role"]) == ["unlabelled", "labelled"]
    assert out.loc["b", "y"] == pytest.approx(2 * 1 * 0.5 / 1.5)  # precision 1, recall 1/2
    with pytest.raises(ValueError, match=r"fully labelled.*'a'"):
        f1_at_k_responses(claims, k=2, labelled={"a", "b"}, **roles)
    with pytest.raises(ValueError, match="no role"):
        f1_at_k_responses(claims.assign(prediction="maybe"), k=2, **roles)
    with pytest.raises(ValueError, match="lacks columns"):
        f1_at_k_responses(claims.drop(columns="prediction"), k=2, **roles)


def _f1_arrays(supported: np.ndarray, countable: np.ndarray, k: int) -> np.ndarray:
    precision = supported / np.maximum(countable, 1)
    recall = np.minimum(supported / k, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(supported > 0, 2 * precision * recall / (precision + recall), 0.0)


def test_f1_at_k_ppi_covers_the_true_mean_in_simulated_studies():
    """2,000 seeded studies of 150 labelled and 450 unlabelled responses: 1 + Poisson(6) claims each, every claim
    supported with the response's Beta(4, 2) share; a verifier that says supported on 90 % of supported and 30 %
    of unsupported claims (F1@K biased upwards). The truth is exact: E[F1@K] over the Poisson and beta-binomial
    laws. The 95 % PPI++ interval covers it in 93-97 % of the studies."""
    from scipy import stats as distributions

    k, n_lab, n_unlab = 6, 150, 450
    truth = 0.0
    for claims in range(1, 80):
        supported = np.arange(claims + 1)
        chance = distributions.poisson.pmf(claims - 1, 6) * distributions.betabinom.pmf(supported, claims, 4, 2)
        truth += float((chance * _f1_arrays(supported, np.full(claims + 1, claims), k)).sum())
    rng = np.random.default_rng(33)
    shape = (RUNS, n_lab + n_unlab)
    countable = 1 + rng.poisson(6, size=shape)
    supported = rng.binomial(countable, rng.beta(4, 2, size=shape))
    said = rng.binomial(supported, 0.9) + rng.binomial(countable - supported, 0.3)
    y, yhat = _f1_arrays(supported, countable, k), _f1_arrays(said, countable, k)
    fit = ppi_mean_batch(y[:, :n_lab], yhat[:, :n_lab], yhat[:, n_lab:])
    covered = ((fit["low"] <= truth) & (truth <= fit["high"])).mean()
    classical = ((fit["classical_low"] <= truth) & (truth <= fit["classical_high"])).mean()
    print(f"F1@K: PPI++ covers the truth in {covered:.1%} of {RUNS:,} runs, human only in {classical:.1%}")
    assert 0.93 <= covered <= 0.97 and 0.93 <= classical <= 0.97
    assert fit["verifier_only"].mean() - truth > ((fit["high"] - fit["low"]) / 2).mean()  # the verifier is biased
    assert (fit["high"] - fit["low"]).mean() < 0.8 * (fit["classical_high"] - fit["classical_low"]).mean()
