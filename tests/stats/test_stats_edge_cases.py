"""Undefined and degenerate cases: None with a reason, never 0 or 1 by accident."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from metaeval import stats


def frame(rows):
    return pd.DataFrame(rows, columns=["item", "annotator", "label"])


ALL_SAME = frame([(i, a, "yes") for i in range(5) for a in ("x", "y", "z")])
PERFECT = frame([(i, a, ["yes", "no"][i % 2]) for i in range(6) for a in ("x", "y", "z")])
ONE_EACH = frame([(i, ["x", "y", "z"][i % 3], "yes" if i % 2 else "no") for i in range(9)])


def test_all_labels_identical_kappas_undefined():
    table = stats.build_table(ALL_SAME, ["yes", "no"])
    for est in (
        stats.fleiss_kappa(table),
        stats.fleiss_kappa_generalized(table),
        stats.cohen_kappa(table, "x", "y"),
        stats.krippendorff_alpha(table),
    ):
        assert est.value is None
        assert est.reason and "one" in est.reason and "category" in est.reason
        assert est.n_items == 5
    # statsmodels gives NaN here; we must not report a number.
    with np.errstate(all="ignore"):
        assert np.isnan(sm_fleiss_kappa(table.counts))
    # Raw agreement and the free-marginal / AC1 coefficients stay defined.
    assert stats.percent_agreement(table).value == 1.0
    assert stats.randolph_kappa(table).value == 1.0
    assert stats.gwet_ac1(table).value == 1.0
    assert stats.mean_cohen_kappa(table).value is None


def test_perfect_agreement_is_one():
    table = stats.build_table(PERFECT, ["yes", "no"])
    assert stats.fleiss_kappa(table).value == pytest.approx(1.0)
    assert stats.krippendorff_alpha(table).value == pytest.approx(1.0)
    assert stats.cohen_kappa(table, "x", "z", weights="quadratic").value == pytest.approx(1.0)
    assert stats.consensus_distribution(table) == {"3-0": 6}
    assert stats.full_agreement(table).value == 1.0


def test_one_rating_per_item_undefined():
    table = stats.build_table(ONE_EACH, ["yes", "no"])
    for est in (
        stats.fleiss_kappa(table),
        stats.fleiss_kappa_generalized(table),
        stats.gwet_ac1(table),
        stats.krippendorff_alpha(table),
        stats.percent_agreement(table),
        stats.majority_agreement(table),
    ):
        assert est.value is None and est.reason
    assert (
        "one rating" in stats.krippendorff_alpha(table).reason
        or "two or more" in stats.krippendorff_alpha(table).reason
    )
    assert stats.pairwise_cohen_kappa(table) == []
    pair = stats.cohen_kappa(table, "x", "y")
    assert pair.value is None and "no item in common" in pair.reason


def test_fewer_than_two_items():
    table = stats.build_table(frame([(0, "x", "yes"), (0, "y", "no")]), ["yes", "no"])
    assert stats.fleiss_kappa(table).value is None
    assert "fewer than 2" in stats.fleiss_kappa(table).reason
    assert stats.cohen_kappa(table, "x", "y").value is None


def test_pair_without_common_items():
    rows = [(0, "x", "yes"), (0, "y", "no"), (1, "x", "no"), (1, "y", "no"), (2, "z", "yes"), (2, "w", "no")]
    table = stats.build_table(frame(rows), ["yes", "no"])
    est = stats.cohen_kappa(table, "x", "z")
    assert est.value is None and est.n_items == 0 and "no item in common" in est.reason
    listed = {tuple(p.extra["annotators"]) for p in stats.pairwise_cohen_kappa(table)}
    assert listed == {("x", "y"), ("z", "w")}


def test_unused_declared_category_weighted_cohen_matches_sklearn_labels():
    # tie and b_slight are never used, yet they set the distance between
    # a_slight and b_strong (3 steps, not 1): weighted kappa must change.
    rng = np.random.default_rng(1)
    used = ["a_strong", "a_slight", "b_strong"]
    a = rng.choice(used, size=40)
    b = np.where(rng.random(40) < 0.6, a, rng.choice(used, size=40))
    scale = list(stats.PREFERENCE_LABELS)
    df = pd.DataFrame(
        {"item": list(range(40)) * 2, "annotator": ["p"] * 40 + ["q"] * 40, "label": np.concatenate([a, b])}
    )
    for w in (None, "linear", "quadratic"):
        full = stats.cohen_kappa(df, "p", "q", categories=scale, weights=w)
        assert full.value == pytest.approx(cohen_kappa_score(a, b, labels=scale, weights=w), abs=1e-12)
        observed_only = stats.cohen_kappa(df, "p", "q", categories=used, weights=w)
        assert observed_only.value == pytest.approx(cohen_kappa_score(a, b, labels=used, weights=w), abs=1e-12)
        if w is None:
            assert full.value == pytest.approx(observed_only.value, abs=1e-12)
        else:
            assert abs(full.value - observed_only.value) > 1e-3
    # Interval alpha also uses the declared positions (0, 1, 4 vs 0, 1, 2); ordinal only the used ranks.
    k_full = stats.krippendorff_alpha(df, categories=scale, level="interval").value
    k_used = stats.krippendorff_alpha(df, categories=used, level="interval").value
    assert abs(k_full - k_used) > 1e-3
    o_full = stats.krippendorff_alpha(df, categories=scale, level="ordinal").value
    assert o_full == pytest.approx(stats.krippendorff_alpha(df, categories=used, level="ordinal").value)


def test_two_two_ties_have_no_strict_majority():
    rows = [(0, a, label) for a, label in zip("wxyz", ["s", "s", "c", "c"], strict=True)]
    rows += [(1, a, label) for a, label in zip("wxyz", ["s", "s", "s", "c"], strict=True)]
    rows += [(2, a, label) for a, label in zip("wxyz", ["s", "c", "i", "i"], strict=True)]
    table = stats.build_table(frame(rows), ["s", "c", "i"])
    assert stats.majority_agreement(table).value == pytest.approx(1 / 3)
    assert stats.consensus_distribution(table) == {"3-1": 1, "2-2": 1, "2-1-1": 1}
    vote = stats.majority_vote(table)
    assert vote.n_no_majority == 2 and vote.n_items == 1
    assert vote.labels().to_dict() == {1: "s"}


def test_undeclared_label_is_an_error_naming_it():
    df = frame([(0, "x", "supported"), (0, "y", "Supported "), (1, "x", "maybe")])
    with pytest.raises(ValueError) as err:
        stats.build_table(df, ["supported", "contradicted", "inconclusive"])
    assert "'Supported '" in str(err.value) and "'maybe'" in str(err.value)


def test_undefined_estimates_serialise_without_nan():
    table = stats.build_table(ALL_SAME, ["yes", "no"])
    summary = stats.agreement_summary(table, ordinal=True, n_resamples=50)
    text = json.dumps(summary, allow_nan=False)
    assert summary["fleiss_kappa"]["value"] is None and summary["fleiss_kappa"]["ci"] is None
    assert summary["fleiss_kappa"]["reason"]
    assert "NaN" not in text


def test_one_label_per_item_has_no_agreement_and_no_interval():
    """One annotator per item (WiCE's human labels): nothing to agree on, every coefficient undefined."""
    table = stats.build_table(ONE_EACH, ["yes", "no"])
    summary = stats.agreement_summary(table, n_resamples=50)
    for name in ("fleiss_kappa", "krippendorff_alpha", "percent_agreement", "gwet_ac1"):
        assert summary[name]["value"] is None and summary[name]["ci"] is None and summary[name]["reason"]
    assert stats.bootstrap_ci(table, [], n_resamples=50) == {}


def test_bootstrap_counts_undefined_resamples():
    # Two of three items all "yes": some resamples contain only "yes" ratings.
    rows = [(i, a, "yes") for i in range(2) for a in "xyz"] + [(2, "x", "no"), (2, "y", "no"), (2, "z", "yes")]
    table = stats.build_table(frame(rows), ["yes", "no"])
    info = stats.bootstrap_ci(table, ["fleiss_kappa"], n_resamples=200, seed=3)["fleiss_kappa"]
    assert 0 < info["n_undefined"] < 200
    assert info["ci"] is not None
