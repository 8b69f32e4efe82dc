"""The report's one read of the predictions (issue 35): ``current_predictions`` reads columns and shares the items'
text, ``verifier_verdicts`` derives from it; both equal what the ORM's rows give (the latest prediction per
verifier and item), on both databases, and repeated text is one object per value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from annotation.models import Item
from metaeval.models import Prediction, Verifier
from metaeval.selectors import label_rows
from metaeval.verifiers.selectors import PREDICTION_COLUMNS, current_predictions, rationales, verifier_verdicts
from metaeval.verifiers.services import import_predictions
from tests.conftest import jsonl
from tests.verifiers_run.conftest import add_items, claim_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def rerun(claims_study):
    """Two imported verifiers, and an LLM verifier whose items were predicted twice (an edit: a new cache key)."""
    add_items(
        claims_study,
        [claim_item(f"r{n}", f"Response claim {n}.", system="sys-a", response_id="resp-1") for n in range(3)],
    )
    import_predictions(
        study=claims_study,
        fmt="jsonl",
        stream=jsonl(
            *({"item": f"c{n}", "verifier": "zeta", "label": "supported", "score": n / 7} for n in range(1, 7)),
            *(
                {"item": f"r{n}", "verifier": "alpha", "label": "contradicted", "rationale": f"because {n}"}
                for n in range(3)
            ),
        ),
    )
    llm = Verifier.objects.create(study=claims_study, name="llm", kind=Verifier.Kind.IMPORTED)
    items = {item.external_id: item for item in Item.objects.filter(study=claims_study)}
    for key, label in (("old", "supported"), ("new", "inconclusive")):
        for name in ("c2", "r1"):
            Prediction.objects.create(
                verifier=llm,
                item=items[name],
                label=label,
                raw_label=label,
                parse_status="ok",
                cache_key=key,
                tokens_in=3,
            )
    Prediction.objects.create(verifier=llm, item=items["c3"], error="timeout", cache_key="new", latency_ms=9)
    Prediction.objects.create(
        verifier=llm, item=items["c4"], parse_status="unparseable", raw_label="hm", cache_key="new"
    )
    return claims_study


def orm_predictions(study) -> pd.DataFrame:
    """What the report read before issue 35: the ORM's rows, latest per (verifier, item)."""
    rows = (
        Prediction.objects.filter(verifier__study=study)
        .order_by("verifier_id", "item_id", "-pk")
        .values_list(
            "verifier_id", "item__external_id", "label", "score", "parse_status", "error", "tokens_in",
            "tokens_out", "item__response_id", "item__system", "pk",
        )
    )  # fmt: skip
    frame = pd.DataFrame.from_records(list(rows), columns=PREDICTION_COLUMNS[:-1])  # all but item_row
    return frame.drop_duplicates(subset=["verifier_id", "item"], keep="first").reset_index(drop=True)


def assert_rows_of(read: pd.DataFrame, items: pd.DataFrame) -> None:
    """Each prediction's ``item_row`` is its item's row in ``items``."""
    assert read["item_row"].dtype == np.int64
    assert items["item"].to_numpy(dtype=object)[read["item_row"].to_numpy()].tolist() == read["item"].tolist()


def test_the_column_read_equals_the_orms_latest_prediction_per_verifier_and_item(rerun):
    from metaeval.verifiers.selectors import study_items

    read = current_predictions(rerun)
    expected = orm_predictions(rerun)
    pd.testing.assert_frame_equal(read.drop(columns="item_row"), expected, check_dtype=False)
    assert_rows_of(read, study_items(rerun))
    assert len(read) == 6 + 3 + 4  # the edited verifier's two items once each, with the newer label
    newer = read[read["item"].isin(["c2", "r1"]) & (read["verifier_id"] == Verifier.objects.get(name="llm").pk)]
    assert newer["label"].tolist() == ["inconclusive", "inconclusive"]
    items = label_rows(rerun).items
    with_items = current_predictions(rerun, items)  # the study frame's items: the same rows
    pd.testing.assert_frame_equal(with_items.drop(columns="item_row"), expected, check_dtype=False)
    assert_rows_of(with_items, items)
    shuffled = items.sample(frac=1, random_state=3)  # rows in another order: item_row follows them
    assert_rows_of(current_predictions(rerun, shuffled), shuffled)


def test_repeated_text_is_one_object_per_value_and_the_items_text_is_shared(rerun):
    from metaeval.selectors import _interned

    labels = ["".join(["sup", "ported"]) for _ in range(3)] + ["".join(["in", "conclusive"]), None]
    assert len({id(value) for value in labels[:3]}) == 3
    interned = _interned(labels)
    assert interned == labels and len({id(value) for value in interned[:3]}) == 1
    items = label_rows(rerun).items
    read = current_predictions(rerun, items)
    shared = {id(value) for value in items["item"].array}
    assert len(read) == 13 and all(id(value) in shared for value in read["item"].array)


def test_the_verdicts_equal_the_orms_by_verifier_name(rerun):
    verdicts = verifier_verdicts(rerun)
    rows = (
        Prediction.objects.filter(verifier__study=rerun)
        .order_by("verifier__name", "item_id", "-pk")
        .values_list("verifier__name", "item__external_id", "label")
    )
    frame = pd.DataFrame.from_records(list(rows), columns=["verifier", "item", "label"]).drop_duplicates(
        ["verifier", "item"]
    )
    expected = {str(name): group.set_index("item")["label"] for name, group in frame.groupby("verifier", sort=True)}
    assert list(verdicts) == list(expected) == ["alpha", "llm", "zeta"]
    for name, series in expected.items():
        pd.testing.assert_series_equal(verdicts[name], series, check_dtype=False, check_names=False)
    assert verifier_verdicts(rerun, current_predictions(rerun)).keys() == verdicts.keys()


def test_rationales_are_read_for_the_rows_asked_for(rerun):
    alpha = Prediction.objects.filter(verifier__name="alpha").order_by("pk")
    pks = [prediction.pk for prediction in alpha]
    assert rationales(pks[:2]) == {pks[0]: "because 0", pks[1]: "because 1"}
    assert rationales([]) == {}


def test_a_study_without_predictions_reads_an_empty_frame_and_no_verdicts(claims_study):
    read = current_predictions(claims_study)
    assert list(read.columns) == PREDICTION_COLUMNS and read.empty
    assert verifier_verdicts(claims_study) == {}
    assert np.dtype(read["pk"].dtype) == np.int64
