"""Dawid-Skene and MACE against a reference implementation (crowd-kit 1.4.2) on real data.

crowd-kit's outputs were computed once and stored beside the data
(tests/data/dawid_skene_1979/README.txt), so these tests never skip.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from metaeval.stats.aggregation import dawid_skene, mace
from tests.datasets import TEST_DATA

DATA = TEST_DATA / "dawid_skene_1979"


@pytest.fixture(scope="module")
def reference() -> dict:
    with gzip.open(DATA / "crowdkit_reference.json.gz", "rt") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def anaesthesia() -> pd.DataFrame:
    return pd.read_csv(DATA / "anaesthesia.csv")


@pytest.fixture(scope="module")
def xsum_long(xsum) -> pd.DataFrame:
    df = xsum.loc[xsum["label"].notna()].copy()
    df["item"] = df["bbcid"] + "|" + df["system"]
    return df.rename(columns={"worker_id": "annotator"})[["item", "annotator", "label"]]


def test_dawid_skene_reproduces_crowdkit_on_the_papers_data(anaesthesia, reference):
    """crowd-kit stopped after 4 EM rounds (its loss is a per-rating mean that rose); ours, held to 4, matches."""
    fit = dawid_skene(anaesthesia, item="patient", annotator="observer", label="rating", max_iter=4)
    ref = reference["anaesthesia"]
    assert fit.n_iter == 4 and not fit.converged
    # crowd-kit's priors_ are the mean of its last posteriors
    ck_priors = {int(k): v for k, v in ref["priors"].items()}
    assert fit.posteriors.mean().to_dict() == pytest.approx(ck_priors, abs=1e-6)
    expected = np.array([ref["posteriors"][str(p)] for p in fit.posteriors.index])
    assert np.abs(fit.posteriors.to_numpy() - expected).max() < 1e-5
    # observer 1 (three ratings per patient): P(says l | truth j); crowd-kit stores given x truth
    errors = ref["errors_observer_1"]
    for truth in (1, 2, 3, 4):
        for said in (1, 2, 3, 4):
            assert fit.confusion[1].loc[truth, said] == pytest.approx(errors[str(truth)][str(said)], abs=1e-6)


def test_dawid_skene_run_to_convergence_moves_little_from_crowdkits_stop(anaesthesia, reference):
    fit = dawid_skene(anaesthesia, item="patient", annotator="observer", label="rating")
    assert fit.converged and fit.n_iter > 4
    expected = np.array([reference["anaesthesia"]["posteriors"][str(p)] for p in fit.posteriors.index])
    assert np.abs(fit.posteriors.to_numpy() - expected).max() < 0.025
    assert (fit.posteriors.to_numpy().argmax(axis=1) == expected.argmax(axis=1)).all()
    # converged class marginals, to two decimals
    assert fit.priors.round(2).tolist() == [0.40, 0.42, 0.11, 0.07]


def test_dawid_skene_posteriors_are_distributions_and_rows_of_confusion_sum_to_one(anaesthesia):
    fit = dawid_skene(anaesthesia, item="patient", annotator="observer", label="rating")
    assert np.allclose(fit.posteriors.sum(axis=1), 1)
    assert np.allclose(fit.confusion[3].sum(axis=1), 1)
    assert fit.confidence.between(0.25, 1).all()
    assert fit.labels.loc[7] == 1  # 1,2,2 by observer 1 but the others say 1
    assert 0 < fit.annotator_accuracy.min() <= fit.annotator_accuracy.max() <= 1


def test_dawid_skene_on_xsum_matches_crowdkit_and_mostly_the_majority(xsum_long, reference):
    fit = dawid_skene(xsum_long, ["yes", "no"])
    ref = pd.Series(reference["xsum"]["dawid_skene_probas_yes"])
    assert fit.converged
    assert len(ref) == len(fit.posteriors)
    assert np.abs(fit.posteriors["yes"].reindex(ref.index).to_numpy() - ref.to_numpy()).max() < 1e-3
    counts = xsum_long.groupby("item")["label"].agg(lambda s: (s == "yes").sum() - (s == "no").sum())
    majority = counts[counts != 0].map(lambda d: "yes" if d > 0 else "no")
    agree = (fit.labels.reindex(majority.index) == majority).mean()
    assert agree > 0.95


def test_mace_em_competence_and_labels_match_crowdkit_em_on_xsum(xsum_long, reference):
    fit = mace(xsum_long, ["yes", "no"])
    ref = reference["xsum"]
    ck_competence = pd.Series({w: row[1] for w, row in ref["mace_em_spamming"].items()})
    # crowd-kit smooths its counts (smoothing=0.1), so competences agree to 0.01, not exactly
    assert np.abs(fit.competence.reindex(ck_competence.index) - ck_competence).max() < 0.01
    labels = pd.Series(ref["mace_em_labels"])
    assert (fit.labels.reindex(labels.index) == labels).mean() > 0.99
    assert fit.method == "mace_em"


@pytest.mark.parametrize("model", [dawid_skene, mace])
def test_a_copy_of_every_item_changes_no_estimate(xsum_long, model):
    """Both fits are maximum likelihood without per-item parameters, so doubling the data (every item
    again under another id) moves no annotator's estimate, and each copy gets its original's
    posterior (the fits run once per distinct rating pattern and hand each item its pattern's
    posterior; the crowd-kit comparisons above check the weighting against an outside reference)."""
    copy = xsum_long.assign(item=xsum_long["item"].astype(str) + "-copy")
    once = model(xsum_long, ["yes", "no"])
    twice = model(pd.concat([xsum_long, copy], ignore_index=True), ["yes", "no"])
    assert np.abs(twice.annotator_accuracy - once.annotator_accuracy).max() < 1e-4
    originals = twice.posteriors.loc[once.posteriors.index.astype(str)].to_numpy()
    copies = twice.posteriors.loc[once.posteriors.index.astype(str) + "-copy"].to_numpy()
    assert np.array_equal(originals, copies)
    assert np.abs(originals - once.posteriors.to_numpy()).max() < 1e-3
    assert twice.log_likelihood == pytest.approx(2 * once.log_likelihood, rel=1e-4)


def test_mace_finds_the_spammer():
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 2, 300)
    rows = []
    for i, t in enumerate(truth):
        for a in ("good1", "good2", "good3"):
            rows.append((i, a, t if rng.random() < 0.9 else 1 - t))
        rows.append((i, "spammer", int(rng.integers(0, 2))))
    fit = mace(pd.DataFrame(rows, columns=["item", "annotator", "label"]), [0, 1])
    assert fit.competence["spammer"] < 0.2 < 0.7 < fit.competence.drop("spammer").min()
    assert (fit.labels.to_numpy() == truth).mean() > 0.95


def test_bad_input_is_named():
    df = pd.DataFrame({"item": [1, 1], "annotator": ["a", "b"], "label": ["yes", "maybe"]})
    with pytest.raises(ValueError, match="maybe"):
        dawid_skene(df, ["yes", "no"])
    with pytest.raises(ValueError, match="columns"):
        mace(df.drop(columns="label"))
    with pytest.raises(ValueError, match="no labels"):
        dawid_skene(df.iloc[:0])


@pytest.mark.parametrize("model", [dawid_skene, mace])
def test_rows_numbered_by_integer_keys_or_one_by_one_give_the_same_fit(anaesthesia, xsum_long, model, monkeypatch):
    """The distinct count rows, packed into one integer each or keyed in Python, in the same order: identical fits."""
    import metaeval.stats.aggregation as aggregation

    # the anaesthesia observer 1 rates each patient three times: counts above 1 in a row
    papers = anaesthesia.rename(columns={"patient": "item", "observer": "annotator", "rating": "label"})
    for frame in (papers, xsum_long):
        keyed = model(frame)
        with monkeypatch.context() as patched:
            patched.setattr(aggregation, "_KEYED_COLUMNS", 0)  # every row keyed by the loop
            looped = model(frame)
        pd.testing.assert_frame_equal(keyed.posteriors, looped.posteriors, check_exact=True)
        pd.testing.assert_series_equal(keyed.annotator_accuracy, looped.annotator_accuracy, check_exact=True)
        assert keyed.log_likelihood == looped.log_likelihood and keyed.n_iter == looped.n_iter


def test_integer_keys_number_rows_by_first_appearance(xsum_long):
    import metaeval.stats.aggregation as aggregation

    ratings = aggregation._encode(xsum_long, None, "item", "annotator", "label")
    rows, weights, inverse = ratings.patterns
    assert aggregation._row_keys(ratings.counts) is not None  # 3 annotators x 2 labels: the keyed path
    first_seen = list(dict.fromkeys(inverse.tolist()))
    assert first_seen == list(range(rows.shape[0]))  # pattern 0 is the first item's row, and so on
    assert weights.sum() == ratings.counts.shape[0]
    assert (rows[inverse] != ratings.counts).nnz == 0  # every item's row is its pattern's row
