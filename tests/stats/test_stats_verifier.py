"""Verifier-versus-human metrics against scikit-learn computed in the test."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    cohen_kappa_score,
    confusion_matrix,
    f1_score,
    precision_recall_fscore_support,
)

from metaeval import stats

WICE = ["supported", "partially_supported", "not_supported"]


def _check_against_sklearn(result, y_true, y_pred, labels):
    assert result["accuracy"].value == pytest.approx(accuracy_score(y_true, y_pred), abs=1e-12)
    assert result["balanced_accuracy"].value == pytest.approx(balanced_accuracy_score(y_true, y_pred), abs=1e-12)
    assert result["cohen_kappa"].value == pytest.approx(cohen_kappa_score(y_true, y_pred, labels=labels), abs=1e-12)
    assert result["macro_f1"].value == pytest.approx(f1_score(y_true, y_pred, average="macro"), abs=1e-12)
    assert result["confusion_matrix"]["matrix"] == confusion_matrix(y_true, y_pred, labels=labels).tolist()
    assert result["confusion_matrix"]["labels"] == list(labels)
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=np.nan)
    for i, c in enumerate(labels):
        got = result["per_class"][c]
        for mine, ref in ((got["precision"], p[i]), (got["recall"], r[i])):
            assert (mine is None and np.isnan(ref)) or mine == pytest.approx(ref, abs=1e-12)
        if s[i] or got["predicted"]:
            assert got["f1"] == pytest.approx(np.nan_to_num(f[i]), abs=1e-12)
        assert got["support"] == s[i]


def test_wice_gpt4_against_humans(wice):
    human, preds = wice
    result = stats.verifier_vs_majority(human, preds, WICE)
    assert result["n_majority"] == 358 and result["n_predicted"] == 100
    assert result["coverage"].value == pytest.approx(100 / 358)
    merged = preds.merge(human, on="item", suffixes=("_pred", "_human"))
    _check_against_sklearn(result, merged["label_human"], merged["label_pred"], WICE)
    # README quick check: 3-way Cohen kappa 0.43, accuracy 0.69
    assert round(result["cohen_kappa"].value, 2) == 0.43
    assert result["accuracy"].value == pytest.approx(0.69)
    json.dumps(stats.json_ready(result), allow_nan=False)


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_unused_and_unpredicted_classes():
    cats = ["supported", "contradicted", "inconclusive"]
    rng = np.random.default_rng(0)
    truth = rng.choice(["supported", "contradicted"], size=60)  # humans never say inconclusive
    rows = [(i, a, truth[i] if rng.random() < 0.9 else "supported") for i in range(60) for a in "xyz"]
    human = pd.DataFrame(rows, columns=["item", "annotator", "label"])
    pred = np.where(rng.random(60) < 0.7, truth, "supported")
    pred[:5] = "inconclusive"  # predicted, but never a human majority
    preds = pd.DataFrame({"item": range(60), "label": pred})
    result = stats.verifier_vs_majority(human, preds, cats)
    maj = human.groupby("item")["label"].agg(lambda s: s.value_counts().idxmax())
    # 3 raters, 2 labels: a strict majority always exists
    assert result["n_majority"] == 60 and result["n_no_majority"] == 0
    _check_against_sklearn(result, maj.loc[range(60)].to_numpy(), pred, cats)


def test_majority_excludes_and_counts_ties(xsum):
    table = stats.build_table(xsum, ["yes", "no"], item=["bbcid", "system"], annotator="worker_id")
    vote = stats.majority_vote(table)
    counts = xsum.dropna(subset=["label"]).groupby(["bbcid", "system"])["label"].value_counts().unstack(fill_value=0)
    r = counts.sum(axis=1)
    strict = counts.max(axis=1) * 2 > r
    assert vote.n_items == int(strict.sum())
    assert vote.n_no_majority == int((~strict).sum()) > 0  # 1-1 splits on two-rating items
    labels = vote.labels()
    expected = counts[strict].idxmax(axis=1)
    assert labels.sort_index().tolist() == expected.sort_index().tolist()


def test_prediction_table_errors_and_missing(wice):
    human, preds = wice
    with pytest.raises(ValueError, match="'true'"):
        stats.verifier_vs_majority(human, pd.DataFrame({"item": ["test00561"], "label": ["true"]}), WICE)
    dup = pd.concat([preds.iloc[:2], preds.iloc[:1]])
    with pytest.raises(ValueError, match="more than one prediction"):
        stats.verifier_vs_majority(human, dup, WICE)
    extra = pd.DataFrame({"item": ["nope", preds["item"][0]], "label": ["supported", None]})
    result = stats.verifier_vs_majority(human, extra, WICE)
    assert result["n_predictions_unknown_item"] == 1 and result["n_predictions_missing_label"] == 1
    assert result["n_predicted"] == 0
    assert result["accuracy"].value is None and result["accuracy"].reason


def _independent_ceiling(wide: pd.DataFrame, pred: pd.Series, labels):
    """Each column against the strict majority of the other columns, with pandas/sklearn."""
    out = {}
    for a in wide.columns:
        others = wide.drop(columns=a)
        rows = []
        for item, row in others.iterrows():
            if pd.isna(wide.at[item, a]) or pd.isna(pred.get(item)):
                continue
            vals = row.dropna()
            if len(vals) == 0:
                continue
            vc = vals.value_counts()
            if vc.iloc[0] * 2 > len(vals):
                rows.append((vc.index[0], wide.at[item, a], pred[item]))
        maj, own, ver = (list(x) for x in zip(*rows, strict=True))
        out[a] = {
            "n": len(rows),
            "human": (
                accuracy_score(maj, own),
                cohen_kappa_score(maj, own, labels=labels),
                f1_score(maj, own, average="macro"),
            ),
            "verifier": (
                accuracy_score(maj, ver),
                cohen_kappa_score(maj, ver, labels=labels),
                f1_score(maj, ver, average="macro"),
            ),
        }
    return out


def test_human_ceiling_on_xsum_slots(xsum):
    table = stats.build_table(xsum, ["yes", "no"], item=["bbcid", "system"], annotator="worker_id")
    wide = xsum.pivot(index=["bbcid", "system"], columns="worker_id", values="label")
    wide = wide[wide.notna().any(axis=1)]
    rng = np.random.default_rng(7)
    # A fake verifier: agrees with slot 0 most of the time, sometimes silent.
    guess = wide["wid_0"].fillna("no").where(rng.random(len(wide)) < 0.85, "yes")
    guess = guess.where(rng.random(len(wide)) < 0.95)
    preds = guess.rename("label").reset_index()
    result = stats.human_ceiling(table, preds)
    expected = _independent_ceiling(wide, guess.dropna(), ["yes", "no"])
    assert [e["annotator"] for e in result["annotators"]] == ["wid_0", "wid_1", "wid_2"]
    for entry in result["annotators"]:
        ref = expected[entry["annotator"]]
        assert entry["n_items"] == ref["n"]
        for who in ("human", "verifier"):
            got = (entry[who]["accuracy"].value, entry[who]["cohen_kappa"].value, entry[who]["macro_f1"].value)
            assert got == pytest.approx(ref[who], abs=1e-12)
        assert entry["n_without_prediction"] > 0
    mean = result["mean"]["human"]["accuracy"].value
    assert mean == pytest.approx(np.mean([expected[a]["human"][0] for a in expected]))
    json.dumps(stats.json_ready(result), allow_nan=False)


def test_human_ceiling_longsciverify_without_verifier(longsci, longsci_long):
    wide = longsci["pubmed"].astype(int)
    table = stats.build_table(longsci_long(longsci["pubmed"]), [0, 1])
    result = stats.human_ceiling(table)
    keyed = wide.copy()
    keyed.index = [f"{i}|{c}" for i, c in keyed.index]
    fake = pd.Series(0, index=keyed.index)  # verifier part unused here
    expected = _independent_ceiling(keyed, fake, [0, 1])
    for entry in result["annotators"]:
        ref = expected[entry["annotator"]]
        assert entry["n_items"] == ref["n"]
        assert entry["human"]["cohen_kappa"].value == pytest.approx(ref["human"][1], abs=1e-12)
        assert "verifier" not in entry
