"""The faster reads and steps of a big report (issue 35) give exactly what their former formulation gave.

Two pieces were rewritten for speed, and each is compared here with the way it was computed
before (kept below as the reference), on the demo's real studies (XSum's crowd, Factcheck-GPT's
gold items, FActScore's preferences) and on seeded data:

- the label read on SQLite (``selectors._fetched``: one ``fetchall`` of the cursor, not the
  queryset's iterator), and on either database the label rows against an independent ORM read
  of the same labels;
- the per-annotator quality's label codes (``stats.annotator_quality``: one index lookup per
  column, not ``Series.map`` of a dict), with labels off the categories, missing references and
  an annotator labelling an item twice.
"""

from __future__ import annotations

import importlib
from collections.abc import Hashable

import numpy as np
import pandas as pd
import pytest
from django.db import connection

from annotation.models import Annotation, Assignment
from metaeval import selectors, stats
from metaeval.label_rows import LabelRows
from metaeval.study_frame import study_frame

# the module, not the function of the same name that metaeval.stats exports
quality_module = importlib.import_module("metaeval.stats.annotator_quality")

DEMO = ["xsum-factuality", "factcheck-gpt", "factscore-pref"]


# --- the label read ---------------------------------------------------------------------------


def _queryset_rows(read: selectors.FrameRead) -> list[tuple]:
    """The former read: the queryset's own iterator (Django's chunks and converters)."""
    return list(read.rows)


def _label_rows_equal(new: LabelRows, old: LabelRows) -> None:
    pd.testing.assert_frame_equal(new.items, old.items)
    for name in ("place", "annotator"):
        np.testing.assert_array_equal(getattr(new, name), getattr(old, name), err_msg=name)
    for name in ("annotator_names", "label", "left_system"):
        assert list(getattr(new, name)) == list(getattr(old, name)), name


@pytest.mark.parametrize("slug", DEMO)
def test_the_label_read_gives_the_querysets_rows(demo, db, slug, monkeypatch):
    study = demo[slug]
    new = selectors.label_rows(study)
    assert len(new.items) > 0 and (len(new) > 0 or slug != "xsum-factuality")  # the others' demos have no labels
    if connection.vendor == "postgresql":  # its reads are column arrays (snapshot_reads): checked below
        return
    monkeypatch.setattr(selectors, "_fetched", _queryset_rows)
    _label_rows_equal(new, selectors.label_rows(study))


@pytest.mark.parametrize("slug", DEMO)
def test_the_label_rows_are_every_answered_assignments_label(demo, db, slug):
    """Against an independent read: one ORM query over the joins, sorted the obvious way."""
    study = demo[slug]
    names = selectors.pseudonyms(study)
    expected = sorted(
        (item, names[user], label, left)
        for item, user, label, left in Annotation.objects.filter(study=study)
        .exclude(assignment__status=Assignment.Status.SKIPPED)
        .values_list("assignment__item__external_id", "assignment__annotator_id", "label", "assignment__left_system")
    )
    frame = selectors.label_rows(study).frame()
    got = sorted(zip(frame["item"], frame["annotator"], frame["label"], frame["left_system"], strict=True))
    assert got == expected


def test_a_flag_read_raw_is_the_same_bool_column(demo, db):
    """``is_check`` comes back from SQLite as 0/1 without the ORM's converter: the frame's column is bool."""
    study = demo["factcheck-gpt"]
    read = selectors._item_read(study)
    frame = selectors.read_frames(read)[0]
    assert frame["is_check"].dtype == bool
    expected = dict(study.items.values_list("pk", "is_check"))
    assert dict(zip(frame["id"].tolist(), frame["is_check"].tolist(), strict=True)) == expected


# --- the per-annotator quality's codes ---------------------------------------------------------


def _old_aligned(labels: pd.Series | None, items: pd.Index, code_of: dict[Hashable, int]) -> np.ndarray:
    if labels is None:
        return np.full(len(items), -1)
    codes = labels.map(code_of).dropna()
    return codes.reindex(items).fillna(-1).to_numpy().astype(int)


def _old_label_grid(rows: pd.DataFrame, code_of: dict[Hashable, int]) -> tuple[np.ndarray, pd.Index, pd.Index]:
    item_code, items = pd.factorize(rows["item"], sort=True)
    annotator_code, annotators = pd.factorize(rows["annotator"], sort=True)
    cell = item_code.astype(np.int64) * len(annotators) + annotator_code
    _, first = np.unique(cell, return_index=True)
    grid = np.full((len(items), len(annotators)), -1)
    grid.flat[cell[first]] = rows["label"].map(code_of).to_numpy()[first]
    return grid, pd.Index(items), pd.Index(annotators)


