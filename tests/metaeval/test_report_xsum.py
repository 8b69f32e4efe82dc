"""The report on the demo's real XSum labels, against statsmodels, krippendorff and scikit-learn.

The reference numbers are computed here from the fixture file itself, not
through Claimlab's selectors or statistics, so the test fails if either the
database read or the statistics drift.
"""

from __future__ import annotations

import itertools
import json

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import accuracy_score, cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from metaeval.reporting import ReportOptions, build_report

CATS = ["factual", "not_factual"]


@pytest.fixture
def report(xsum_study):
    return build_report(xsum_study, ReportOptions(by_domain=True, binary=True))


@pytest.fixture(scope="module")
def wide(xsum_fixture_labels):
    """items x slots label codes (NaN = no label), straight from the fixture file."""
    codes = xsum_fixture_labels.assign(code=xsum_fixture_labels["label"].map({c: i for i, c in enumerate(CATS)}))
    return codes.pivot(index="item", columns="annotator", values="code")


def test_headline_counts(report, xsum_fixture_labels):
    assert report["study"] == "xsum-factuality" and report["kind"] == "verification"
    assert report["n_items"] == 1869
    assert report["n_annotations"] == len(xsum_fixture_labels) == 5564
    assert report["n_items_annotated"] == xsum_fixture_labels["item"].nunique() == 1858
    assert report["n_annotators"] == 3 and report["n_items_gold"] == 0


def test_fleiss_kappa_is_0774_on_1848_complete_items_as_statsmodels(report, wide):
    complete = wide.dropna().astype(int).to_numpy()
    table, _ = aggregate_raters(complete, n_cat=2)
    expected = fleiss_kappa(table, method="fleiss")
    fk = report["agreement"]["fleiss_kappa"]
    assert round(fk["value"], 3) == 0.774
    assert fk["value"] == pytest.approx(expected, abs=1e-12)
    assert fk["n_items"] == len(complete) == 1848
    assert fk["n_items_left_out"] == 10
    low, high = fk["ci"]
    assert low < fk["value"] < high and high - low < 0.2


def test_alpha_equals_krippendorff_with_the_incomplete_items(report, wide):
    expected = krippendorff.alpha(reliability_data=wide.T.to_numpy(dtype=float), level_of_measurement="nominal")
    alpha = report["agreement"]["krippendorff_alpha"]
    assert alpha["value"] == pytest.approx(expected, abs=1e-12)
    assert alpha["n_items"] == 1858
    assert alpha["ci"][0] < alpha["value"] < alpha["ci"][1]


def test_pairwise_cohen_equals_scikit_learn(report, wide):
    pairs = {tuple(p["annotators"]): p for p in report["agreement"]["pairwise_cohen_kappa"]}
    assert set(pairs) == set(itertools.combinations(sorted(wide.columns), 2))
    for (a, b), pair in pairs.items():
        both = wide[[a, b]].dropna().astype(int)
        assert pair["n"] == len(both)
        assert pair["value"] == pytest.approx(cohen_kappa_score(both[a], both[b], labels=[0, 1]), abs=1e-12)
    mean = np.mean([p["value"] for p in pairs.values()])
    assert report["agreement"]["mean_cohen_kappa"]["value"] == pytest.approx(mean)


def test_raw_agreement_and_distribution_by_hand(report, wide):
    rated = wide.notna().sum(axis=1)
    ones = (wide == 1).sum(axis=1)
    zeros = (wide == 0).sum(axis=1)
    pairs = rated * (rated - 1)
    paired = rated >= 2
    percent = ((ones * (ones - 1) + zeros * (zeros - 1))[paired] / pairs[paired]).mean()
    agreement = report["agreement"]
    assert agreement["percent_agreement"]["value"] == pytest.approx(percent)
    assert agreement["full_agreement"]["value"] == pytest.approx(((ones == rated) | (zeros == rated))[paired].mean())
    assert agreement["label_distribution"]["counts"] == {"factual": 582, "not_factual": 4982}
    assert agreement["consensus"]["3-0"] + agreement["consensus"]["2-1"] == 1848


