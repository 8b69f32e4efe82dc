"""Adaptive overlap replayed on XSum's fixed-N labels (Maynez et al. 2020: 3 labels per summary), checked
against counts computed independently from the rule's meaning for 2 -> 3 on disagreement."""

from __future__ import annotations

import pandas as pd
import pytest

from metaeval.stats.adaptive import adaptive_stop, replay_adaptive


@pytest.mark.parametrize(
    "labels, n_min, k, n_max, asked",
    [
        (["y", "y", "n"], 2, 2, 3, 2),
        (["y", "n", "n"], 2, 2, 3, 3),
        (["y", "n", "y", "n"], 2, 3, 5, 4),  # k = 3 never reached: all the labels there are
        (["y", "y", "y"], 3, 2, 3, 3),  # n_min first, even when two agree before
        (["y", "n", "y", "y", "y"], 1, 2, 5, 3),
    ],
)
def test_the_rule_stops_at_n_min_with_k_agreeing_or_at_n_max(labels, n_min, k, n_max, asked):
    assert adaptive_stop(labels, n_min, k, n_max) == asked


def test_an_impossible_rule_is_refused():
    with pytest.raises(ValueError, match="n_min"):
        adaptive_stop(["y"], 0, 2, 3)


def test_xsum_replayed_as_two_then_a_third_on_disagreement(xsum):
    frame = xsum.assign(item=xsum["bbcid"] + "|" + xsum["system"])
    out = replay_adaptive(frame, n_min=2, k=2, n_max=3, order="worker_id")
    labelled = frame.dropna(subset=["label"]).sort_values(["item", "worker_id"])
    assert out["n_labels"] == len(labelled) == 5564  # yes 582 + no 4982; the 33 NULLs left out
    # independently: an item with three labels whose first two agree saves its third
    per_item = labelled.groupby("item")["label"].agg(list)
    saved = sum(1 for labels in per_item if len(labels) == 3 and labels[0] == labels[1])
    assert out["labels_saved"] == saved == out["n_items_closed_early"]
    # the reference equals the full majority wherever the first two agree and the full set has a majority
    disagree_on_first_two_but_both_full = sum(1 for labels in per_item if len(labels) == 3 and labels[0] != labels[1])
    assert out["n_items_compared"] >= disagree_on_first_two_but_both_full
    mismatches = sum(
        1
        for labels in per_item
        if len(labels) == 3 and labels[0] == labels[1] and pd.Series(labels).mode().tolist() != [labels[0]]
    )
    assert out["n_reference_agrees"] == out["n_items_compared"] - mismatches == out["n_items_compared"]
    assert 0.25 < out["share_labels_saved"] < 1 / 3  # at most one label in three can be saved


def test_random_orders_are_seeded_and_reported_beside_the_collected_one(xsum):
    frame = xsum.assign(item=xsum["bbcid"] + "|" + xsum["system"])
    first = replay_adaptive(frame, n_min=2, k=2, n_max=3, order="worker_id", n_orders=20, seed=7)
    again = replay_adaptive(frame, n_min=2, k=2, n_max=3, order="worker_id", n_orders=20, seed=7)
    assert first["random_orders"] == again["random_orders"]
    assert 0 < first["random_orders"]["min_share_reference_agrees"] <= 1
