"""compare_verifiers and leaderboard, against independent references and simulated truth.

References: the exact McNemar p-value is statsmodels' ``mcnemar(exact=True)`` and
scipy's ``binomtest`` (equal for p = 0.5: the binomial is symmetric, so scipy's
"as likely or less" two-sided rule is twice the smaller tail, capped at 1); Holm
is statsmodels' ``multipletests(method="holm")`` and a step-down written out here;
each verifier's metrics are scikit-learn's on the shared items, computed from the
frame with pandas; the paired interval is a plain loop over the documented
resamples with scikit-learn's metrics.

Simulation (binary reference, each verifier right on an item with a known rate,
A 0.80 and B 0.70, correlated through a shared item difficulty): the true
differences are 0.10 in balanced accuracy (every class's recall is the rate) and
0.20 in kappa (balanced marginals: kappa = 2 * rate - 1). 400 seeds, 200 items,
500 resamples. Measured when written: coverage 0.9475 (balanced accuracy) and
0.9450 (kappa); asserted 0.92 to 0.975. The paired interval was 0.69 times
as wide as the unpaired one on average; asserted < 0.8.
"""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest
from sklearn.metrics import accuracy_score, balanced_accuracy_score, cohen_kappa_score
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from metaeval import stats
from metaeval.stats.classification import classification_distribution
from metaeval.stats.verifier_pairs import PAIR_METRICS, mcnemar_exact

LABELS = ["supported", "contradicted", "inconclusive"]


def _verifier(rng: np.random.Generator, ref: np.ndarray, rate: float, labels=LABELS) -> np.ndarray:
    """Right with probability ``rate``, else a uniformly drawn wrong label."""
    k = len(labels)
    codes = pd.Index(labels).get_indexer(ref)
    wrong = (codes + rng.integers(1, k, len(ref))) % k
    return np.asarray(labels, dtype=object)[np.where(rng.random(len(ref)) < rate, codes, wrong)]


def _frame(seed: int = 0, n: int = 300, rates=(0.8, 0.7, 0.75, 0.6, 0.78)) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ref = rng.choice(LABELS, n, p=[0.5, 0.3, 0.2]).astype(object)
    data = {"item": [f"i{j}" for j in range(n)], "reference": ref}
    for name, rate in zip("ABCDE", rates, strict=False):
        data[name] = _verifier(rng, ref, rate)
    return pd.DataFrame(data)


def _pairs(result: dict) -> dict[tuple[str, str], dict]:
    return {(p["a"], p["b"]): p for p in result["pairs"]}


def _shared(frame: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    return frame.dropna(subset=["reference", a, b])


# --- McNemar and Holm -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("b", "c"), [(0, 0), (0, 1), (1, 0), (3, 3), (2, 9), (9, 2), (0, 12), (17, 18), (40, 61), (480, 530), (1200, 1100)]
)
def test_mcnemar_exact_equals_statsmodels_and_scipy(b, c):
    table = np.array([[25, b], [c, 7]])
    expected = mcnemar(table, exact=True).pvalue
    p = mcnemar_exact(b, c)
    assert p == pytest.approx(expected, rel=1e-12, abs=1e-300)
    if b + c == 0:
        assert p == 1.0  # scipy's binomtest refuses n = 0
    else:
        assert p == pytest.approx(binomtest(min(b, c), b + c, 0.5).pvalue, rel=1e-12, abs=1e-300)
        assert p == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-12, abs=1e-300)  # symmetric at 0.5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pair_p_values_equal_statsmodels_on_tables_counted_from_the_frame(seed):
    frame = _frame(seed, n=150 + 100 * seed)
    result = stats.compare_verifiers(frame, n_boot=0)
    for (a, b), pair in _pairs(result).items():
        shared = _shared(frame, a, b)
        right_a = (shared[a] == shared["reference"]).to_numpy()
        right_b = (shared[b] == shared["reference"]).to_numpy()
        table = pd.crosstab(
            pd.Categorical(right_a, [True, False]), pd.Categorical(right_b, [True, False]), dropna=False
        )
        m = pair["mcnemar"]
        assert [m["both_right"], m["b"], m["c"], m["both_wrong"]] == table.to_numpy().ravel().tolist()
        assert m["p_value"] == pytest.approx(mcnemar(table.to_numpy(), exact=True).pvalue, rel=1e-12, abs=1e-300)
        assert m["p_value"] == pytest.approx(binomtest(min(m["b"], m["c"]), m["n_discordant"]).pvalue, rel=1e-12)


