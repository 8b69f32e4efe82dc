"""The issue's done-when on the XSum demo: the adjudication queue under the default rule holds
exactly the items whose exported labels are not unanimous, counted independently with pandas."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from annotation.adjudication.selectors import queue_item_ids
from annotation.transfer.exports import export_chunks

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


def test_resolving_the_xsum_queue_reaches_export_and_report(xsum_study, demo_researcher):
    """Every queue item adjudicated (here: the label of the item's first annotator): the export
    carries 118 adjudicated items, the report counts them and scores verifiers against them."""
    from annotation.adjudication.services import adjudicate, verdict_for
    from annotation.models import Annotation
    from metaeval.reporting import ReportOptions, build_report

    queue = queue_item_ids(xsum_study)
    first = {}
    for item_id, label in (
        Annotation.objects.filter(assignment__item_id__in=queue)
        .order_by("assignment__slot")
        .values_list("assignment__item_id", "label")
    ):
        first.setdefault(item_id, label)
    for item in xsum_study.items.filter(pk__in=queue):
        adjudicate(item=item, adjudicator=demo_researcher, verdict=verdict_for(xsum_study, label=first[item.pk]))
    assert queue_item_ids(xsum_study) == queue  # adjudication never changes the annotations
    exported = pd.read_csv(io.StringIO("".join(export_chunks(xsum_study, "csv"))), dtype=str)
    adjudicated = exported[exported["adjudicated_label"].fillna("") != ""]
    assert adjudicated["item"].nunique() == 118
    from metaeval.models import Prediction
    from metaeval.verifiers.services import create_verifier

    verifier = create_verifier(study=xsum_study, name="overlap", kind="baseline_overlap")
    for item in xsum_study.items.all()[:20]:
        Prediction.objects.create(verifier=verifier, item=item, label="factual", parse_status="ok", cache_key="k")
    report = build_report(xsum_study, ReportOptions(n_resamples=0))
    assert report["adjudication"]["items_adjudicated"] == 118
    assert report["adjudication"]["reference_rule"] == "adjudicated_else_majority"
    assert "adjudicated labels where given (118 items)" in report["verifiers"]["overlap"]["reference"]
