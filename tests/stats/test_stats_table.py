"""Building the count and code matrices from a long table, and Estimate's JSON."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from metaeval import stats

ROWS = [
    ("c1", "ann", "supported"),
    ("c1", "bob", "supported"),
    ("c1", "cy", "contradicted"),
    ("c2", "ann", "inconclusive"),
    ("c2", "cy", "inconclusive"),
    ("c3", "bob", None),  # a missing rating: dropped, item has no rating left
    ("c4", "bob", "contradicted"),
]
CATS = ["supported", "contradicted", "inconclusive", "unused"]


def frame(rows=ROWS):
    return pd.DataFrame(rows, columns=["item", "annotator", "label"])


def test_count_and_code_matrices():
    table = stats.build_table(frame(), CATS)
    assert table.categories == tuple(CATS)
    assert list(table.item_index) == ["c1", "c2", "c4"]
    assert list(table.annotator_index) == ["ann", "bob", "cy"]
    assert table.n_missing_dropped == 1
    assert table.counts.tolist() == [[2, 1, 0, 0], [0, 0, 2, 0], [0, 1, 0, 0]]
    assert table.codes.tolist() == [[0, 0, 1], [2, -1, 2], [-1, 1, -1]]
    # Independent check of the counts with a pandas crosstab
    ref = pd.crosstab(frame().dropna()["item"], frame().dropna()["label"]).reindex(columns=CATS, fill_value=0)
    assert table.counts.tolist() == ref.loc[["c1", "c2", "c4"]].to_numpy().tolist()


def test_patterns_rebuild_the_count_matrix():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "item": np.repeat(np.arange(500), 3),
            "annotator": np.tile(list("xyz"), 500),
            "label": rng.choice(list("abcd"), size=1500),
        }
    )
    df = df.sample(frac=0.9, random_state=1)  # some missing ratings
    table = stats.build_table(df, list("abcd"))
    rows, inverse = table.patterns
    np.testing.assert_array_equal(rows[inverse], table.counts)
    assert len(rows) == len(np.unique(table.counts, axis=0))


def test_patterns_with_a_large_key_space():
    # One item with 40 ratings: the sort-based path instead of the bincount one.
    rng = np.random.default_rng(2)
    df = pd.DataFrame(
        {
            "item": [0] * 40 + list(np.repeat(np.arange(1, 200), 2)),
            "annotator": [f"a{j}" for j in range(40)] + ["a0", "a1"] * 199,
            "label": rng.choice(list("abcd"), size=40 + 398),
        }
    )
    table = stats.build_table(df, list("abcd"))
    rows, inverse = table.patterns
    np.testing.assert_array_equal(rows[inverse], table.counts)


def test_sparse_and_dense_pair_confusions_agree():
    from metaeval.stats.table import _sparse_pair_confusions

    rng = np.random.default_rng(3)
    rows = []
    for item in range(300):  # a crowd: 3 of 12 workers per item
        for worker in rng.choice(12, size=3, replace=False):
            rows.append((item, f"w{worker:02d}", rng.choice(["yes", "no", "maybe"])))
    table = stats.build_table(pd.DataFrame(rows, columns=["item", "annotator", "label"]), ["yes", "no", "maybe"])
    dense = table.pair_confusions
    sparse = _sparse_pair_confusions(table)
    for x, y in zip(dense, sparse, strict=True):
        np.testing.assert_array_equal(x, y)
    # and each confusion equals a direct crosstab of the two workers' shared items
    a, b = table.annotator_index[dense[0][0]], table.annotator_index[dense[1][0]]
    wide = (
        pd.DataFrame(rows, columns=["item", "annotator", "label"])
        .pivot(index="item", columns="annotator", values="label")[[a, b]]
        .dropna()
    )
    ref = pd.crosstab(wide[a], wide[b]).reindex(
        index=["yes", "no", "maybe"], columns=["yes", "no", "maybe"], fill_value=0
    )
    np.testing.assert_array_equal(dense[2][0], ref.to_numpy())


def test_composite_item_key_and_lookup():
    df = pd.DataFrame(
        {
            "doc": [1, 1, 1, 1],
            "system": ["A", "A", "B", "B"],
            "worker": ["w0", "w1", "w0", "w1"],
            "label": ["yes", "no", "yes", "yes"],
        }
    )
    table = stats.build_table(df, ["yes", "no"], item=["doc", "system"], annotator="worker")
    assert table.n_items == 2 and list(table.item_index) == [(1, "A"), (1, "B")]
    pos = table.item_codes_for(pd.DataFrame({"doc": [1, 2], "system": ["B", "A"]}))
    assert pos.tolist() == [1, -1]


def test_duplicate_rating_is_an_error():
    with pytest.raises(ValueError, match="more than once"):
        stats.build_table(frame([*ROWS, ("c1", "ann", "contradicted")]), CATS)


def test_missing_columns_named():
    with pytest.raises(ValueError, match="'label'"):
        stats.build_table(frame().rename(columns={"label": "canonical"}))


def test_observed_categories_sorted_when_not_declared():
    table = stats.build_table(frame())
    assert table.categories == ("contradicted", "inconclusive", "supported")


def test_collapse_table_and_frame_agree():
    binary = {"supported": "supported", "contradicted": "unsupported", "inconclusive": "unsupported", "unused": None}
    table = stats.build_table(frame(), CATS).collapse(binary)
    assert table.categories == ("supported", "unsupported")
    assert table.counts.tolist() == [[2, 1], [0, 2], [0, 1]]
    from_frame = stats.build_table(stats.collapse_labels(frame(), binary), ["supported", "unsupported"])
    np.testing.assert_array_equal(from_frame.counts, table.counts)
    with pytest.raises(ValueError, match="no entry"):
        stats.build_table(frame(), CATS).collapse({"supported": "s"})
    with pytest.raises(ValueError, match="no entry"):
        stats.collapse_labels(frame(), {"supported": "s"})


def test_collapse_can_drop_a_category():
    # FActScore: IR excluded -> S vs NS, items left without ratings disappear.
    df = pd.DataFrame({"item": [1, 1, 2], "annotator": ["a", "b", "a"], "label": ["S", "NS", "IR"]})
    table = stats.build_table(df, ["S", "NS", "IR"]).collapse({"S": "S", "NS": "NS", "IR": None})
    assert table.n_items == 1 and table.counts.tolist() == [[1, 1]]


def test_select_items_keeps_categories():
    table = stats.build_table(frame(), CATS)
    sub = table.select_items(np.array([True, False, False]))
    assert sub.n_items == 1 and sub.categories == tuple(CATS) and sub.n_annotators == 3


def test_estimate_to_dict_never_has_nan():
    est = stats.Estimate(float("nan"))
    assert est.value is None and est.reason
    d = stats.Estimate(
        np.float64(0.5),
        n_items=np.int64(3),
        ci=(np.float64(0.1), np.float64(0.9)),
        extra={"p": np.float64("nan"), "k": np.int64(2), "arr": np.array([1.0, np.inf])},
    ).to_dict()
    assert d == {"value": 0.5, "reason": None, "n_items": 3, "ci": [0.1, 0.9], "p": None, "k": 2, "arr": [1.0, None]}
    json.dumps(d, allow_nan=False)
    undefined = stats.Estimate.undefined("all ratings in one category", n_items=4, n_raters=3).to_dict()
    assert undefined["value"] is None and undefined["ci"] is None and undefined["n_raters"] == 3
    assert not any(isinstance(v, float) and math.isnan(v) for v in d.values())


def test_stats_package_imports_no_django_or_annotation():
    root = Path(__file__).resolve().parents[2] / "metaeval" / "stats"
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                assert not name.startswith(("django", "rest_framework", "annotation", "metaeval.")), (path, name)
