"""Annotation export (docs/formats.md): round trip, columns, pseudonyms, CSV injection, streaming."""

from __future__ import annotations

import csv
import inspect
import io
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.models.query import QuerySet
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.lib import csvsafe
from annotation.models import Annotation, Assignment, Item, Study, StudyMember
from annotation.studies.services import create_study
from annotation.transfer.exports import export_chunks
from annotation.transfer.selectors import EXPORT_COLUMNS, export_rows
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from annotation.workbench.answers import AnswerValues, record_answer
from tests.conftest import jsonl, preference_item, verification_item

pytestmark = pytest.mark.django_db

VOLATILE = {"created_at", "submitted_at", "study"}

V_ITEMS = [
    verification_item(
        f"c-{n}",
        evidence=[
            {"text": f"Passage {n}.1", "title": "A", "url": "https://a.example/", "source_type": "news"},
            {"text": f"Passage {n}.2", "title": "B", "url": "https://b.example/", "source_type": "wiki"},
        ],
    )
    for n in range(1, 4)
]
V_ANNOTATIONS: list[dict[str, Any]] = [
    {
        "item": "c-1",
        "annotator": "w1",
        "label": "Supported",
        "justification": 'Both passages agree, "clearly".',
        "active_ms": 4200,
        "evidence": [
            {"index": 0, "judgement": "support", "useful": True},
            {"index": 1, "judgement": "irrelevant", "useful": False},
        ],
    },
    {"item": "c-1", "annotator": "w2", "label": "contradicted", "active_ms": 0},
    {"item": "c-1", "annotator": "w3", "label": "inconclusive", "justification": "Line one.\nLine two, with a comma."},
    {"item": "c-2", "annotator": "w2", "label": "supported", "raw_label": "SUP"},
    {
        "item": "c-3",
        "annotator": "w1",
        "label": "inconclusive",
        "choice": "inconclusive",
        "evidence": [{"index": 1, "judgement": "not_support", "useful": True}],
    },
]
P_ITEMS = [preference_item(f"p-{n}") for n in range(1, 3)]
P_ANNOTATIONS: list[dict[str, Any]] = [
    {
        "item": "p-1",
        "annotator": "w1",
        "preferred": "veriscore",
        "strength": "strong",
        "left_system": "safe",
        "choice": "right_strong",
        "justification": "List 2 covers more.",
        "active_ms": 15000,
    },
    {"item": "p-1", "annotator": "w2", "label": "tie", "justification": "Same facts."},
    {
        "item": "p-1",
        "annotator": "w3",
        "preferred": "safe",
        "strength": "slight",
        "left_system": "veriscore",
        "choice": "right_slight",
        "active_ms": 9000,
    },
    {"item": "p-2", "annotator": "w1", "label": "b_strong", "justification": "Fewer errors."},
]


def make_study(slug: str, kind: str, items: list[dict]) -> Study:
    study = create_study(
        slug=slug,
        name=slug,
        kind=kind,
        annotators_per_item=3,
        evidence_judgements=kind == "verification",
        justification_required=kind == "preference",
    )
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    study.refresh_from_db()
    return study


@pytest.fixture
def sources(db) -> dict[str, Study]:
    verification = make_study("v-src", "verification", V_ITEMS)
    import_annotations(study=verification, stream=jsonl(*V_ANNOTATIONS), fmt="jsonl")
    preference = make_study("p-src", "preference", P_ITEMS)
    import_annotations(study=preference, stream=jsonl(*P_ANNOTATIONS), fmt="jsonl")
    return {"verification": verification, "preference": preference}


def export(slug: str, fmt: str, tmp_path: Path) -> str:
    """Export with the management command to a file, check stdout says the same, return the text."""
    target = tmp_path / f"{slug}.{fmt}"
    err = io.StringIO()
    call_command("export_annotations", slug, "--format", fmt, "--output", str(target), stderr=err)
    assert str(target) in err.getvalue()
    assert not target.with_name(target.name + ".partial").exists()
    text = target.read_bytes().decode("utf-8")  # read_text would turn a lone \r into \n
    out = io.StringIO()
    call_command("export_annotations", slug, "--format", fmt, stdout=out)
    assert out.getvalue() == text
    return text


def parse(text: str, fmt: str) -> list[dict]:
    if fmt == "jsonl":
        return [json.loads(line) for line in text.splitlines() if line]
    return list(csv.DictReader(io.StringIO(text, newline="")))


def stable(rows: list[dict]) -> list[dict]:
    return [{name: value for name, value in row.items() if name not in VOLATILE} for row in rows]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("kind", ["verification", "preference"])
