"""The label and item frames read the same rows whichever way they are read (arrays on PostgreSQL).

``metaeval.selectors.read_frames`` reads each query's columns as arrays on PostgreSQL and its rows
through the ORM elsewhere; on PostgreSQL both ways are compared here on strings a text format
could mangle (quotes, commas, line breaks, "NA", leading zeros, spaces, non-ASCII, empty).
The label frame joins the answers to their assignments itself: its labels are compared with the
ORM's query of the answers a report counts.
"""

from __future__ import annotations

import pandas as pd
import pytest

from annotation.models import Item
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval import selectors
from metaeval.selectors import ITEM_COLUMNS, LABEL_COLUMNS
from tests.conftest import jsonl, verification_item

TRICKY = ['say "hi", then', "two\nlines", "NA", "007", "  spaced  ", "ünïcødé ✓", "null", "a\r\nb", "", "N/A,"]


@pytest.fixture
def tricky_study(db):
    study = create_study(slug="tricky", name="Tricky", kind="verification", annotators_per_item=2)
    items = [
        verification_item(
            f"{n:03d}{text}" if text else f"{n:03d}", domain=text, response_id=text, gold="supported" if n % 3 else ""
        )
        for n, text in enumerate(TRICKY)
    ]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    labels = [
        {"item": item["id"], "annotator": who, "label": label}
        for item in items
        for who, label in (("w1", "supported"), ("w2", "contradicted"))
    ]
    import_annotations(study=study, stream=jsonl(*labels), fmt="jsonl")
    return study


def _by_orm(rows, columns):
    return pd.DataFrame.from_records(list(rows), columns=columns)


def test_the_label_and_item_frames_equal_the_orms_rows(tricky_study, monkeypatch):
    copied = selectors.label_frame(tricky_study, include_gold=True)
    items = selectors.item_frame(tricky_study)
    monkeypatch.setattr(selectors, "read_frames", lambda *reads: [_by_orm(read.rows, read.columns) for read in reads])
    pd.testing.assert_frame_equal(copied, selectors.label_frame(tricky_study, include_gold=True))
    pd.testing.assert_frame_equal(items, selectors.item_frame(tricky_study))
    assert len(copied) == 2 * len(TRICKY) and list(copied.columns) == LABEL_COLUMNS
    assert list(items.columns) == ITEM_COLUMNS
    stored = set(Item.objects.filter(study=tricky_study).values_list("external_id", "domain"))
    assert set(zip(items["item"], items["domain"], strict=True)) == stored
    assert {"003007", "002NA", "002"} & set(items["item"]) == {"003007", "002NA"}  # leading zeros, no NA guessing
    assert any('"' in d for d in items["domain"]) and any("\n" in d for d in items["domain"])
    assert items["position"].dtype == "int64"


def test_an_empty_study_reads_as_empty_frames_with_their_columns(db):
    study = create_study(slug="empty", name="Empty", kind="verification")
    assert selectors.label_frame(study).empty and list(selectors.label_frame(study).columns) == LABEL_COLUMNS
    assert selectors.item_frame(study).empty and list(selectors.item_frame(study).columns) == ITEM_COLUMNS
    assert not Item.objects.filter(study=study).exists()


def test_the_same_labels_give_the_same_intervals_whatever_order_they_came_in(db):
    """The bootstrap resamples items by their place in the table: the labels are read in the items' import
    order, so the same labels imported in another order (or moved on disk) give the same intervals."""
    from metaeval.reporting import ReportOptions, build_report

    choices = ["supported", "contradicted", "inconclusive"]
    labels = [
        {"item": f"c-{n:02d}", "annotator": who, "label": choices[(n * (k + 1)) % 3 if n % 4 else 0]}
        for n in range(60)
        for k, who in enumerate(("w1", "w2", "w3"))
    ]
    reports = []
    for slug, order in (("in-order", labels), ("reversed", labels[::-1])):
        study = create_study(slug=slug, name=slug, kind="verification", annotators_per_item=3)
        import_items(study=study, stream=jsonl(*(verification_item(f"c-{n:02d}") for n in range(60))), fmt="jsonl")
        import_annotations(study=study, stream=jsonl(*order), fmt="jsonl")
        reports.append(build_report(study, ReportOptions(n_resamples=200))["agreement"])
    assert reports[0] == reports[1]
    assert reports[0]["fleiss_kappa"]["ci"] is not None


def test_a_former_members_labels_carry_the_name_exports_give_them(tricky_study):
    from annotation.lib.pseudonyms import pseudonyms
    from annotation.models import StudyMember

    member = StudyMember.objects.get(study=tricky_study, pseudonym="w2")
    user_id = member.user_id
    member.delete()
    frame = selectors.label_frame(tricky_study, include_gold=True)
    assert set(frame["annotator"]) == {"w1", f"user-{user_id}"}
    assert pseudonyms(tricky_study)[user_id] == f"user-{user_id}"  # as exports and pages name them
    first = frame.loc[frame["item"] == frame["item"].iloc[0], "annotator"].tolist()
    assert first == sorted(first)  # each item's labels by name


def test_the_label_frame_holds_exactly_the_answers_a_report_counts(tricky_study):
    """Answers on skipped assignments are left out; every other answer is there once, with its assignment's side."""
    from annotation.models import Annotation, Assignment

    skipped = Assignment.objects.filter(study=tricky_study, annotation__isnull=False).order_by("pk").first()
    Assignment.objects.filter(pk=skipped.pk).update(status=Assignment.Status.SKIPPED)
    Assignment.objects.filter(study=tricky_study).exclude(pk=skipped.pk).update(left_system="b")
    frame = selectors.label_frame(tricky_study, include_gold=True)
    counted = selectors._annotations(tricky_study).values_list(
        "assignment__item__external_id", "assignment__annotator__study_memberships__pseudonym", "label"
    )
    assert Annotation.objects.filter(assignment=skipped).exists()
    assert sorted(zip(frame["item"], frame["annotator"], frame["label"], strict=True)) == sorted(counted)
    assert len(frame) == 2 * len(TRICKY) - 1 and set(frame["left_system"]) == {"b"}
