"""The label and item frames read the same rows whichever way they are read (COPY on PostgreSQL).

``metaeval.selectors._frame`` reads a query through ``COPY ... TO STDOUT`` on PostgreSQL and
through the ORM elsewhere; on PostgreSQL both ways are compared here on strings CSV could
mangle (quotes, commas, line breaks, "NA", leading zeros, spaces, non-ASCII, empty).
"""

from __future__ import annotations

import pandas as pd
import pytest

from annotation.models import Item
from annotation.services import create_study, import_annotations, import_items
from metaeval import selectors
from metaeval.selectors import ITEM_COLUMNS, LABEL_COLUMNS

from ..conftest import jsonl, verification_item

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
    monkeypatch.setattr(selectors, "_frame", lambda rows, columns, numbers: _by_orm(rows, columns))
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