def _holm_by_hand(p: np.ndarray) -> np.ndarray:
    order = np.argsort(p)
    m = len(p)
    adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


def test_holm_adjusted_p_values_equal_multipletests_and_the_step_down_by_hand():
    frame = _frame(3, n=400)
    result = stats.compare_verifiers(frame, n_boot=0)
    pairs = result["pairs"]
    assert len(pairs) == 10 and result["correction"] == "Holm (step-down) over 10 pairs"
    p = np.array([pair["mcnemar"]["p_value"] for pair in pairs])
    held = np.array([pair["mcnemar"]["p_holm"] for pair in pairs])
    reject, reference, _, _ = multipletests(p, alpha=0.05, method="holm")
    np.testing.assert_allclose(held, reference, rtol=0, atol=1e-12)
    np.testing.assert_allclose(held, _holm_by_hand(p), rtol=0, atol=1e-12)
    assert [pair["mcnemar"]["significant"] for pair in pairs] == reject.tolist()
    assert 0 < reject.sum() < len(pairs)  # the data make some pairs differ and some not
    assert (held >= p - 1e-15).all()


def test_significance_follows_the_confidence_level():
    frame = _frame(3, n=400)
    for confidence in (0.9, 0.99):
        pairs = stats.compare_verifiers(frame, n_boot=0, confidence=confidence)["pairs"]
        p = np.array([pair["mcnemar"]["p_value"] for pair in pairs])
        reject = multipletests(p, alpha=1 - confidence, method="holm")[0]
        assert [pair["mcnemar"]["significant"] for pair in pairs] == reject.tolist()