def test_export_round_trip(sources, tmp_path, kind, fmt):
    source = sources[kind]
    first_text = export(source.slug, fmt, tmp_path)
    first = parse(first_text, fmt)
    expected = len(V_ANNOTATIONS if kind == "verification" else P_ANNOTATIONS)
    assert len(first) == expected

    copy = make_study(f"{source.slug}-copy-{fmt}", kind, V_ITEMS if kind == "verification" else P_ITEMS)
    with (tmp_path / f"{source.slug}.{fmt}").open("rb") as stream:
        result = import_annotations(study=copy, stream=stream, fmt=fmt)
    assert (result.created, result.updated) == (expected, 0)
    second = parse(export(copy.slug, fmt, tmp_path), fmt)

    assert stable(second) == stable(first)
    assert {row["study"] for row in second} == {copy.slug}
    # Timestamps are exported as ISO 8601.
    for row in first:
        assert datetime.fromisoformat(row["created_at"]).tzinfo is not None
        assert datetime.fromisoformat(row["submitted_at"]).tzinfo is not None


def test_exported_timestamps_are_pythons_isoformat(sources):
    """Whichever side formats them (PostgreSQL does it in SQL), timestamps read as `isoformat()` of the stored value."""
    study = sources["verification"]
    annotations = list(Annotation.objects.filter(assignment__study=study).select_related("assignment").order_by("pk"))
    whole_second = datetime(2024, 2, 29, 23, 59, 59, tzinfo=timezone.get_fixed_timezone(0))
    with_micro = whole_second.replace(microsecond=70)
    Annotation.objects.filter(pk=annotations[0].pk).update(created_at=whole_second)
    Annotation.objects.filter(pk=annotations[1].pk).update(created_at=with_micro)
    Assignment.objects.filter(pk=annotations[1].assignment_id).update(submitted_at=None)
    expected = {
        (
            a.assignment.item.external_id,
            a.created_at.isoformat(),
            a.assignment.submitted_at.isoformat() if a.assignment.submitted_at else None,
        )
        for a in Annotation.objects.filter(assignment__study=study).select_related("assignment__item")
    }
    exported = {(row["item"], row["created_at"], row["submitted_at"]) for row in export_rows(study)}
    assert exported == expected
    assert {created for _, created, _ in exported} >= {"2024-02-29T23:59:59+00:00", "2024-02-29T23:59:59.000070+00:00"}
    assert any(submitted is None for _, _, submitted in exported)


def test_exported_values(sources, tmp_path):
    rows = {(row["item"], row["annotator"]): row for row in parse(export("v-src", "jsonl", tmp_path), "jsonl")}
    first = rows[("c-1", "w1")]
    assert (first["label"], first["raw_label"], first["active_ms"]) == ("supported", "Supported", 4200)
    assert first["evidence_judgements"] == V_ANNOTATIONS[0]["evidence"]
    assert first["justification"] == V_ANNOTATIONS[0]["justification"]
    assert (first["status"], first["source"], first["revision_count"]) == ("submitted", "import", 0)
    assert rows[("c-1", "w2")]["active_ms"] == 0
    assert rows[("c-2", "w2")]["raw_label"] == "SUP" and rows[("c-2", "w2")]["label"] == "supported"
    assert rows[("c-1", "w2")]["evidence_judgements"] is None
    pref = {(row["item"], row["annotator"]): row for row in parse(export("p-src", "csv", tmp_path), "csv")}
    row = pref[("p-1", "w1")]
    assert (row["left_system"], row["right_system"], row["preferred_system"], row["strength"], row["label"]) == (
        "safe",
        "veriscore",
        "veriscore",
        "strong",
        "a_strong",
    )
    assert (row["choice"], row["active_ms"]) == ("right_strong", "15000")
    tie = pref[("p-1", "w2")]
    assert (tie["label"], tie["preferred_system"], tie["strength"]) == ("tie", "", "")
    assert {tie["left_system"], tie["right_system"]} == {"veriscore", "safe"}


def test_rows_are_in_item_then_slot_order(sources):
    rows = list(export_rows(sources["verification"]))
    assert [(row["item"], row["annotator"]) for row in rows] == [
        (row["item"], row["annotator"]) for row in V_ANNOTATIONS
    ]


def test_columns_are_those_of_the_design(sources, tmp_path):
    design = {
        "study",
        "item",
        "domain",
        "annotator",
        "label",
        "raw_label",  # who labelled what
        "left_system",
        "right_system",  # shown order
        "created_at",
        "submitted_at",
        "active_ms",  # timings
        "revision_count",
    }
    assert design <= set(EXPORT_COLUMNS)
    assert len(EXPORT_COLUMNS) == len(set(EXPORT_COLUMNS))
    text = export("p-src", "csv", tmp_path)
    assert next(csv.reader(io.StringIO(text))) == EXPORT_COLUMNS
    for row in parse(export("p-src", "jsonl", tmp_path), "jsonl"):
        assert list(row) == EXPORT_COLUMNS


