"""Preference counts, sign test and position bias, checked against statsmodels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.descriptivestats import sign_test as sm_sign_test
from statsmodels.stats.proportion import binom_test, proportion_confint

from metaeval import stats

LABELS = ["a_strong"] * 7 + ["a_slight"] * 5 + ["tie"] * 4 + ["b_slight"] * 2 + ["b_strong"] * 1


def test_counts_split_strong_slight():
    out = stats.preference_counts(LABELS, systems=("veriscore", "safe"))
    assert out["n"] == 19 and out["ties"] == 4
    v, s = out["systems"]["veriscore"], out["systems"]["safe"]
    assert (v["wins"], v["wins_strong"], v["wins_slight"]) == (12, 7, 5)
    assert (v["losses"], v["losses_strong"], v["losses_slight"]) == (3, 1, 2)
    assert (s["wins"], s["wins_strong"], s["wins_slight"], s["losses"]) == (3, 1, 2, 12)


def test_counts_by_domain():
    domains = ["bio"] * 10 + ["news"] * 9
    out = stats.preference_counts_by(LABELS, domains)
    assert set(out) == {"bio", "news"}
    assert out["bio"]["systems"]["a"]["wins"] == 10
    assert out["news"]["n"] == 9 and out["news"]["ties"] == 4


def test_sign_test_matches_statsmodels():
    est = stats.sign_test(LABELS, systems=("veriscore", "safe"))
    # statsmodels' sign test on signed differences (ties = 0 are dropped there too)
    signed = np.array([{"a_strong": 2, "a_slight": 1, "tie": 0, "b_slight": -1, "b_strong": -2}[x] for x in LABELS])
    _, p_sm = sm_sign_test(signed, mu0=0)
    assert est.extra["p_value"] == pytest.approx(p_sm, abs=1e-12)
    assert est.value == pytest.approx(12 / 15)
    assert est.n_items == 15 and est.extra["ties"] == 4
    assert est.extra["preferred"] == "veriscore"
    lo, hi = proportion_confint(12, 15, alpha=0.05, method="beta")  # Clopper-Pearson
    assert est.ci == pytest.approx((lo, hi), abs=1e-9)


def test_sign_test_textbook_value():
    # 9 of 10 decisive judgements for A: two-sided exact p = 2 * 11 / 1024.
    est = stats.sign_test(["a_slight"] * 9 + ["b_strong"] + ["tie"] * 3)
    assert est.extra["p_value"] == pytest.approx(22 / 1024, abs=1e-15)


def test_sign_test_all_ties_undefined():
    est = stats.sign_test(["tie"] * 5)
    assert est.value is None and est.reason and est.extra["ties"] == 5


def test_position_bias_binomial():
    labels = np.array(LABELS)
    shown_left = np.array(["a", "b"] * 9 + ["a"])
    won = stats.winners(labels)
    est = stats.position_bias(shown_left, won)
    decisive = won != None  # noqa: E711 (object array)
    left_wins = int((shown_left[decisive] == won[decisive]).sum())
    n = int(decisive.sum())
    assert est.extra["left_wins"] == left_wins and est.n_items == n == 15
    assert est.extra["ties"] == 4
    assert est.extra["p_value"] == pytest.approx(binom_test(left_wins, n, 0.5), abs=1e-12)
    assert est.value == pytest.approx(left_wins / n)


def test_position_bias_strong_left_preference_detected():
    shown_left = ["a", "b"] * 30
    won = ["a", "b"] * 25 + ["b", "a"] * 5  # left wins 50 of 60
    est = stats.position_bias(shown_left, won)
    assert est.extra["left_wins"] == 50 and est.extra["p_value"] < 1e-6


def test_unknown_preference_label_rejected():
    with pytest.raises(ValueError, match="'better'"):
        stats.preference_counts(["a_strong", "better"])


def test_three_way_collapse_agreement():
    rows = [
        (i, a, label)
        for i, labs in enumerate([("a_strong", "a_slight"), ("tie", "tie"), ("b_slight", "a_slight")])
        for a, label in zip("xy", labs, strict=True)
    ]
    df = pd.DataFrame(rows, columns=["item", "annotator", "label"])
    table = stats.build_table(df, stats.PREFERENCE_LABELS)
    three = table.collapse(stats.PREFERENCE_3WAY)
    assert three.categories == ("a", "tie", "b")
    assert stats.full_agreement(three).value == pytest.approx(2 / 3)
    assert stats.full_agreement(table).value == pytest.approx(1 / 3)
