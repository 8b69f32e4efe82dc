"""The disagreement list against a plain per-item count of the labels (pandas groups, Counter)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from metaeval.reporting.disagreements import disagreements


def _reference(frame: pd.DataFrame) -> list[dict]:
    """One item at a time: what the list must hold, written the slow, obvious way."""
    entries = []
    for (position, item), rows in frame.sort_values(["position", "item", "annotator"]).groupby(
        ["position", "item"], sort=True
    ):
        counts = Counter(rows["label"])
        if len(counts) < 2:
            continue
        label, top = counts.most_common(1)[0]
        n = len(rows)
        entry = {
            "item": item,
            "domain": rows["domain"].iloc[0],
            "labels": dict(zip(rows["annotator"], rows["label"], strict=True)),
            "pattern": "-".join(str(c) for c in sorted(counts.values(), reverse=True)),
            "majority": label if 2 * top > n else None,
        }
        entries.append((top / n, position, entry))
    return [entry for _, _, entry in sorted(entries, key=lambda t: (t[0], t[1]))]


def _frame(n_items: int, seed: int) -> pd.DataFrame:
    """Up to 5 annotators per item, 4 labels, some items with one label only or one annotator."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in rng.permutation(n_items):  # rows not in import order: the list orders them
        for annotator in rng.choice([f"w{k}" for k in range(5)], size=rng.integers(1, 6), replace=False):
            rows.append(
                {
                    "item": f"c-{i}",
                    "annotator": str(annotator),
                    "label": str(
                        rng.choice(["supported", "contradicted", "inconclusive", "partly"], p=[0.55, 0.3, 0.1, 0.05])
                    ),
                    "domain": ["news", "bio"][i % 2],
                    "position": int(i) + 1,
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", [1, 2])
def test_list_equals_the_per_item_count(seed):
    frame = _frame(400, seed)
    listed = disagreements(frame)
    assert listed == _reference(frame)
    assert {entry["pattern"] for entry in listed} >= {"1-1", "2-1", "1-1-1"}
    assert any(entry["majority"] is None for entry in listed) and any(entry["majority"] for entry in listed)


def test_real_xsum_labels_as_the_reference(xsum_fixture_labels):
    frame = xsum_fixture_labels.assign(
        domain="xsum", position=lambda f: pd.factorize(f["item"])[0] + 1, label=lambda f: f["label"].astype(str)
    )
    listed = disagreements(frame)
    assert listed == _reference(frame) and len(listed) > 100


def test_no_split_item_no_entry():
    frame = pd.DataFrame(
        {
            "item": ["a", "a", "b"],
            "annotator": ["w1", "w2", "w1"],
            "label": ["x", "x", "y"],
            "domain": "",
            "position": [1, 1, 2],
        }
    )
    assert disagreements(frame) == [] and disagreements(frame.iloc[:0]) == []
