"""Bootstrap intervals of pairwise Cohen's kappa against plain resampling with scikit-learn.

Real data: LongSciVerify, three expert reviewers with stable identities
(135 sentence-level 0/1 judgements each on PubMed summaries).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from metaeval import stats
from metaeval.stats.cohen_bootstrap import MAX_FEATURES, _row_patterns, cohen_bootstrap, cohen_bootstrap_unavailable
from tests.datasets import TEST_DATA

B = 4000


@pytest.fixture(scope="module")
def pubmed() -> pd.DataFrame:
    """items x reviewers 0/1 labels."""
    columns = {}
    for r in (1, 2, 3):
        frame = pd.read_csv(TEST_DATA / "longsciverify" / f"pubmed_reviewer_{r}.csv", encoding="utf-8-sig")
        fact = [c for c in frame.columns if c.endswith("_factuality")]
        columns[f"reviewer_{r}"] = frame.set_index("id")[fact].stack(future_stack=True)
    return pd.DataFrame(columns).dropna().astype(int)


@pytest.fixture(scope="module")
def table(pubmed):
    long = (
        pubmed.reset_index(drop=True)
        .rename_axis("item")
        .reset_index()
        .melt(id_vars="item", var_name="annotator", value_name="label")
    )
    return stats.build_table(long, [0, 1])


def _kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two 0/1 label vectors, written out (checked against scikit-learn below)."""
    p_o = np.mean(a == b)
    p_e = np.mean(a) * np.mean(b) + np.mean(1 - a) * np.mean(1 - b)
    return (p_o - p_e) / (1 - p_e) if p_e < 1 else np.nan


def _plain_quantiles(pubmed: pd.DataFrame) -> dict[tuple[str, str], np.ndarray]:
    """Resample items with replacement, one resample at a time."""
    rng = np.random.default_rng(3)
    values = pubmed.to_numpy()
    names = list(pubmed.columns)
    out: dict[tuple[str, str], list[float]] = {pair: [] for pair in itertools.combinations(names, 2)}
    for _ in range(B):
        sample = values[rng.integers(0, len(values), len(values))]
        for a, b in out:
            out[(a, b)].append(_kappa(sample[:, names.index(a)], sample[:, names.index(b)]))
    return {pair: np.nanquantile(v, [0.025, 0.975]) for pair, v in out.items()}


def test_the_written_out_kappa_is_scikit_learns(pubmed):
    for a, b in itertools.combinations(pubmed.columns, 2):
        assert _kappa(pubmed[a].to_numpy(), pubmed[b].to_numpy()) == pytest.approx(
            cohen_kappa_score(pubmed[a], pubmed[b], labels=[0, 1])
        )


def test_pair_intervals_match_plain_resampling(pubmed, table):
    summary = stats.agreement_summary(table, n_resamples=B, seed=0)
    expected = _plain_quantiles(pubmed)
    for pair in summary["pairwise_cohen_kappa"]:
        low, high = pair["ci"]
        assert low < pair["value"] < high
        assert [low, high] == pytest.approx(expected[tuple(pair["annotators"])], abs=0.02)
    mean = summary["mean_cohen_kappa"]
    assert mean["ci"][0] < mean["value"] < mean["ci"][1] and mean["n_resamples"] == B


def test_distribution_of_the_mean_is_the_mean_of_the_pairs(table):
    per_pair, mean = cohen_bootstrap(table, [None], n_resamples=300, seed=5)[None]
    np.testing.assert_allclose(mean, np.nanmean(per_pair, axis=1))
    again = cohen_bootstrap(table, [None], n_resamples=300, seed=5)[None][0]
    np.testing.assert_array_equal(per_pair, again)


def test_weighted_intervals_are_attached_for_ordinal_summaries(table):
    summary = stats.agreement_summary(table, ordinal=True, n_resamples=200, seed=0)
    for key in ("mean_cohen_kappa_linear", "mean_cohen_kappa_quadratic"):
        assert summary[key]["ci"] is not None, key
    assert all(p["ci"] is not None for p in summary["pairwise_cohen_kappa_quadratic"])


def test_crowds_get_a_reason_instead_of_an_interval(monkeypatch, table):
    monkeypatch.setattr("metaeval.stats.cohen_bootstrap.MAX_FEATURES", 10)
    assert "too many" in cohen_bootstrap_unavailable(table)
    summary = stats.agreement_summary(table, n_resamples=50)
    assert summary["mean_cohen_kappa"]["ci"] is None
    assert "too many" in summary["mean_cohen_kappa"]["ci_unavailable"]
    assert MAX_FEATURES > 10


@pytest.mark.parametrize("n_annotators", [3, 12])
def test_the_annotator_patterns_are_the_distinct_rows_in_the_order_of_their_keys(n_annotators):
    """Few annotators: the distinct rows found by a count of their keys; more: by sorting the keys. Either way
    numpy's distinct rows, each item's row, and the rows in the order of their keys (base K+1, the first
    annotator the lowest digit), so the bootstrap's sums are added in the order they always were."""
    rng = np.random.default_rng(n_annotators)
    rows = [
        {"item": item, "annotator": annotator, "label": int(rng.integers(3))}
        for item in range(3000)
        for annotator in rng.choice(n_annotators, size=3, replace=False).tolist()
    ]
    table = stats.build_table(pd.DataFrame(rows), [0, 1, 2])
    patterns, of_item = _row_patterns(table)
    assert np.array_equal(patterns[of_item], table.codes)
    assert len(patterns) == len(np.unique(table.codes, axis=0))
    keys = (patterns + 1) @ (4 ** np.arange(n_annotators))
    assert (np.diff(keys) > 0).all()