def test_annotators_appear_by_pseudonym_never_username(loaded_verification_study, annotator, tmp_path):
    study = loaded_verification_study
    item = Item.objects.get(study=study, external_id="c-3")
    assignment = Assignment.objects.create(
        study=study,
        item=item,
        annotator=annotator,
        slot=2,
        max_slots=3,
        status="active",
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )
    record_answer(assignment=assignment, values=AnswerValues(label="contradicted"), source=Annotation.Source.WEB)
    record_answer(assignment=assignment, values=AnswerValues(label="supported"), source=Annotation.Source.WEB)
    for fmt in ("csv", "jsonl"):
        text = export(study.slug, fmt, tmp_path)
        rows = parse(text, fmt)
        pseudonyms = set(StudyMember.objects.filter(study=study).values_list("pseudonym", flat=True))
        assert {row["annotator"] for row in rows} <= pseudonyms
        assert {row["annotator"] for row in rows} == {"w1", "w2", "ann-01"}
        mine = [row for row in rows if row["annotator"] == "ann-01"]
        assert len(mine) == 1 and str(mine[0]["revision_count"]) == "1" and mine[0]["source"] == "web"
        for username in (
            get_user_model().objects.filter(study_memberships__study=study).values_list("username", flat=True)
        ):
            assert username not in text, f"username {username!r} leaked into the {fmt} export"


# --- CSV formula injection --------------------------------------------------------------

DANGEROUS = {
    "item": "=1+1",
    "domain": "+cmd|' /C calc'!A0",
    "annotator": "@SUM(A1)",
    "raw_label": "-2+3",
    "justification": "\tTAB first",
    "choice": "\rCR first",
}


def test_csv_neutralises_formulas_and_jsonl_keeps_them(db, tmp_path):
    study = create_study(slug="inject", name="Injection", kind="verification")
    import_items(
        study=study,
        stream=jsonl(
            verification_item(DANGEROUS["item"], domain=DANGEROUS["domain"]), verification_item("safe-1", domain="a=b")
        ),
        fmt="jsonl",
    )
    import_annotations(
        study=study,
        stream=jsonl(
            {
                "item": DANGEROUS["item"],
                "annotator": DANGEROUS["annotator"],
                "label": "supported",
                "raw_label": DANGEROUS["raw_label"],
                "justification": DANGEROUS["justification"],
                "choice": DANGEROUS["choice"],
            },
            {"item": "safe-1", "annotator": "w1", "label": "supported", "justification": "1+1=2 is fine mid-text"},
        ),
        fmt="jsonl",
    )
    csv_rows = parse(export(study.slug, "csv", tmp_path), "csv")
    jsonl_rows = parse(export(study.slug, "jsonl", tmp_path), "jsonl")
    assert len(csv_rows) == len(jsonl_rows) == 2
    for column, value in DANGEROUS.items():
        assert csv_rows[0][column] == "'" + value, column
        assert jsonl_rows[0][column] == value, column
    assert csv_rows[1]["domain"] == "a=b" and csv_rows[1]["annotator"] == "w1"
    assert csv_rows[1]["justification"] == "1+1=2 is fine mid-text"
    assert csv_rows[0]["label"] == "supported"


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_every_formula_start_is_neutralised(start):
    assert csvsafe.neutralise_cell(start + "x") == "'" + start + "x"
    assert csvsafe.csv_cell(start + "x") == "'" + start + "x"
    assert csvsafe.neutralise_cell("x" + start) == "x" + start
    assert csvsafe.csv_cell(-5) == -5  # numbers are data, not formulas


#: Cells that break a naive CSV writer (rows split, quotes unbalanced) or run as formulas.
AWKWARD = ["one\rtwo", "one\ntwo", "one\r\ntwo", 'say "hi", twice', "=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"]


def test_awkward_cells_read_back_as_one_row_each():
    text = csvsafe.csv_text(["n", "cell"], [[n, cell] for n, cell in enumerate(AWKWARD)])
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0] == ["n", "cell"] and len(rows) == 1 + len(AWKWARD)
    assert [cell for _, cell in rows[1:]] == [csvsafe.neutralise_cell(cell) for cell in AWKWARD]
    assert [cell for _, cell in rows[1:]][4:] == ["'" + cell for cell in AWKWARD[4:]]
    assert text.startswith("n,cell\r\n") and text.endswith("\r\n")