def _seeded(seed: int) -> tuple[pd.DataFrame, list[str], pd.Series, pd.Series]:
    """Labels with some off the categories and repeats, a reference with gaps and an unknown label, gold."""
    rng = np.random.default_rng(seed)
    cats = ["supported", "contradicted", "inconclusive"]
    n_items = 400
    rows = [
        (f"i{item}", f"w{who}", str(rng.choice([*cats, "other"], p=[0.45, 0.3, 0.2, 0.05])))
        for item in range(n_items)
        for who in rng.choice(6, size=int(rng.integers(1, 5)), replace=False)
    ]
    rows += [(item, who, cats[0]) for item, who, _ in rows[::17]]  # an annotator labelling an item twice
    frame = pd.DataFrame(rows, columns=["item", "annotator", "label"])
    reference = pd.Series(
        rng.choice([*cats, "unknown"], size=n_items - 50), index=[f"i{n}" for n in range(50, n_items)], dtype=object
    )
    reference.iloc[::11] = np.nan
    gold = pd.Series(rng.choice(cats, size=40), index=[f"i{n}" for n in rng.choice(n_items, 40, replace=False)])
    return frame, cats, reference, gold


def _demo_inputs(study) -> tuple[pd.DataFrame, list[str], pd.Series, pd.Series]:
    frame = study_frame(study)
    inputs = frame.reference_inputs
    gold = inputs.items.set_index("item")["gold_label"]
    return inputs.labels, list(inputs.categories), frame.reference.labels, gold[gold != ""]


def _cases(demo):
    yield from (_seeded(seed) for seed in (1, 2, 3))
    yield _demo_inputs(demo["xsum-factuality"])  # the demo study with human labels


def test_the_quality_codes_are_the_former_maps(demo, db):
    for labels, cats, reference, gold in _cases(demo):
        code_of = {c: i for i, c in enumerate(cats)}
        rows = labels.loc[labels["label"].isin(cats), ["item", "annotator", "label"]]
        grid, items, annotators = quality_module._label_grid(rows, code_of)
        old_grid, old_items, old_annotators = _old_label_grid(rows, code_of)
        np.testing.assert_array_equal(grid, old_grid)
        assert items.equals(old_items) and annotators.equals(old_annotators)
        assert (grid >= 0).any()
        for given in (reference, gold, None):
            np.testing.assert_array_equal(
                quality_module._aligned(given, items, code_of), _old_aligned(given, items, code_of)
            )


def test_annotator_quality_is_the_former_computation(demo, db, monkeypatch):
    for labels, cats, reference, gold in _cases(demo):
        fit = stats.dawid_skene(labels.loc[labels["label"].isin(cats)], cats)
        new = stats.annotator_quality(labels, cats, reference, gold=gold, dawid_skene=fit, n_resamples=50)
        with monkeypatch.context() as patched:
            patched.setattr(quality_module, "_aligned", _old_aligned)
            patched.setattr(quality_module, "_label_grid", _old_label_grid)
            old = stats.annotator_quality(labels, cats, reference, gold=gold, dawid_skene=fit, n_resamples=50)
        assert stats.json_ready(new) == stats.json_ready(old)
        assert new["annotators"]


def test_codes_of_no_categories_are_all_missing():
    assert quality_module._codes(np.array(["a", "b"], dtype=object), {}).tolist() == [-1, -1]


# --- the disagreement list's order -------------------------------------------------------------

disagreements_module = importlib.import_module("metaeval.reporting.disagreements")


def _seeded_labels(seed: int) -> pd.DataFrame:
    """Up to 4 annotators per item, some positions shared by two items, an annotator labelling an item twice."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "item": f"c-{i}",
            "annotator": f"w{a}",
            "label": str(rng.choice(["s", "c", "i"])),
            "domain": "d",
            "position": int(i) // 2,
        }
        for i in range(300)
        for a in rng.choice(4, size=int(rng.integers(1, 5)), replace=False)
    ]
    frame = pd.DataFrame(rows)
    return pd.concat([frame, frame.iloc[::23].assign(label="s")], ignore_index=True)


def test_the_disagreement_list_is_the_same_with_or_without_the_sort(demo, db, monkeypatch):
    agreed = study_frame(demo["xsum-factuality"]).agreed
    seeded = [_seeded_labels(seed) for seed in (1, 2)]
    in_order = [frame.sort_values(["position", "item", "annotator"], kind="stable") for frame in seeded]
    assert disagreements_module._in_order(agreed)  # the study frame's order: the sort is left out
    assert all(disagreements_module._in_order(frame) for frame in in_order)
    assert not any(disagreements_module._in_order(frame) for frame in seeded)
    last = len(in_order[0]) - 1
    swapped = in_order[0].iloc[[last, *range(1, last), 0]]  # the first and the last row swapped
    assert not disagreements_module._in_order(swapped)
    frames = [agreed, *seeded, *in_order, swapped]
    listed = [disagreements_module.disagreements(frame) for frame in frames]
    monkeypatch.setattr(disagreements_module, "_in_order", lambda rows: False)  # the former: always sorted
    assert listed == [disagreements_module.disagreements(frame) for frame in frames]
    assert all(listed) and len(listed[0]) > 100


def test_rows_with_a_missing_key_are_left_to_the_sort():
    frame = pd.DataFrame({"position": [1, 1], "item": ["a", None], "annotator": ["w1", "w1"]})
    assert not disagreements_module._in_order(frame)
    assert not disagreements_module._in_order(frame.assign(item=["a", float("nan")]))