# --- the metrics against scikit-learn -------------------------------------------------


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_each_verifiers_metrics_equal_scikit_learn_on_the_shared_items():
    frame = _frame(5, n=250)
    rng = np.random.default_rng(9)
    for column, share in (("reference", 0.05), ("B", 0.1), ("C", 0.3)):
        frame.loc[rng.random(len(frame)) < share, column] = None
    result = stats.compare_verifiers(frame, n_boot=0)
    for (a, b), pair in _pairs(result).items():
        shared = _shared(frame, a, b)
        assert pair["n_items"] == len(shared)
        for name in (a, b):
            got = pair["verifiers"][name]
            y_true, y_pred = shared["reference"].tolist(), shared[name].tolist()
            assert got["accuracy"]["value"] == pytest.approx(accuracy_score(y_true, y_pred), abs=1e-12)
            assert got["balanced_accuracy"]["value"] == pytest.approx(
                balanced_accuracy_score(y_true, y_pred), abs=1e-12
            )
            assert got["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(y_true, y_pred), abs=1e-12)
        for metric in PAIR_METRICS:
            diff = pair["difference"][metric]
            va, vb = pair["verifiers"][a][metric]["value"], pair["verifiers"][b][metric]["value"]
            assert diff["value"] == pytest.approx(va - vb, abs=1e-15)
            assert diff["n_items"] == len(shared)


# --- the paired bootstrap -------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_the_paired_interval_is_a_plain_loop_over_one_resample_for_both_verifiers():
    frame = _frame(7, n=80)
    frame.loc[[3, 10, 11], "B"] = None
    n_boot, seed = 60, 4
    pair = _pairs(stats.compare_verifiers(frame, verifiers=["A", "B"], n_boot=n_boot, seed=seed))[("A", "B")]
    shared = _shared(frame, "A", "B")
    n = len(shared)
    draws = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    ref, a, b = (shared[c].to_numpy() for c in ("reference", "A", "B"))
    for metric, score in (("balanced_accuracy", balanced_accuracy_score), ("cohen_kappa", cohen_kappa_score)):
        diffs = np.array([score(ref[d], a[d]) - score(ref[d], b[d]) for d in draws])
        expected = np.quantile(diffs, [0.025, 0.975])
        np.testing.assert_allclose(pair["difference"][metric]["ci"], expected, rtol=0, atol=1e-12)
        singles = np.array([score(ref[d], a[d]) for d in draws])
        np.testing.assert_allclose(
            pair["verifiers"]["A"][metric]["ci"], np.quantile(singles, [0.025, 0.975]), rtol=0, atol=1e-12
        )


def _simulate(rng: np.random.Generator, n: int, rates=(0.8, 0.7), shared: float = 0.7) -> pd.DataFrame:
    """Binary reference; a verifier is right when its uniform is below its rate. With probability
    ``shared`` an item's uniform is common to both (a hard item is hard for both): positive correlation."""
    ref = rng.integers(0, 2, n)
    common = rng.random(n)
    same = rng.random(n) < shared
    right = [np.where(same, common, rng.random(n)) < rate for rate in rates]
    preds = [np.where(r, ref, 1 - ref) for r in right]
    return pd.DataFrame({"item": np.arange(n), "reference": ref, "A": preds[0], "B": preds[1]})


def test_the_paired_interval_covers_the_true_difference_and_is_narrower_than_unpaired():
    truth = {"balanced_accuracy": 0.8 - 0.7, "cohen_kappa": (2 * 0.8 - 1) - (2 * 0.7 - 1)}
    covered = dict.fromkeys(truth, 0)
    ratios = []
    runs, n, n_boot = 400, 200, 500
    for seed in range(runs):
        frame = _simulate(np.random.default_rng(1000 + seed), n)
        pair = stats.compare_verifiers(frame, n_boot=n_boot, seed=seed)["pairs"][0]
        for metric, true in truth.items():
            low, high = pair["difference"][metric]["ci"]
            covered[metric] += low <= true <= high
        if seed < 40:  # the unpaired interval: each verifier resampled on its own (other seeds)
            ref, a, b = (frame[c].to_numpy() for c in ("reference", "A", "B"))
            on_a = classification_distribution(ref, a, 2, n_resamples=n_boot, seed=10_000 + seed)
            on_b = classification_distribution(ref, b, 2, n_resamples=n_boot, seed=20_000 + seed)
            unpaired = stats.percentile_ci(on_a["balanced_accuracy"] - on_b["balanced_accuracy"], 0.95)
            assert unpaired is not None
            low, high = pair["difference"]["balanced_accuracy"]["ci"]
            ratios.append((high - low) / (unpaired[1] - unpaired[0]))
    rates = {metric: count / runs for metric, count in covered.items()}
    print("coverage", rates, "paired / unpaired width", np.mean(ratios))
    for metric, rate in rates.items():
        assert 0.92 <= rate <= 0.975, (metric, rate)
    assert np.mean(ratios) < 0.8 and max(ratios) < 1.0


def test_independent_verifiers_get_intervals_about_as_wide_as_unpaired():
    """The gain comes from the correlation: with none, pairing changes little (so the test above can fail)."""
    frame = _simulate(np.random.default_rng(3), 2000, shared=0.0)
    pair = stats.compare_verifiers(frame, n_boot=1000, seed=1)["pairs"][0]
    ref, a, b = (frame[c].to_numpy() for c in ("reference", "A", "B"))
    on_a = classification_distribution(ref, a, 2, n_resamples=1000, seed=11)
    on_b = classification_distribution(ref, b, 2, n_resamples=1000, seed=12)
    unpaired = stats.percentile_ci(on_a["balanced_accuracy"] - on_b["balanced_accuracy"], 0.95)
    assert unpaired is not None
    low, high = pair["difference"]["balanced_accuracy"]["ci"]
    assert 0.85 < (high - low) / (unpaired[1] - unpaired[0]) < 1.15


def test_the_resample_count_asked_for_is_the_one_drawn():
    """Speed is benchmarks' business (no timing here); the count of resamples is not."""
    frame = _simulate(np.random.default_rng(0), 300)
    result = stats.compare_verifiers(frame, n_boot=1000)
    assert result["pairs"][0]["difference"]["balanced_accuracy"]["n_resamples"] == 1000


# --- undefined and missing ------------------------------------------------------------


def test_missing_predictions_leave_only_that_pair():
    frame = _frame(11, n=200, rates=(0.8, 0.7, 0.75))
    frame.loc[frame.index[:7], "reference"] = None
    frame.loc[frame.index[5:25], "C"] = np.nan
    result = stats.compare_verifiers(frame, n_boot=200)
    pairs = _pairs(result)
    assert pairs[("A", "B")]["n_items"] == 193
    assert pairs[("A", "C")]["n_items"] == pairs[("B", "C")]["n_items"] == 200 - 7 - 18
    assert pairs[("A", "C")]["n_left_out"]["no_reference"] == 7
    assert pairs[("A", "C")]["n_left_out"]["no_prediction"] == {"A": 0, "C": 18}
    alone = _pairs(stats.compare_verifiers(frame.drop(columns="C"), n_boot=200))[("A", "B")]
    for key in ("verifiers", "difference"):
        assert alone[key] == pairs[("A", "B")][key]  # C's gaps do not touch the pair without C
    assert alone["mcnemar"]["p_value"] == pairs[("A", "B")]["mcnemar"]["p_value"]


def test_undefined_cases_are_reported_with_a_reason_and_never_nan():
    frame = pd.DataFrame(
        {
            "item": range(8),
            "reference": ["s", "s", "s", "s", "u", "u", "u", "u"],
            "one_class": [None, None, None, None, "u", "s", "u", "u"],  # its shared items have reference u only
            "sparse": ["s", None, None, None, None, None, None, None],  # shares < 2 items with anyone
            "full": ["s", "u", "s", "s", "u", "u", "s", "u"],
        }
    )
    result = stats.compare_verifiers(frame, n_boot=100)
    json.dumps(result, allow_nan=False)
    pairs = _pairs(result)
    for key in (("one_class", "sparse"), ("sparse", "full")):
        pair = pairs[key]
        assert pair["n_items"] == (0 if key[0] == "one_class" else 1)
        for metric in PAIR_METRICS:
            assert pair["difference"][metric]["value"] is None
            assert "fewer than 2 items" in pair["difference"][metric]["reason"]
            assert pair["verifiers"][key[0]][metric]["value"] is None
        assert pair["mcnemar"]["p_value"] is None and pair["mcnemar"]["significant"] is None
    one = pairs[("one_class", "full")]
    assert one["n_items"] == 4
    assert one["verifiers"]["one_class"]["accuracy"]["value"] == 0.75
    for metric in ("balanced_accuracy", "cohen_kappa"):
        for est in (one["verifiers"]["one_class"][metric], one["verifiers"]["full"][metric], one["difference"][metric]):
            assert est["value"] is None and "single class" in est["reason"] and est["ci"] is None
    assert one["difference"]["accuracy"]["value"] == pytest.approx(0.75 - 0.75)
    assert one["mcnemar"]["p_value"] == 1.0  # b = c = 1
    assert result["correction"] == "Holm (step-down) over 1 pairs"  # the two untested pairs are not counted


def test_no_resamples_gives_no_interval_and_says_so():
    pair = stats.compare_verifiers(_frame(1, n=50), verifiers=["A", "B"], n_boot=0)["pairs"][0]
    est = pair["difference"]["balanced_accuracy"]
    assert est["value"] is not None and est["ci"] is None and "n_boot=0" in est["ci_unavailable"]


def test_bad_input_is_refused():
    frame = _frame(0, n=20, rates=(0.8, 0.7))
    with pytest.raises(ValueError, match="not in the labels"):
        stats.compare_verifiers(frame, labels=["supported", "contradicted"])
    with pytest.raises(ValueError, match="one row per item"):
        stats.compare_verifiers(pd.concat([frame, frame.head(1)]))
    with pytest.raises(ValueError, match="no column"):
        stats.compare_verifiers(frame, verifiers=["A", "Z"])


# --- leaderboard ----------------------------------------------------------------------


def test_leaderboard_means_ranks_and_the_missing_study_note():
    values = {
        ("v1", "AggreFact-CNN"): 0.70,
        ("v1", "ExpertQA"): 0.60,
        ("v1", "LFQA"): 0.80,
        ("v2", "AggreFact-CNN"): 0.75,
        ("v2", "ExpertQA"): 0.55,
        ("v2", "LFQA"): 0.80,  # mean 0.70, tied with v1
        ("v3", "ExpertQA"): 0.50,
        ("v3", "AggreFact-CNN"): 0.90,  # no LFQA: ranked on two studies, mean 0.70 too
        ("v4", "AggreFact-CNN"): 0.72,
        ("v4", "ExpertQA"): 0.71,
        ("v4", "LFQA"): 0.73,
    }
    cells = []
    for i, ((verifier, study), value) in enumerate(values.items()):
        kinds = [value, {"value": value, "ci": [value - 0.05, value + 0.05]}, stats.Estimate(value, None, 100)]
        cells.append({"verifier": verifier, "study": study, "balanced_accuracy": kinds[i % 3], "n_items": 100 + i})
    cells.append({"verifier": "v5", "study": "LFQA", "balanced_accuracy": float("nan"), "n_items": 0})
    board = stats.leaderboard(cells)
    json.dumps(board, allow_nan=False)
    assert board["columns"] == ["AggreFact-CNN", "ExpertQA", "LFQA"]
    rows = {row["verifier"]: row for row in board["rows"]}
    for verifier in ("v1", "v2", "v3", "v4"):
        own = [value for (v, _), value in values.items() if v == verifier]
        assert rows[verifier]["mean"] == pytest.approx(np.mean(own), abs=1e-12)
        assert rows[verifier]["n_studies"] == len(own)
    assert rows["v4"]["rank"] == 1
    assert rows["v1"]["rank"] == rows["v2"]["rank"] == rows["v3"]["rank"] == 2
    assert rows["v5"]["rank"] is None and rows["v5"]["mean"] is None
    assert [row["verifier"] for row in board["rows"]] == ["v4", "v1", "v2", "v3", "v5"]
    assert rows["v3"]["missing_studies"] == ["LFQA"] and rows["v3"]["cells"]["LFQA"] is None
    assert rows["v1"]["missing_studies"] == []
    assert rows["v1"]["cells"]["ExpertQA"]["ci"] == pytest.approx([0.55, 0.65])
    assert "v3 on 2 of 3" in board["note"] and "LFQA" in board["note"] and "v1" not in board["note"]
    assert "Not ranked" in board["note"] and "v5" in board["note"]


def test_leaderboard_without_gaps_has_no_note_and_refuses_duplicates():
    cells = [
        {"verifier": v, "study": s, "balanced_accuracy": value, "n_items": 10}
        for v, s, value in [("a", "s1", 0.6), ("a", "s2", 0.9), ("b", "s1", 0.8), ("b", "s2", 0.6)]
    ]
    board = stats.leaderboard(cells)
    assert board["note"] is None
    assert [(row["verifier"], row["rank"]) for row in board["rows"]] == [("a", 1), ("b", 2)]
    assert board["rows"][0]["n_items"] == 20
    with pytest.raises(ValueError, match="more than one cell"):
        stats.leaderboard([*cells, cells[0]])


def test_pairs_cover_every_combination_in_order():
    frame = _frame(2, n=60)
    result = stats.compare_verifiers(frame, verifiers=["C", "A", "E"], n_boot=0)
    assert [(p["a"], p["b"]) for p in result["pairs"]] == list(combinations(["C", "A", "E"], 2))
    assert result["labels"] == sorted(LABELS)