def test_an_export_with_awkward_cells_has_one_row_per_annotation(db, tmp_path):
    study = create_study(slug="awkward", name="Awkward", kind="verification", annotators_per_item=len(AWKWARD))
    import_items(study=study, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    import_annotations(
        study=study,
        stream=jsonl(
            *(
                {"item": "c-1", "annotator": f"w{n}", "label": "supported", "justification": cell}
                for n, cell in enumerate(AWKWARD)
            )
        ),
        fmt="jsonl",
    )
    rows = list(csv.reader(io.StringIO(export(study.slug, "csv", tmp_path), newline="")))
    assert len(rows) == 1 + len(AWKWARD) and {len(row) for row in rows} == {len(EXPORT_COLUMNS)}
    column = EXPORT_COLUMNS.index("justification")
    assert sorted(row[column] for row in rows[1:]) == sorted(csvsafe.neutralise_cell(cell) for cell in AWKWARD)


# --- streaming ------------------------------------------------------------------------


def study_with_annotations(slug: str, n_items: int) -> Study:
    """n_items items with two annotations each."""
    study = create_study(slug=slug, name=slug, kind="verification", annotators_per_item=2)
    import_items(study=study, stream=jsonl(*(verification_item(f"c-{n}") for n in range(n_items))), fmt="jsonl")
    import_annotations(
        study=study,
        stream=jsonl(
            *({"item": f"c-{n}", "annotator": w, "label": "supported"} for n in range(n_items) for w in ("w1", "w2"))
        ),
        fmt="jsonl",
    )
    return study


def test_export_is_a_lazy_generator(loaded_verification_study, django_assert_num_queries):
    with django_assert_num_queries(0):
        rows = export_rows(loaded_verification_study)
        chunks = export_chunks(loaded_verification_study, "csv")
    assert inspect.isgenerator(rows) and inspect.isgenerator(chunks)
    assert len(list(rows)) == 6


def test_export_query_count_does_not_grow_with_the_study(db, django_assert_max_num_queries):
    small, large = study_with_annotations("small", 25), study_with_annotations("large", 250)
    assert Annotation.objects.filter(assignment__study=small).count() == 50
    assert Annotation.objects.filter(assignment__study=large).count() == 500
    used = {}
    for study in (small, large):
        for fmt in ("csv", "jsonl"):
            with CaptureQueriesContext(connection) as queries:
                text = "".join(export_chunks(study, fmt))
            used[(study.slug, fmt)] = len(queries)
            lines = text.count("\n")
            assert lines == Annotation.objects.filter(assignment__study=study).count() + (fmt == "csv")
    assert used[("small", "csv")] == used[("large", "csv")] == used[("small", "jsonl")] == used[("large", "jsonl")]
    with django_assert_max_num_queries(3):
        assert sum(1 for _ in export_rows(large)) == 500


def test_export_iterates_the_annotation_queryset(loaded_verification_study, monkeypatch):
    """Rows come from QuerySet.iterator() (a cursor), never from a fully loaded result cache."""
    iterated, loaded = [], []
    original_iterator, original_fetch_all = QuerySet.iterator, QuerySet._fetch_all

    def spy_iterator(self, *args, **kwargs):
        iterated.append(self.model)
        return original_iterator(self, *args, **kwargs)

    def spy_fetch_all(self):
        if self._result_cache is None:
            loaded.append(self.model)
        return original_fetch_all(self)

    monkeypatch.setattr(QuerySet, "iterator", spy_iterator)
    monkeypatch.setattr(QuerySet, "_fetch_all", spy_fetch_all)
    assert len(list(export_rows(loaded_verification_study))) == 6
    assert Annotation in iterated
    assert Annotation not in loaded


def test_csv_chunks_are_yielded_before_the_rows_run_out():
    def rows():
        for n in range(250):
            yield {"item": f"c-{n}", "label": "x"}
        raise RuntimeError("the writer read past what it needed for the first chunks")

    chunks = csvsafe.csv_chunks(["item", "label"], rows(), batch=100)
    first = next(chunks)
    assert first.startswith("item,label\r\n") and first.count("\r\n") == 101
    assert next(chunks).count("\n") == 100
    with pytest.raises(RuntimeError):
        next(chunks)


def test_export_of_an_unknown_study_lists_the_known_ones(sources):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=r"no study 'nope' \(known studies: p-src, v-src\)"):
        call_command("export_annotations", "nope", stdout=io.StringIO())


def test_export_to_a_missing_folder(sources, tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="does not exist"):
        call_command("export_annotations", "v-src", "--output", str(tmp_path / "no" / "x.csv"))
