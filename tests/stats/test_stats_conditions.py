"""compare_conditions: against independent references, and on simulated studies with known truth.

References: with one answer per annotator there is no clustering, so the shares
are hand counts, the permutation p-value of a share difference is Fisher's exact
test (scipy), the median difference's p-value is scipy's own permutation test,
and the cluster bootstrap interval is close to the Wald interval (statsmodels).
A small study's exact p-values equal a brute-force enumeration of every split
of its annotators, and the weighted medians behind the time intervals equal
``numpy.median`` of the repeated values.

Simulations (30 annotators per condition, 40 items each, every annotator with
their own probability of following the verifier, so answers are clustered):

* known effect: agreement with the verifier +0.15 in the suggestion condition,
  200 seeds, n_boot=2000. Measured when written: the 95% interval covered the
  true difference in 94% of seeds for agreement with the verifier and 94% for
  agreement with the reference (whose true effect follows from the items), and
  the baseline's own share interval covered 0.6 in 96%; the sign was right in
  200 of 200, the mean estimate 0.148. Asserted: coverage >= 90%, sign always
  right, mean within 0.01 of 0.15.
* no effect, strongly clustered: 600 seeds, n_perm=500. Measured when written:
  rejection at alpha 0.05 of 4.8% (reference), 4.0% (verifier), 5.0% (median
  time); asserted inside the central 99.8% band of Binomial(600, 0.05),
  15 to 48 rejections (2.5% to 8.0%). On the same data a naive two-proportion
  z-test over answers rejected 42.5% (asserted > 20%): why clustering matters.

The two simulations take about 10 s together on an idle machine.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.proportion import confint_proportions_2indep, proportions_ztest

from metaeval.stats import json_ready
from metaeval.stats.conditions import MEASURES, _weighted_medians, compare_conditions

REF, VER, TIME = MEASURES
OTHER = {"s": "u", "u": "s"}


def _one_answer_each(k_a: int, k_b: int, n: int = 50) -> pd.DataFrame:
    """n annotators per condition, one answer each; k of them agree with the reference."""
    rows = []
    for cond, k in (("sugg", k_a), ("none", k_b)):
        for i in range(n):
            label = "s" if i < k else "u"
            rows.append(
                (f"{cond}{i}", f"item{i}", cond, label, "s", "s", 1000.0 + 37 * i + (250 if cond == "sugg" else 0))
            )
    return pd.DataFrame(rows, columns=["annotator", "item", "condition", "label", "reference", "verifier", "active_ms"])


def _simulate(
    seed: int, *, effect: float, spread: float = 0.15, n_annotators: int = 30, n_items: int = 40
) -> tuple[pd.DataFrame, float]:
    """A two-condition study, and the true reference-agreement difference given its items.

    Annotator a follows the verifier with probability 0.6 + spread * U(-1, 1)
    (+ effect under the suggestion), on every item; answers are binary, so an
    answer agrees with the reference exactly when it follows a correct verifier
    or departs from a wrong one, and the reference effect is effect * (2f - 1)
    for the share f of items the verifier gets right. Times carry a per-annotator
    speed.
    """
    rng = np.random.default_rng(seed)
    reference = rng.choice(["s", "u"], size=n_items)
    correct = rng.random(n_items) < 0.7
    verifier = np.where(correct, reference, np.where(reference == "s", "u", "s"))
    frames = []
    for cond, shift in (("none", 0.0), ("sugg", effect)):
        follow = 0.6 + shift + rng.uniform(-spread, spread, n_annotators)
        agrees = rng.random((n_annotators, n_items)) < follow[:, None]
        labels = np.where(agrees, verifier, np.where(verifier == "s", "u", "s"))
        times = rng.lognormal(0, 0.5, n_annotators)[:, None] * rng.lognormal(9, 0.3, (n_annotators, n_items))
        frames.append(
            pd.DataFrame(
                {
                    "annotator": np.repeat([f"{cond}{a}" for a in range(n_annotators)], n_items),
                    "item": np.tile(np.arange(n_items), n_annotators),
                    "condition": cond,
                    "label": labels.ravel(),
                    "reference": np.tile(reference, n_annotators),
                    "verifier": np.tile(verifier, n_annotators),
                    "active_ms": times.ravel(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True), effect * (2 * correct.mean() - 1)


# --- independent references -------------------------------------------------------------


def test_one_answer_per_annotator_matches_hand_counts_and_fisher():
    rows = _one_answer_each(32, 21)
    result = compare_conditions(rows, baseline="none", n_perm=20_000, seed=3)
    sugg, none = result["conditions"]["sugg"], result["conditions"]["none"]
    assert sugg[REF].value == pytest.approx(32 / 50, abs=1e-12)
    assert none[REF].value == pytest.approx(21 / 50, abs=1e-12)
    diff = result["differences"]["sugg"][REF]
    assert diff.value == pytest.approx(32 / 50 - 21 / 50, abs=1e-12)
    # One answer per annotator: permuting condition labels among annotators with fixed group
    # sizes is Fisher's hypergeometric null, and with equal groups its |difference| tails are
    # Fisher's two-sided ones; only Monte Carlo error (SE ~0.0015 at 20,000) separates them.
    fisher = sps.fisher_exact([[32, 18], [21, 29]]).pvalue
    assert fisher == pytest.approx(0.0446, abs=1e-4)
    assert diff.extra["p_value"] == pytest.approx(fisher, abs=0.01)
    # ... and the annotator bootstrap is an ordinary bootstrap, close to the Wald interval.
    wald = confint_proportions_2indep(32, 50, 21, 50, method="wald")
    assert diff.ci == pytest.approx(wald, abs=0.02)
    # The verifier equals the reference here, so the two measures must agree.
    assert result["differences"]["sugg"][VER].value == diff.value


def test_one_answer_per_annotator_median_time_matches_scipy_permutation_test():
    rows = _one_answer_each(32, 21)
    result = compare_conditions(rows, baseline="none", n_perm=20_000, seed=4)
    a = rows.loc[rows["condition"] == "sugg", "active_ms"].to_numpy()
    b = rows.loc[rows["condition"] == "none", "active_ms"].to_numpy()
    assert result["conditions"]["sugg"][TIME].value == np.median(a)
    diff = result["differences"]["sugg"][TIME]
    assert diff.value == pytest.approx(np.median(a) - np.median(b), abs=1e-9)
    reference = sps.permutation_test(
        (a, b),
        lambda x, y, axis: np.median(x, axis=axis) - np.median(y, axis=axis),
        permutation_type="independent",
        n_resamples=20_000,
        vectorized=True,
        alternative="two-sided",
        rng=np.random.default_rng(0),
    ).pvalue
    assert 0.01 < reference < 0.5  # a p-value the comparison can tell apart from 0 and 1
    assert diff.extra["p_value"] == pytest.approx(reference, abs=0.015)


def _exact_p(times: dict[str, list[float]], first: list[str], statistic) -> float:
    """Two-sided permutation p-value by brute force over every split of the annotators."""
    names = list(times)

    def split(chosen) -> float:
        inside = [v for n in chosen for v in times[n]]
        outside = [v for n in names if n not in chosen for v in times[n]]
        return statistic(inside) - statistic(outside)

    observed = abs(split(first))
    splits = [abs(split(chosen)) for chosen in itertools.combinations(names, len(first))]
    return sum(d >= observed - 1e-9 for d in splits) / len(splits)


def test_small_study_is_tested_exactly_over_all_assignments():
    # 3 annotators per condition, 4 answers each: C(6, 3) = 20 assignments, all enumerated.
    rows = pd.DataFrame(
        [
            (
                f"{c}{a}",
                i,
                c,
                "s" if (c == "a" or a == 0) and i < 3 else "u",
                "s",
                None,
                100 * a + 7 * i + (150 if c == "a" else 0),
            )
            for c in "ab"
            for a in range(3)
            for i in range(4)
        ],
        columns=["annotator", "item", "condition", "label", "reference", "verifier", "active_ms"],
    )
    result = compare_conditions(rows, baseline="b")
    per = dict(list(rows.groupby("annotator", sort=True)))
    agree = {name: list((g["label"] == g["reference"]).astype(float)) for name, g in per.items()}
    times = {name: list(g["active_ms"].astype(float)) for name, g in per.items()}
    first = ["a0", "a1", "a2"]
    diff = result["differences"]["a"][REF]
    assert diff.value == pytest.approx(9 / 12 - 3 / 12, abs=1e-12)
    assert diff.extra["n_permutations"] == 20 and diff.extra["permutation_seed"] is None
    assert "exact" in diff.extra["test"]
    expected = _exact_p(agree, first, np.mean)
    assert 0.05 < expected < 1  # an interesting split: not every assignment is as extreme
    assert diff.extra["p_value"] == pytest.approx(expected, abs=1e-12)
    median = result["differences"]["a"][TIME]
    expected = _exact_p(times, first, np.median)
    assert 0.05 < expected < 1
    assert median.extra["p_value"] == pytest.approx(expected, abs=1e-12)


def test_weighted_medians_equal_numpy_on_repeated_values():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n_owners, m = int(rng.integers(1, 8)), int(rng.integers(1, 80))
        owner = rng.integers(0, n_owners, m)
        values = np.sort(rng.integers(0, 12, m).astype(float))  # ties included
        weights = rng.integers(0, 4, size=(15, n_owners))
        weights[0] = 0
        got = _weighted_medians(values, owner, weights)
        assert np.isnan(got[0])
        for r in range(1, 15):
            repeated = np.repeat(values, weights[r, owner])
            expected = np.median(repeated) if len(repeated) else np.nan
            assert got[r] == expected or (np.isnan(expected) and np.isnan(got[r]))


# --- simulations ------------------------------------------------------------------------


def test_known_effect_is_found_and_covered():
    n_seeds = 200
    covered = {VER: 0, REF: 0}
    base_covered = 0
    estimates = []
    for seed in range(n_seeds):
        rows, ref_effect = _simulate(seed, effect=0.15)
        result = compare_conditions(rows, baseline="none", n_perm=0, seed=seed)
        diff = result["differences"]["sugg"]
        estimates.append(diff[VER].value)
        for measure, truth in ((VER, 0.15), (REF, ref_effect)):
            lo, hi = diff[measure].ci
            covered[measure] += lo <= truth <= hi
        lo, hi = result["conditions"]["none"][VER].ci
        base_covered += lo <= 0.6 <= hi
    rates = {m: c / n_seeds for m, c in covered.items()}
    assert all(e > 0 for e in estimates), f"wrong sign in {sum(e <= 0 for e in estimates)} of {n_seeds} seeds"
    assert np.mean(estimates) == pytest.approx(0.15, abs=0.01)
    assert min(rates.values()) >= 0.90, f"95% interval coverage over {n_seeds} seeds: {rates}"
    assert base_covered / n_seeds >= 0.90, f"baseline share coverage {base_covered / n_seeds} over {n_seeds} seeds"


def test_no_effect_rejects_at_the_nominal_rate_and_naive_test_does_not():
    n_seeds, alpha = 600, 0.05
    band = sps.binom.interval(0.998, n_seeds, alpha)  # (15, 48) of 600
    rejected = dict.fromkeys(MEASURES, 0)
    naive = 0
    for seed in range(n_seeds):
        rows, _ = _simulate(10_000 + seed, effect=0.0, spread=0.3)
        result = compare_conditions(rows, baseline="none", n_boot=0, n_perm=500, seed=seed)
        for measure in MEASURES:
            rejected[measure] += result["differences"]["sugg"][measure].extra["p_value"] < alpha
        shares = [result["conditions"][c][VER] for c in ("sugg", "none")]
        naive += proportions_ztest([s.extra["k"] for s in shares], [s.extra["n"] for s in shares])[1] < alpha
    rates = {m: r / n_seeds for m, r in rejected.items()}
    for measure, count in rejected.items():
        assert band[0] <= count <= band[1], (
            f"{measure}: rejected {count}/{n_seeds} = {count / n_seeds:.3f} at alpha {alpha}; "
            f"band {band[0] / n_seeds:.4f}-{band[1] / n_seeds:.4f}; all rates {rates}"
        )
    assert naive / n_seeds > 0.20, f"naive answer-level z-test rejected {naive}/{n_seeds}; expected over-rejection"


# --- undefined cases, counts and the shape ----------------------------------------------


def test_condition_without_reference_is_undefined_with_a_reason():
    rows, _ = _simulate(1, effect=0.1, n_annotators=5, n_items=6)
    rows["reference"] = rows["reference"].where(rows["condition"] == "none")
    result = compare_conditions(rows, baseline="none", n_boot=200, n_perm=200)
    share = result["conditions"]["sugg"][REF]
    assert share.value is None and "'sugg'" in share.reason and "reference" in share.reason
    assert share.extra["k"] == 0 and share.extra["n"] == 0
    diff = result["differences"]["sugg"][REF]
    assert diff.value is None and diff.reason == share.reason and diff.extra["p_value"] is None
    assert diff.ci is None
    # the other measures stay defined
    assert result["differences"]["sugg"][VER].value is not None
    assert result["conditions"]["none"][REF].value is not None
    json.dumps(json_ready(result), allow_nan=False)

    no_column = compare_conditions(rows.drop(columns=["verifier", "active_ms"]), baseline="none", n_boot=10, n_perm=10)
    for measure, column in ((VER, "verifier"), (TIME, "active_ms")):
        est = no_column["conditions"]["none"][measure]
        assert est.value is None and f"'{column}'" in est.reason


def test_single_annotator_has_no_interval_but_a_point_and_an_exact_test():
    rows, _ = _simulate(2, effect=0.1, n_annotators=4, n_items=10)
    rows = rows.loc[(rows["condition"] == "none") | (rows["annotator"] == "sugg0")]
    result = compare_conditions(rows, baseline="none", n_boot=300, n_perm=300)
    lone = result["conditions"]["sugg"]
    assert lone["n_annotators"] == 1 and lone["n_answers"] == 10
    for measure in MEASURES:
        est = lone[measure]
        assert est.value is not None and est.ci is None
        assert "fewer than 2 annotators" in est.extra["ci_unavailable"]
        diff = result["differences"]["sugg"][measure]
        assert diff.value is not None and diff.ci is None and "'sugg'" in diff.extra["ci_unavailable"]
        assert diff.extra["n_permutations"] == 5  # C(5, 1): exact
        assert 0.2 <= diff.extra["p_value"] <= 1.0
    assert result["conditions"]["none"][REF].ci is not None


def test_unknown_baseline_and_crossed_annotators_are_refused():
    rows, _ = _simulate(3, effect=0.0, n_annotators=3, n_items=4)
    with pytest.raises(ValueError, match="'control'"):
        compare_conditions(rows, baseline="control")
    crossed = pd.concat([rows, rows.loc[rows["annotator"] == "none0"].assign(condition="sugg")])
    with pytest.raises(ValueError, match="between-subject"):
        compare_conditions(crossed, baseline="none")
    with pytest.raises(ValueError, match="label"):
        compare_conditions(rows.drop(columns="label"), baseline="none")


def test_counts_beside_fractions_and_rows_left_out():
    rows, _ = _simulate(4, effect=0.1, n_annotators=6, n_items=10)
    rows.loc[rows.index[:7], "verifier"] = None  # 7 answers of "none" lack a verifier label
    rows.loc[rows.index[7:10], "active_ms"] = np.nan
    extra = pd.DataFrame(
        [("x", 1, None, "s", "s", "s", 5.0), ("y", 1, "none", None, "s", "s", 5.0)], columns=rows.columns
    )
    result = compare_conditions(pd.concat([rows, extra], ignore_index=True), baseline="none", n_boot=50, n_perm=50)
    assert result["n_rows_left_out"] == {"no_condition": 1, "no_annotator": 0, "no_label": 1}
    none = rows.loc[rows["condition"] == "none"]
    cond = result["conditions"]["none"]
    assert cond["n_annotators"] == 6 and cond["n_answers"] == 60
    has = none["verifier"].notna()
    k = int((none.loc[has, "label"] == none.loc[has, "verifier"]).sum())
    assert (cond[VER].extra["k"], cond[VER].extra["n"], cond[VER].n_items) == (k, 53, 53)
    assert cond[VER].value == pytest.approx(k / 53)
    k_ref = int((none["label"] == none["reference"]).sum())
    assert (cond[REF].extra["k"], cond[REF].extra["n"]) == (k_ref, 60)
    assert cond[TIME].extra["n"] == 57
    assert cond[TIME].value == np.median(none["active_ms"].dropna())
    diff = result["differences"]["sugg"][VER]
    sugg = result["conditions"]["sugg"][VER]
    assert diff.extra["k"] == {"sugg": sugg.extra["k"], "none": k}
    assert diff.extra["n"] == {"sugg": 60, "none": 53}
    assert diff.extra["n_annotators"] == {"sugg": 6, "none": 6}


def test_seeded_and_unchanged_by_a_new_condition():
    rows, _ = _simulate(5, effect=0.1, n_annotators=8, n_items=10)
    first = compare_conditions(rows, baseline="none", n_boot=300, n_perm=300, seed=7)
    again = compare_conditions(rows, baseline="none", n_boot=300, n_perm=300, seed=7)
    assert json_ready(first) == json_ready(again)
    third = rows.loc[rows["condition"] == "sugg"].assign(
        condition="third", annotator=lambda d: "t" + d["annotator"].astype(str)
    )
    more = compare_conditions(pd.concat([rows, third]), baseline="none", n_boot=300, n_perm=300, seed=7)
    assert list(more["differences"]) == ["sugg", "third"]
    for measure in MEASURES:
        assert more["conditions"]["none"][measure].ci == first["conditions"]["none"][measure].ci
        assert more["differences"]["sugg"][measure].ci == first["differences"]["sugg"][measure].ci
    other = compare_conditions(rows, baseline="none", n_boot=300, n_perm=300, seed=8)
    assert other["conditions"]["none"][REF].ci != first["conditions"]["none"][REF].ci
