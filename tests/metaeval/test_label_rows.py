"""The labels as codes (metaeval.label_rows) give what their frame gives: the same table, counts and domains.

The report's first sections are computed from the codes and every later section from the
frame, so both must agree exactly: the same items and annotators in the same order (the
bootstrap resamples items by their place in the table, pairwise statistics list annotator
pairs by theirs), the same labels left off the scale, the same counts per item and annotator.
Compared on the demo's real studies (XSum's many crowd workers, Factcheck-GPT's gold items,
FActScore's preferences) and on a preference study with labels off the scale.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval import selectors
from metaeval.reporting.agreement import agreement_sections, agreement_table, categories_for
from metaeval.reporting.options import ReportOptions
from tests.conftest import jsonl, preference_item


@pytest.fixture
def off_scale_study(db):
    """Labels given out of name order (w2 and w3 first), some of them `both_bad`, off the 5-point scale."""
    study = create_study(
        slug="off-scale", name="Off scale", kind="preference", both_bad_allowed=True, systems=["a", "b"]
    )
    items = [preference_item(f"p-{n}", domain=("x", "y")[n % 2], lists={"a": ["x"], "b": ["y"]}) for n in range(6)]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    given = {
        "p-0": {"w3": "tie", "w2": "both_bad"},
        "p-1": {"w1": "a_strong", "w2": "a_slight", "w3": "a_strong"},
        "p-2": {"w2": "both_bad", "w3": "both_bad"},
        "p-3": {"w1": "b_slight", "w3": "tie"},
        "p-5": {"w3": "b_strong", "w1": "b_strong", "w2": "tie"},
    }
    labels = [
        {"item": item, "annotator": who, "label": label} for item, of in given.items() for who, label in of.items()
    ]
    import_annotations(study=study, stream=jsonl(*labels), fmt="jsonl")
    return study


def _assert_same_table(from_codes, from_frame) -> None:
    assert from_codes.item_index.equals(from_frame.item_index)
    assert from_codes.item_index.dtype == from_frame.item_index.dtype
    assert list(from_codes.annotator_index) == list(from_frame.annotator_index)
    assert from_codes.categories == from_frame.categories
    assert from_codes.item_columns == from_frame.item_columns
    for name in ("item_code", "annotator_code", "label_code", "counts"):
        np.testing.assert_array_equal(getattr(from_codes, name), getattr(from_frame, name), err_msg=name)


def _compare(study, *, include_gold: bool) -> None:
    rows = selectors.label_rows(study)
    rows = rows if include_gold else rows.without_gold()
    frame = rows.frame()
    pd.testing.assert_frame_equal(frame, selectors.label_frame(study, include_gold=include_gold))
    cats = categories_for(study)
    table, n_off_scale, off_scale = rows.rating_table(cats)
    expected_table, expected_off = agreement_table(frame, study)
    _assert_same_table(table, expected_table)
    assert n_off_scale == expected_off
    assert off_scale == sorted({label for label in frame["label"] if label not in cats})
    per_item = rows.labels_per_item()
    pd.testing.assert_series_equal(
        per_item.sort_index(), frame.groupby("item").size().sort_index(), check_names=False, check_index_type=False
    )
    domains = frame.drop_duplicates("item").set_index("item")["domain"]
    assert list(rows.domains_of(table.item_index)) == list(domains.reindex(table.item_index))
    assert rows.n_items() == frame["item"].nunique()
    assert rows.per_annotator() == sorted(frame["annotator"].value_counts().items())


@pytest.mark.parametrize("slug", ["xsum-factuality", "factcheck-gpt", "factscore-pref"])
@pytest.mark.parametrize("include_gold", [True, False])
def test_the_codes_of_a_real_studys_labels_give_their_frames_table(demo, db, slug, include_gold):
    _compare(demo[slug], include_gold=include_gold)


def test_labels_off_the_scale_and_out_of_name_order_give_the_frames_table(off_scale_study):
    _compare(off_scale_study, include_gold=True)
    table, n_off_scale, off_scale = selectors.label_rows(off_scale_study).rating_table(categories_for(off_scale_study))
    assert (n_off_scale, off_scale) == (3, ["both_bad"])
    # first appearance, as build_table numbers them: w3 and w2 rate p-0 (only w3 on the scale), w1 comes in at p-1
    assert list(table.annotator_index) == ["w3", "w1", "w2"]
    assert list(table.item_index) == ["p-0", "p-1", "p-3", "p-5"]


def test_the_agreement_sections_are_the_same_from_the_codes_as_from_the_frame(off_scale_study, demo, db):
    options = ReportOptions(by_domain=True, binary=True, n_resamples=200)
    for study in (off_scale_study, demo["xsum-factuality"]):
        rows = selectors.label_rows(study).without_gold()
        assert agreement_sections(rows, study, options) == agreement_sections(rows.frame(), study, options)
