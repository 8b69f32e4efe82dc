"""Per-annotator quality on a constructed table where the answer is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from metaeval.stats import FLAG_RULE, annotator_quality, dawid_skene, kappa_with_ci


@pytest.fixture(scope="module")
def table() -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(3)
    truth = pd.Series(rng.choice(["s", "u"], 200, p=[0.6, 0.4]), index=[f"i{n}" for n in range(200)])
    rows = []
    for item, t in truth.items():
        for who, right in (("good1", 0.92), ("good2", 0.9), ("good3", 0.88), ("sloppy", 0.55)):
            rows.append((item, who, t if rng.random() < right else ("u" if t == "s" else "s")))
    return pd.DataFrame(rows, columns=["item", "annotator", "label"]), truth


def test_the_sloppy_annotator_is_flagged_and_the_others_are_not(table):
    df, truth = table
    out = annotator_quality(df, ["s", "u"], truth, n_resamples=200)
    flags = {who: entry["flagged"] for who, entry in out["annotators"].items()}
    assert flags == {"good1": False, "good2": False, "good3": False, "sloppy": True}
    assert out["flag_rule"] == FLAG_RULE
    sloppy = df[df["annotator"] == "sloppy"].set_index("item")["label"]
    assert out["annotators"]["sloppy"]["kappa_reference"].value == pytest.approx(
        cohen_kappa_score(sloppy[truth.index], truth)
    )


def test_gold_accuracy_counts_only_gold_items(table):
    df, truth = table
    gold = truth.iloc[:30]
    out = annotator_quality(df, ["s", "u"], truth, gold=gold, n_resamples=0)
    mine = df[df["annotator"] == "good1"].set_index("item")["label"]
    acc = out["annotators"]["good1"]["gold_accuracy"]
    assert acc.n_items == 30
    assert acc.value == pytest.approx((mine[gold.index] == gold).mean())


def test_dawid_skene_confusion_is_attached_and_ranks_the_sloppy_one_last(table):
    df, _ = table
    fit = dawid_skene(df, ["s", "u"])
    out = annotator_quality(df, ["s", "u"], fit.labels, dawid_skene=fit, n_resamples=0)
    acc = {who: e["dawid_skene_accuracy"] for who, e in out["annotators"].items()}
    assert min(acc, key=acc.get) == "sloppy"
    assert acc["sloppy"] == pytest.approx(0.55, abs=0.08)


def test_kappa_ci_is_seeded_and_undefined_cases_say_why():
    a = np.array([0, 1, 0, 1, 1, 0, 0, 1] * 5)
    b = np.array([0, 1, 1, 1, 1, 0, 0, 0] * 5)
    first, again = kappa_with_ci(a, b, 2, seed=1), kappa_with_ci(a, b, 2, seed=1)
    assert first.ci == again.ci and first.ci[0] < first.value < first.ci[1]
    assert kappa_with_ci(a[:0], b[:0], 2).reason == "no items in common"
    assert "one and the same label" in kappa_with_ci(np.zeros(5, int), np.zeros(5, int), 2).reason


def test_kappa_interval_agrees_with_a_plain_item_bootstrap():
    """The multinomial shortcut against resampling items one by one with sklearn (another RNG)."""
    rng = np.random.default_rng(5)
    a = rng.integers(0, 3, 300)
    b = np.where(rng.random(300) < 0.7, a, rng.integers(0, 3, 300))
    fast = kappa_with_ci(a, b, 3, n_resamples=2000, seed=0)
    draws = []
    for _ in range(2000):
        pick = rng.integers(0, 300, 300)
        draws.append(cohen_kappa_score(a[pick], b[pick]))
    low, high = np.percentile(draws, [2.5, 97.5])
    assert fast.value == pytest.approx(cohen_kappa_score(a, b))
    assert fast.ci[0] == pytest.approx(low, abs=0.02) and fast.ci[1] == pytest.approx(high, abs=0.02)
