"""Shared loaders for the statistics tests (no Django, no database).

Real data is carried in the repository (``tests/data``, see its README.md),
so these tests never skip.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.datasets import TEST_DATA, read_jsonl


def _long_from_counts(counts, categories=None) -> pd.DataFrame:
    """A long table from an items x categories count matrix (raters anonymous)."""
    counts = np.asarray(counts, dtype=int)
    cats = list(categories) if categories is not None else list(range(counts.shape[1]))
    rows = []
    for i, row in enumerate(counts):
        slot = 0
        for k, n in enumerate(row):
            for _ in range(n):
                rows.append((i, f"r{slot}", cats[k]))
                slot += 1
    return pd.DataFrame(rows, columns=["item", "annotator", "label"])


def _long_from_wide(wide, annotators=None) -> pd.DataFrame:
    """A long table from an items x raters matrix; NaN/None = missing rating (absent row)."""
    wide = pd.DataFrame(wide)
    if annotators is not None:
        wide.columns = annotators
    wide.index.name = "item"
    out = wide.reset_index().melt(id_vars="item", var_name="annotator", value_name="label")
    return out.loc[out["label"].notna()].reset_index(drop=True)


@pytest.fixture(scope="session")
def xsum() -> pd.DataFrame:
    """XSum factuality judgements: item = (bbcid, system), annotator = slot, label yes/no."""
    df = pd.read_csv(
        TEST_DATA / "xsum_hallucination" / "factuality_annotations_xsum_summaries.csv.gz",
        keep_default_na=False,
        dtype={"bbcid": str},
    )
    df["label"] = df["is_factual"].where(df["is_factual"] != "NULL")
    return df


@pytest.fixture(scope="session")
def longsci() -> dict[str, pd.DataFrame]:
    """LongSciVerify per dataset: wide frame, rows (id, model, sentence), columns reviewer_1..3."""
    out = {}
    for ds in ("pubmed", "arxiv"):
        cols = {}
        for r in (1, 2, 3):
            d = pd.read_csv(TEST_DATA / "longsciverify" / f"{ds}_reviewer_{r}.csv", encoding="utf-8-sig")
            fact = [c for c in d.columns if c.endswith("_factuality")]
            s = d.set_index("id")[fact].stack(future_stack=True)
            cols[f"reviewer_{r}"] = s
        out[ds] = pd.DataFrame(cols)
    return out


def _longsci_long(wide: pd.DataFrame) -> pd.DataFrame:
    """Long table with item = "id|model_m_sent_s_factuality" and integer labels 0/1."""
    long = wide.copy()
    long.index = [f"{i}|{c}" for i, c in long.index]
    long.index.name = "item"
    long = long.reset_index().melt(id_vars="item", var_name="annotator", value_name="label").dropna()
    long["label"] = long["label"].astype(int)
    return long


@pytest.fixture(scope="session")
def wice() -> tuple[pd.DataFrame, pd.DataFrame]:
    """WiCE: human labels of 358 claims (one aggregated label) and GPT-4 verdicts on 100."""
    rows = read_jsonl(TEST_DATA / "wice" / "claim_test.jsonl.gz")
    human = pd.DataFrame(
        {"item": [r["meta"]["id"] for r in rows], "annotator": "wice", "label": [r["label"] for r in rows]}
    )
    scores = json.loads((TEST_DATA / "wice" / "oracle_chunks_claim_test.gpt-4-0613.entailment_score.json").read_text())
    names = {1.0: "supported", 0.5: "partially_supported", 0.0: "not_supported"}
    preds = pd.DataFrame({"item": list(scores), "label": [names[v] for v in scores.values()]})
    return human, preds


# Helpers as fixtures, so test modules need no import path tricks.


@pytest.fixture(scope="session")
def long_from_counts():
    return _long_from_counts


@pytest.fixture(scope="session")
def long_from_wide():
    return _long_from_wide


@pytest.fixture(scope="session")
def longsci_long():
    return _longsci_long
