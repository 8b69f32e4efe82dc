"""metaeval.stats.judge on hand-made cases whose answers can be counted by eye."""

from __future__ import annotations

import pandas as pd
import pytest

from metaeval.stats.judge import judge_position, judge_vs_humans


def labels(rows: dict[str, list[str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(item, f"w{n}", label) for item, given in rows.items() for n, label in enumerate(given)],
        columns=["item", "annotator", "label"],
    )


def test_position_counts_orders_that_disagree_and_verdicts_for_list_1():
    out = judge_position([["a_strong", "a_slight"], ["a_slight", "b_slight"], ["tie", "tie"], ["b_strong", None]])
    assert out["n_items"] == 3  # the item with an unreadable order is left out
    assert out["position_inconsistency"].value == pytest.approx(1 / 3)
    assert out["position_inconsistency_exact"].value == pytest.approx(2 / 3)
    # decisive single-order verdicts: a (List 1 = A), a (List 1 = B: for List 2), a (List 1), b (List 1 = B)
    assert out["list_1_preferred"].value == pytest.approx(3 / 4)
    assert out["list_1_preferred"].extra["ties"] == 2


def test_nothing_readable_is_undefined_with_a_reason():
    out = judge_position([[None, "tie"], []])
    assert out["position_inconsistency"].value is None and "both orders" in out["position_inconsistency"].reason
    assert out["list_1_preferred"].value is None


def test_accuracy_on_non_tie_items_ignores_items_the_humans_call_a_tie():
    humans = labels({"i1": ["a_strong", "a_slight", "tie"], "i2": ["tie", "tie", "b_slight"], "i3": ["b_strong"] * 3})
    judge = pd.DataFrame({"item": ["i1", "i2", "i3"], "label": ["a_slight", "b_strong", "tie"]})
    out = judge_vs_humans(humans, judge)
    assert out["non_tie_accuracy"].value == pytest.approx(1 / 2)  # i1 right (a), i3 wrong (tie); i2 is a tie
    assert out["non_tie_accuracy"].n_items == 2
    assert out["five_point"]["n_majority"] == 2  # i1 has no 5-point majority; i2 tie, i3 b_strong


def test_only_ties_leave_the_non_tie_accuracy_undefined():
    humans = labels({"i1": ["tie", "tie", "a_slight"]})
    out = judge_vs_humans(humans, pd.DataFrame({"item": ["i1"], "label": ["tie"]}))
    assert out["non_tie_accuracy"].value is None and "majority for one system" in out["non_tie_accuracy"].reason
