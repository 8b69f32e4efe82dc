"""The issue's done-when on the XSum demo: the adjudication queue under the default rule holds
exactly the items whose exported labels are not unanimous, counted independently with pandas."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from annotation.exports import export_chunks
from annotation.selectors.adjudication import queue_item_ids

pytestmark = pytest.mark.django_db


def test_xsum_queue_is_the_items_without_unanimity(xsum_study):
    assert xsum_study.adjudication_rule == "no_unanimity"
    exported = pd.read_csv(io.StringIO("".join(export_chunks(xsum_study, "csv"))), dtype=str)
    answered = exported[exported["status"] != "skipped"]
    per_item = answered.groupby("item")["label"].agg(["nunique", "size"])
    expected = set(per_item.index[(per_item["size"] >= 2) & (per_item["nunique"] > 1)])
    queue = set(xsum_study.items.filter(pk__in=queue_item_ids(xsum_study)).values_list("external_id", flat=True))
    assert queue == expected
    assert len(queue) == 118  # issue 14: "the disagreement queue (118 items)"
    assert exported["adjudicated_label"].fillna("").eq("").all()  # nobody adjudicated yet
