"""Real studies from tests/data, each figure checked against statsmodels,
krippendorff or scikit-learn run directly on the same data in the test."""

from __future__ import annotations

import itertools
import json

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from metaeval import stats


@pytest.fixture(scope="module")
def xsum_table(xsum):
    return stats.build_table(xsum, ["yes", "no"], item=["bbcid", "system"], annotator="worker_id")


@pytest.fixture(scope="module")
def xsum_wide(xsum):
    """items x slots, NaN where missing, rows in the table's item order."""
    wide = xsum.pivot(index=["bbcid", "system"], columns="worker_id", values="label")
    return wide


def test_xsum_counts(xsum_table, xsum):
    assert xsum_table.n_missing_dropped == 33  # README: 33 NULL
    assert xsum_table.n_ratings == 582 + 4982  # README: yes 582 / no 4982
    assert xsum_table.n_items == 1858  # 1869 items, 11 of which have only NULLs
    assert stats.label_distribution(xsum_table)["counts"] == {"yes": 582, "no": 4982}


def test_xsum_fleiss_equals_statsmodels(xsum_table, xsum_wide):
    complete = xsum_wide.dropna()
    counts, _ = aggregate_raters(complete.to_numpy())
    expected = sm_fleiss_kappa(counts)
    est = stats.fleiss_kappa(xsum_table)
    assert est.value == pytest.approx(expected, abs=1e-12)
    assert round(est.value, 3) == 0.774  # README quick check
    assert est.n_items == len(complete) == 1848
    assert est.extra["n_items_left_out"] == 10
    assert round(est.extra["p_observed"], 3) == 0.958  # README: observed agreement


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_xsum_alpha_equals_krippendorff_with_missing(xsum_table, xsum_wide, level):
    numeric = xsum_wide.replace({"yes": 0.0, "no": 1.0}).astype(float)  # same order as declared categories
    expected = krippendorff.alpha(reliability_data=numeric.to_numpy().T, level_of_measurement=level)
    est = stats.krippendorff_alpha(xsum_table, level=level)
    assert est.value == pytest.approx(expected, abs=1e-12)
    # Items with a single remaining rating are not pairable.
    assert est.n_items == int((numeric.notna().sum(axis=1) >= 2).sum())


def test_xsum_generalized_fleiss_matches_direct_gwet_formula(xsum_table, xsum_wide):
    # Gwet (2014) eq. for missing ratings, written out independently with pandas.
    dummies = {c: (xsum_wide == c).sum(axis=1) for c in ("yes", "no")}
    r = xsum_wide.notna().sum(axis=1)
    rated = r >= 1
    paired = r >= 2
    agree = sum(d * (d - 1) for d in dummies.values())
    pa = (agree[paired] / (r[paired] * (r[paired] - 1))).mean()
    pi = {c: (d[rated] / r[rated]).mean() for c, d in dummies.items()}
    pe = sum(p**2 for p in pi.values())
    assert stats.fleiss_kappa_generalized(xsum_table).value == pytest.approx((pa - pe) / (1 - pe), abs=1e-12)
    pe1 = sum(p * (1 - p) for p in pi.values())  # / (K - 1) with K = 2
    assert stats.gwet_ac1(xsum_table).value == pytest.approx((pa - pe1) / (1 - pe1), abs=1e-12)


def test_xsum_consensus_and_shares(xsum_table, xsum_wide):
    complete = xsum_wide.dropna()
    n_yes = (complete == "yes").sum(axis=1)
    consensus = stats.consensus_distribution(xsum_table)
    assert consensus["3-0"] == int(((n_yes == 0) | (n_yes == 3)).sum())
    assert consensus["2-1"] == int(((n_yes == 1) | (n_yes == 2)).sum())
    assert sum(consensus.values()) == 1858
    two = xsum_wide[xsum_wide.notna().sum(axis=1) == 2]
    assert consensus["2-0"] + consensus.get("1-1", 0) == len(two)
    full = stats.full_agreement(xsum_table)
    assert full.value == pytest.approx((consensus["3-0"] + consensus["2-0"]) / 1858)


def test_xsum_summary_is_json_without_nan(xsum_table):
    summary = stats.agreement_summary(xsum_table, n_resamples=200, collapse={"yes": "yes", "no": "no"})
    text = json.dumps(summary, allow_nan=False)
    assert '"fleiss_kappa"' in text
    fk = summary["fleiss_kappa"]
    assert fk["ci"][0] <= fk["value"] <= fk["ci"][1]
    assert summary["binary"]["fleiss_kappa"]["value"] == fk["value"]


@pytest.mark.parametrize("dataset, readme_fleiss", [("pubmed", 0.76), ("arxiv", 0.54)])
def test_longsciverify_against_libraries(longsci, longsci_long, dataset, readme_fleiss):
    wide = longsci[dataset]
    table = stats.build_table(longsci_long(wide), [0, 1])
    # Fleiss on complete items = statsmodels
    complete = wide.dropna().astype(int)
    expected = sm_fleiss_kappa(aggregate_raters(complete.to_numpy())[0])
    fk = stats.fleiss_kappa(table)
    assert fk.value == pytest.approx(expected, abs=1e-12)
    assert round(fk.value, 2) == readme_fleiss
    assert fk.n_items == len(complete)
    # Krippendorff with missing = krippendorff run directly (raters x items)
    alpha = krippendorff.alpha(reliability_data=wide.to_numpy(dtype=float).T, level_of_measurement="nominal")
    assert stats.krippendorff_alpha(table).value == pytest.approx(alpha, abs=1e-12)
    # Pairwise Cohen = scikit-learn on the items both reviewers labelled
    pairs = {tuple(p.extra["annotators"]): p for p in stats.pairwise_cohen_kappa(table)}
    assert len(pairs) == 3
    values = []
    for a, b in itertools.combinations(wide.columns, 2):
        both = wide[[a, b]].dropna().astype(int)
        ref = cohen_kappa_score(both[a], both[b], labels=[0, 1])
        est = pairs[(a, b)]
        assert est.value == pytest.approx(ref, abs=1e-12)
        assert est.n_items == est.extra["n"] == len(both)
        assert stats.cohen_kappa(table, a, b).value == pytest.approx(ref, abs=1e-12)
        values.append(ref)
    assert stats.mean_cohen_kappa(table).value == pytest.approx(np.mean(values), abs=1e-12)


def test_longsciverify_arxiv_missing_ratings_are_absent_rows(longsci, longsci_long):
    wide = longsci["arxiv"]
    table = stats.build_table(longsci_long(wide), [0, 1])
    assert table.n_ratings == int(wide.notna().sum().sum()) == 3 * 135 - 6
    # The two NaN cells are the same sentences for every reviewer: those items have no rating at all.
    assert table.n_items == int(wide.notna().any(axis=1).sum()) == 133
