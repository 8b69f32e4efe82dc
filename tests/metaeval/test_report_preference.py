"""Preference analysis of a study built through the services, checked against statsmodels and scipy.

The judgements are generated here with a seeded RNG; every expected number
is computed in the test from those records, not from Claimlab.
"""

from __future__ import annotations

import csv
import io
from collections import Counter

import krippendorff
import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.descriptivestats import sign_test
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from metaeval.reporting.csv_format import report_csv
from metaeval.reporting.html_format import report_html
from tests.support.preference_study import SYSTEMS


def test_wins_losses_ties_split_strong_and_slight(report, frame):
    counts = Counter(frame["label"])
    pref = report["preference"]
    veri, safe = pref["counts"]["systems"]["veriscore"], pref["counts"]["systems"]["safe"]
    assert (veri["wins_strong"], veri["wins_slight"]) == (counts["a_strong"], counts["a_slight"])
    assert (veri["losses_strong"], veri["losses_slight"]) == (counts["b_strong"], counts["b_slight"])
    assert safe["wins"] == veri["losses"] and veri["ties"] == safe["ties"] == counts["tie"]
    assert pref["n_judgements"] == 180
    for domain, rows in frame.groupby("domain"):
        by = pref["by_domain"][domain]["systems"]["veriscore"]
        assert by["wins_strong"] == (rows["label"] == "a_strong").sum()
        assert by["losses"] == rows["label"].isin(["b_slight", "b_strong"]).sum()


def test_sign_test_matches_statsmodels_and_scipy(report, frame):
    signed = frame["code"].map({0: 1, 1: 1, 2: 0, 3: -1, 4: -1}).to_numpy()
    _, p_statsmodels = sign_test(signed, mu0=0)
    wins_a, wins_b = int((signed > 0).sum()), int((signed < 0).sum())
    test = report["preference"]["sign_test"]
    assert test["p_value"] == pytest.approx(p_statsmodels, rel=1e-9)
    assert test["p_value"] == pytest.approx(binomtest(wins_a, wins_a + wins_b).pvalue, rel=1e-9)
    assert test["value"] == pytest.approx(wins_a / (wins_a + wins_b))
    assert test["n_items"] == wins_a + wins_b and test["ties"] == int((signed == 0).sum())
    exact = binomtest(wins_a, wins_a + wins_b).proportion_ci(method="exact")
    assert test["ci"] == pytest.approx([exact.low, exact.high])


def test_item_level_sign_test_uses_each_items_majority(report, frame):
    direction = frame["code"].map({0: "a", 1: "a", 2: "tie", 3: "b", 4: "b"})
    majorities = []
    for _item, group in direction.groupby(frame["item"]):
        top = group.value_counts()
        if top.iloc[0] * 2 > len(group):
            majorities.append(top.index[0])
    a, b = majorities.count("a"), majorities.count("b")
    test = report["preference"]["sign_test_items"]
    assert test["p_value"] == pytest.approx(binomtest(a, a + b).pvalue, rel=1e-9)
    assert test["n_items_without_majority"] == frame["item"].nunique() - len(majorities)
    assert test["n_items"] == a + b and test["ties"] == majorities.count("tie")
    assert test["n_items_judged"] == 60


def test_position_bias_from_the_stored_display_order(report, frame):
    decisive = frame.loc[frame["preferred"] != "tie"]
    left_wins = int((decisive["preferred"] == decisive["left_system"]).sum())
    bias = report["preference"]["position_bias"]
    assert bias["left_wins"] == left_wins and bias["n_items"] == len(decisive)
    assert bias["p_value"] == pytest.approx(binomtest(left_wins, len(decisive)).pvalue, rel=1e-9)