def test_binary_and_domain_sections(report):
    # XSum's labels are already binary: the collapse must give the very same kappa, and one domain the same too.
    assert report["binary"]["categories"] == ["positive", "negative"]
    assert report["binary"]["fleiss_kappa"]["value"] == pytest.approx(report["agreement"]["fleiss_kappa"]["value"])
    assert list(report["by_domain"]) == ["xsum"]
    assert report["by_domain"]["xsum"]["fleiss_kappa"]["value"] == pytest.approx(
        report["agreement"]["fleiss_kappa"]["value"]
    )


def test_disagreements_are_exactly_the_split_items(report, xsum_fixture_labels):
    split = xsum_fixture_labels.groupby("item")["label"].nunique()
    expected = set(split.index[split > 1])
    listed = [entry["item"] for entry in report["disagreements"]]
    assert set(listed) == expected and len(listed) == len(expected) == report["n_disagreements"]
    first = report["disagreements"][0]
    assert first["pattern"] == "1-1" and first["majority"] is None  # the most divided item comes first
    two_one = next(entry for entry in report["disagreements"] if entry["pattern"] == "2-1")
    assert two_one["majority"] in CATS and len(two_one["labels"]) == 3


def test_factual_share_per_system_is_the_majority_share(report, xsum_fixture_labels):
    """FActScore of one-claim responses = share of summaries whose majority says factual."""
    items = {
        json.loads(line)["id"]: json.loads(line)["system"]
        for line in open("fixtures/xsum/items.jsonl", encoding="utf-8")
    }
    counts = xsum_fixture_labels.groupby(["item", "label"]).size().unstack(fill_value=0)
    n = counts.sum(axis=1)
    majority = counts.idxmax(axis=1).where(counts.max(axis=1) * 2 > n)
    frame = majority.dropna().rename("label").reset_index()
    frame["system"] = frame["item"].map(items)
    expected = frame.groupby("system")["label"].apply(lambda s: (s == "factual").mean())
    human = report["scores"]["human"]
    for system, share in expected.items():
        entry = human["factscore"]["per_system"][system]
        assert entry["factscore"]["value"] == pytest.approx(share)
        assert entry["supported"] + entry["not_supported"] == (frame["system"] == system).sum()
        assert entry["factscore"]["ci"][0] <= share <= entry["factscore"]["ci"][1]
    assert human["veriscore"]["k"] == {"xsum": 1}  # one claim per summary: the median is 1
    assert human["n_claims_without_majority"] == 1  # the single 1-1 split
    assert report["scores"]["gold"]["available"] is False


def test_report_is_strict_json(report):
    text = json.dumps(report, allow_nan=False)  # raises on any NaN or infinity
    assert json.loads(text) == report


def test_report_reads_labels_in_a_constant_number_of_queries(xsum_study, demo, django_assert_max_num_queries):
    # 15, whatever the study's size: besides the labels (three reads: the labels, the items, which
    # also give the item counts, and the members' pseudonyms), the verifiers' labels (their factuality
    # scores), two for the adjudication section (its adjudications, the labels its queue is built
    # from), two for the reference rule (the study's adjudicated labels) and three for the crowd
    # participants left out of the analysis (screened out, withdrawn)
    with django_assert_max_num_queries(15):
        build_report(xsum_study, ReportOptions(by_domain=True, binary=True))
    with django_assert_max_num_queries(15):
        build_report(demo["factcheck-gpt"], ReportOptions(by_domain=True, binary=True))


def test_human_ceiling_against_scikit_learn(report, wide):
    """Each slot against the strict majority of the other slots, recomputed with scikit-learn."""
    entries = {e["annotator"]: e for e in report["human_ceiling"]["annotators"]}
    for a in wide.columns:
        others = wide.drop(columns=a)
        own = wide[a]
        keep, majority = [], []
        for item, value in own.dropna().items():
            votes = others.loc[item].dropna()
            if len(votes) and (votes == votes.mode().iloc[0]).sum() * 2 > len(votes):
                keep.append(int(value))
                majority.append(int(votes.mode().iloc[0]))
        human = entries[a]["human"]
        assert entries[a]["n_items"] == len(keep)
        assert human["accuracy"]["value"] == pytest.approx(accuracy_score(majority, keep))
        assert human["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(majority, keep, labels=[0, 1]))