def test_agreement_on_the_five_point_scale(report, frame):
    wide = frame.pivot(index="item", columns="annotator", values="code")
    agreement = report["agreement"]
    ordinal = krippendorff.alpha(
        reliability_data=wide.T.to_numpy(dtype=float), level_of_measurement="ordinal", value_domain=[0, 1, 2, 3, 4]
    )
    nominal = krippendorff.alpha(
        reliability_data=wide.T.to_numpy(dtype=float), level_of_measurement="nominal", value_domain=[0, 1, 2, 3, 4]
    )
    assert agreement["krippendorff_alpha_ordinal"]["value"] == pytest.approx(ordinal, abs=1e-12)
    assert agreement["krippendorff_alpha"]["value"] == pytest.approx(nominal, abs=1e-12)
    pairs = {tuple(p["annotators"]): p["value"] for p in agreement["pairwise_cohen_kappa_linear"]}
    for (a, b), value in pairs.items():
        assert value == pytest.approx(cohen_kappa_score(wide[a], wide[b], labels=range(5), weights="linear"))
    quadratic = {tuple(p["annotators"]): p["value"] for p in agreement["pairwise_cohen_kappa_quadratic"]}
    assert quadratic[("w1", "w2")] == pytest.approx(
        cohen_kappa_score(wide["w1"], wide["w2"], labels=range(5), weights="quadratic")
    )
    table, _ = aggregate_raters(wide.to_numpy(), n_cat=5)
    assert agreement["fleiss_kappa"]["value"] == pytest.approx(fleiss_kappa(table, method="fleiss"))


def test_agreement_on_the_three_way_and_binary_collapses(report, frame):
    three = frame["code"].map({0: 0, 1: 0, 2: 1, 3: 2, 4: 2})
    wide3 = three.groupby([frame["item"], frame["annotator"]]).first().unstack()
    table, _ = aggregate_raters(wide3.to_numpy(), n_cat=3)
    assert report["preference"]["three_way"]["fleiss_kappa"]["value"] == pytest.approx(
        fleiss_kappa(table, method="fleiss")
    )
    # Binary: preferred system, ties excluded (items then have fewer ratings: alpha handles that).
    binary = frame["code"].map({0: 0, 1: 0, 2: np.nan, 3: 1, 4: 1})
    wide2 = binary.groupby([frame["item"], frame["annotator"]]).first().unstack()
    expected = krippendorff.alpha(reliability_data=wide2.T.to_numpy(dtype=float), level_of_measurement="nominal")
    assert report["binary"]["categories"] == list(SYSTEMS)
    assert report["binary"]["krippendorff_alpha"]["value"] == pytest.approx(expected, abs=1e-12)


def test_page_shows_the_preference_section_and_chart(client, researcher, study):
    client.force_login(researcher)
    html = client.get("/studies/pref-report/report/").content.decode()
    for text in (
        "Preferences",
        "Sign tests",
        "List 1",
        "Agreement on direction",
        "Domain biography",
        "/studies/pref-report/report/charts/preference.svg",
    ):
        assert text in html, text
    assert "Factuality scores" not in html
    chart = client.get("/studies/pref-report/report/charts/preference.svg")
    assert chart.status_code == 200 and chart["Content-Type"] == "image/svg+xml"
    assert b"style=" not in chart.content


def test_the_synthetic_study_is_not_degenerate(report):
    """Guards the checks above: a clear winner, a real position effect, agreement neither 0 nor 1."""
    pref = report["preference"]
    assert pref["sign_test"]["p_value"] < 0.05 and pref["sign_test"]["preferred"] == "veriscore"
    assert 0.5 < pref["position_bias"]["value"] < 0.8
    assert 0 < report["agreement"]["krippendorff_alpha_ordinal"]["value"] < 0.9


def test_csv_and_html_carry_the_preference_numbers(study, report):
    rows = list(csv.DictReader(io.StringIO(report_csv(report))))
    wins = next(
        r
        for r in rows
        if r["section"] == "preference" and r["scope"] == "all" and r["statistic"] == "wins_strong[veriscore]"
    )
    assert int(wins["value"]) == report["preference"]["counts"]["systems"]["veriscore"]["wins_strong"]
    p_value = next(r for r in rows if r["statistic"] == "position_bias_p_value")
    assert float(p_value["value"]) == pytest.approx(report["preference"]["position_bias"]["p_value"])
    assert any(r["section"] == "preference_three_way" for r in rows)
    assert any(r["scope"] == "domain:science" for r in rows)
    html = report_html(study, report)
    assert (
        html.count("data:image/svg+xml;base64,") == 4 and "Sign tests" in html
    )  # labels, preference, agreement, annotators
