"""Item import (docs/formats.md): line-numbered errors, all or nothing, streaming, BOM and CRLF.

Every malformed file below has valid records before the bad one, so "nothing
was stored" also proves that valid lines of a failed import are rolled back.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from annotation.errors import ImportFailed
from annotation.lib import formats
from annotation.models import Item, Study
from annotation.studies.services import create_study
from annotation.transfer.importers import parse_preference_item
from annotation.transfer.services import item_import
from annotation.transfer.services.item_import import import_items
from tests.conftest import csv_bytes, flat_item, jsonl, preference_item, verification_item

pytestmark = pytest.mark.django_db

KINDS = ("verification", "preference")
BOTH_FORMATS = ("jsonl", "csv")


def good(kind: str, n: int, **overrides) -> dict:
    if kind == "verification":
        return verification_item(f"c-{n}", **overrides)
    return preference_item(f"p-{n}", **overrides)


def without(record: dict, *names: str) -> dict:
    return {name: value for name, value in record.items() if name not in names}


def build(kind: str, fmt: str, records: Sequence[dict | str], *, newline: str = "\n") -> io.BytesIO:
    """A file in `fmt`; raw strings are JSONL lines written as they are."""
    if fmt == "jsonl":
        lines = [record if isinstance(record, str) else json.dumps(record, ensure_ascii=False) for record in records]
        return io.BytesIO((newline.join(lines) + newline).encode("utf-8"))
    rows = []
    for record in records:
        if isinstance(record, str):
            raise ValueError("raw strings are JSONL lines; a CSV file is built from records only")
        rows.append(flat_item(record))
    return csv_bytes(rows, newline=newline)


def first_line(fmt: str) -> int:
    """Physical line of the first record: CSV has its header on line 1."""
    return 1 if fmt == "jsonl" else 2


def study_for(request, kind: str) -> Study:
    return request.getfixturevalue(f"{kind}_study")


def import_fails(study: Study, stream, fmt: str, **options) -> ImportFailed:
    before = Item.objects.count()
    systems = list(Study.objects.get(pk=study.pk).systems)
    with pytest.raises(ImportFailed) as excinfo:
        import_items(study=study, stream=stream, fmt=fmt, **options)
    assert Item.objects.count() == before, "a failed import stored items"
    assert Study.objects.get(pk=study.pk).systems == systems, "a failed import declared the study's systems"
    assert "nothing was changed" in str(excinfo.value)
    return excinfo.value


def assert_error(failure: ImportFailed, line: int | None, field: str | None, *phrases: str) -> None:
    """The failure has an error at (line, field) whose message says all `phrases`; no other line is blamed."""
    matching = [error for error in failure.errors if error.line == line and error.field == field]
    assert matching, f"no error at line {line}, field {field!r}; got {failure.errors}"
    message = matching[0].message
    for phrase in phrases:
        assert phrase in message, f"{phrase!r} not in {message!r}"
    assert {error.line for error in failure.errors} == {line}, failure.errors
    where = "file" if line is None else f"line {line}"
    if field:
        where += f", field '{field}'"
    assert f"{where}: {message}" in str(failure)


# --- malformed records ----------------------------------------------------------


@dataclass
class Case:
    name: str
    kinds: tuple[str, ...]
    formats: tuple[str, ...]
    bad: Callable[[str], dict | str]  # kind -> the bad record (a raw string is a raw JSONL line)
    field: str | None
    phrases: tuple[str, ...]


ONE_CLAIM = ["One claim."]

CASES = [
    Case("invalid JSON", KINDS, ("jsonl",), lambda kind: '{"id": "x-9", "claim": ', None, ("invalid JSON",)),
    Case(
        "JSON array, not object",
        KINDS,
        ("jsonl",),
        lambda kind: '["x-9", "a claim"]',
        None,
        ("expected a JSON object per line", "array"),
    ),
    Case(
        "JSON string, not object",
        KINDS,
        ("jsonl",),
        lambda kind: '"x-9"',
        None,
        ("expected a JSON object per line", "string"),
    ),
    Case("missing id", KINDS, BOTH_FORMATS, lambda kind: without(good(kind, 9), "id"), "id", ("is required",)),
    Case("blank id", KINDS, BOTH_FORMATS, lambda kind: good(kind, 9, id="   "), "id", ("is required",)),
    Case(
        "id too long",
        KINDS,
        BOTH_FORMATS,
        lambda kind: good(kind, 9, id="x" * 201),
        "id",
        ("201 characters", "limit is 200"),
    ),
    Case(
        "missing claim",
        ("verification",),
        BOTH_FORMATS,
        lambda kind: without(good(kind, 9), "claim"),
        "claim",
        ("is required",),
    ),
    Case(
        "missing source",
        ("preference",),
        BOTH_FORMATS,
        lambda kind: without(good(kind, 9), "source"),
        "source",
        ("is required",),
    ),
    Case(
        "claim is a number",
        ("verification",),
        ("jsonl",),
        lambda kind: good(kind, 9, claim=42),
        "claim",
        ("must be a string", "number"),
    ),
    Case(
        "domain is an object",
        KINDS,
        ("jsonl",),
        lambda kind: good(kind, 9, domain={"x": 1}),
        "domain",
        ("must be a string", "object"),
    ),
    Case(
        "evidence is an object",
        ("verification",),
        BOTH_FORMATS,
        lambda kind: good(kind, 9, evidence={"text": "a passage"}),
        "evidence",
        ("must be an array", "object"),
    ),
    Case(
        "evidence is text",
        ("verification",),
        BOTH_FORMATS,
        lambda kind: good(kind, 9, evidence="see Wikipedia"),
        "evidence",
        ("must be an array", "string"),
    ),
    Case(
        "evidence passage is not an object",
        ("verification",),
        BOTH_FORMATS,
        lambda kind: good(kind, 9, evidence=["a passage"]),
        "evidence[0]",
        ("must be an object",),
    ),
    Case(
        "evidence passage without text",
        ("verification",),
        BOTH_FORMATS,
        lambda kind: good(kind, 9, evidence=[{"title": "Doc", "url": "https://example.org/"}]),
        "evidence[0].text",
        ("is required",),
    ),
    Case(
        "evidence url with javascript: scheme",
        ("verification",),
        BOTH_FORMATS,
        lambda kind: good(
            kind,
            9,
            evidence=[{"text": "ok", "url": "https://example.org/"}, {"text": "bad", "url": "javascript:alert(1)"}],
        ),
        "evidence[1].url",
        ("http:// or https://",),
    ),
    Case(
        "evidence passage with an unknown field",
        ("verification",),
        ("jsonl",),
        lambda kind: good(kind, 9, evidence=[{"text": "ok", "titel": "Doc"}]),
        "evidence[0].titel",
        ("unknown field", "'evidence[0].titel'"),
    ),
    Case(
        "unknown field (typo cliam)",
        ("verification",),
        BOTH_FORMATS,
        lambda kind: {"id": "c-9", "cliam": "A claim."},
        "cliam",
        ("unknown field", "'cliam'"),
    ),
    Case(
        "unknown field (typo soruce)",
        ("preference",),
        BOTH_FORMATS,
        lambda kind: {**without(good(kind, 9), "source"), "soruce": "Text."},
        "soruce",
        ("unknown field", "'soruce'"),
    ),
    Case(
        "duplicate id in the file",
        KINDS,
        BOTH_FORMATS,
        lambda kind: good(kind, 1),
        "id",
        ("duplicate id", "first seen on line {first}"),
    ),
    Case(
        "gold label not in the study's labels",
        KINDS,
        BOTH_FORMATS,
        lambda kind: good(kind, 9, gold="maybe"),
        "gold",
        ("'maybe' is not one of the study's labels",),
    ),
    Case(
        "preference item without lists",
        ("preference",),
        BOTH_FORMATS,
        lambda kind: without(good(kind, 9), "lists"),
        "lists",
        ("is required",),
    ),
    Case(
        "preference lists is an array",
        ("preference",),
        ("jsonl",),
        lambda kind: good(kind, 9, lists=[ONE_CLAIM, ONE_CLAIM]),
        "lists",
        ("must be an object", "array"),
    ),
    Case(
        "preference item with one system",
        ("preference",),
        BOTH_FORMATS,
        lambda kind: good(kind, 9, lists={"veriscore": ONE_CLAIM}),
        "lists",
        ("exactly two systems", "found 1"),
    ),
    Case(
        "preference item with three systems",
        ("preference",),
        BOTH_FORMATS,
        lambda kind: good(kind, 9, lists={"veriscore": ONE_CLAIM, "safe": ONE_CLAIM, "factscore": ONE_CLAIM}),
        "lists",
        ("exactly two systems", "found 3", "factscore"),
    ),
    Case(
        "empty claim list",
        ("preference",),
        BOTH_FORMATS,
        lambda kind: good(kind, 9, lists={"veriscore": ONE_CLAIM, "safe": []}),
        "lists.safe",
        ("empty claim list",),
    ),
    Case(
        "claim list holding a number",
        ("preference",),
        BOTH_FORMATS,
        lambda kind: good(kind, 9, lists={"veriscore": ["A claim.", 7], "safe": ONE_CLAIM}),
        "lists.veriscore[1]",
        ("non-empty string",),
    ),
    Case(
        "claim list is a number",
        ("preference",),
        ("jsonl",),
        lambda kind: good(kind, 9, lists={"veriscore": 3, "safe": ONE_CLAIM}),
        "lists.veriscore",
        ("must be an array of claims", "number"),
    ),
    Case(
        "systems differ from the study's",
        ("preference",),
        BOTH_FORMATS,
        lambda kind: good(kind, 9, lists={"veriscore": ONE_CLAIM, "factscore": ONE_CLAIM}),
        "lists",
        ("do not match the study's systems", "veriscore, safe"),
    ),
]

PARAMS = [
    pytest.param(case, kind, fmt, id=f"{case.name}-{kind}-{fmt}")
    for case in CASES
    for kind in case.kinds
    for fmt in case.formats
]


def test_there_are_enough_malformed_cases():
    assert len(CASES) >= 20 and len(PARAMS) >= 40


@pytest.mark.parametrize("case, kind, fmt", PARAMS)
def test_malformed_record(request, case: Case, kind: str, fmt: str):
    study = study_for(request, kind)
    stream = build(kind, fmt, [good(kind, 1), good(kind, 2), case.bad(kind)])
    failure = import_fails(study, stream, fmt)
    bad_line = first_line(fmt) + 2
    phrases = tuple(phrase.format(first=first_line(fmt)) for phrase in case.phrases)
    assert_error(failure, bad_line, case.field, *phrases)
    assert Item.objects.filter(study=study).count() == 0


def test_every_problem_of_a_file_is_reported_at_once(verification_study):
    stream = jsonl(
        verification_item("c-1"),
        without(verification_item("c-2"), "claim"),
        "not json",
        verification_item("c-4", gold="maybe"),
        verification_item("c-1"),
    )
    failure = import_fails(verification_study, stream, "jsonl")
    assert [(error.line, error.field) for error in failure.errors] == [
        (2, "claim"),
        (3, None),
        (4, "gold"),
        (5, "id"),
    ]
    assert failure.total == 4
    assert "(4 problem(s))" in str(failure)


def test_a_late_error_rolls_back_batches_already_written(verification_study, monkeypatch):
    """Batches are flushed while reading; a bad last line must still undo them."""
    monkeypatch.setattr(item_import, "BATCH_SIZE", 2)
    records = [verification_item(f"c-{n}") for n in range(1, 8)] + [without(verification_item("c-8"), "claim")]
    failure = import_fails(verification_study, jsonl(*records), "jsonl")
    assert_error(failure, 8, "claim", "is required")
    assert not Item.objects.exists()


# --- ids already in the study -----------------------------------------------------


@pytest.mark.parametrize("fmt", BOTH_FORMATS)
@pytest.mark.parametrize("kind", KINDS)
def test_existing_id_is_an_error_without_update(request, kind, fmt):
    study = study_for(request, kind)
    import_items(study=study, stream=build(kind, fmt, [good(kind, 1), good(kind, 2)]), fmt=fmt)
    stored = {item.external_id: item.payload for item in Item.objects.filter(study=study)}
    changed = good(kind, 1, domain="changed")
    failure = import_fails(study, build(kind, fmt, [good(kind, 3), changed]), fmt)
    assert_error(failure, first_line(fmt) + 1, "id", f"item '{changed['id']}' already exists", "--update")
    assert {item.external_id: item.payload for item in Item.objects.filter(study=study)} == stored
    assert not Item.objects.filter(study=study, domain="changed").exists()


@pytest.mark.parametrize("fmt", BOTH_FORMATS)
@pytest.mark.parametrize("kind", KINDS)
def test_existing_id_is_replaced_with_update(request, kind, fmt):
    study = study_for(request, kind)
    import_items(study=study, stream=build(kind, fmt, [good(kind, 1), good(kind, 2)]), fmt=fmt)
    original = Item.objects.get(study=study, external_id=good(kind, 1)["id"])
    if kind == "verification":
        changed = good(kind, 1, domain="changed", claim="A corrected claim.", gold="supported")
    else:
        changed = good(
            kind,
            1,
            domain="changed",
            source="A corrected source.",
            lists={"veriscore": ["New claim."], "safe": ["Other claim.", "Second."]},
        )
    result = import_items(study=study, stream=build(kind, fmt, [good(kind, 3), changed]), fmt=fmt, update=True)
    assert (result.created, result.updated) == (1, 1)
    item = Item.objects.get(pk=original.pk)
    assert item.domain == "changed"
    assert item.position == original.position, "an update must not move the item in the import order"
    if kind == "verification":
        assert item.payload["claim"] == "A corrected claim." and item.summary == "A corrected claim."
        assert item.gold_label == "supported"
    else:
        assert item.payload["source"] == "A corrected source."
        assert item.payload["lists"]["safe"] == ["Other claim.", "Second."]
    assert Item.objects.filter(study=study).count() == 3


# --- file-level problems --------------------------------------------------------


@pytest.mark.parametrize("fmt", BOTH_FORMATS)
@pytest.mark.parametrize("kind", KINDS)
def test_non_utf8_file_names_its_line(request, kind, fmt):
    study = study_for(request, kind)
    text_field = "claim" if kind == "verification" else "source"
    bad = good(kind, 3, **{text_field: "Un café à Paris."})
    data = build(kind, fmt, [good(kind, 1), good(kind, 2), bad]).getvalue()
    data = data.replace("café".encode(), "café".encode("latin-1"))
    failure = import_fails(study, io.BytesIO(data), fmt)
    assert_error(failure, first_line(fmt) + 2, None, "not valid UTF-8", "0xe9", "save the file as UTF-8")


def padded(kind: str, fmt: str, n: int, length: int) -> tuple[io.BytesIO, int]:
    """Two good records, then one whose physical line is exactly `length` bytes (without its newline)."""
    text_field = "claim" if kind == "verification" else "source"
    records = [good(kind, 1), good(kind, 2), good(kind, n, **{text_field: "@PAD@"})]
    data = build(kind, fmt, records).getvalue()
    lines = data.split(b"\n")
    index = next(i for i, line in enumerate(lines) if b"@PAD@" in line)
    lines[index] = lines[index].replace(b"@PAD@", b"x" * (length - len(lines[index]) + len(b"@PAD@")))
    assert len(lines[index]) == length
    return io.BytesIO(b"\n".join(lines)), index + 1


@pytest.mark.parametrize("fmt", BOTH_FORMATS)
@pytest.mark.parametrize("kind", KINDS)
def test_over_long_line_is_refused(request, kind, fmt):
    study = study_for(request, kind)
    stream, line = padded(kind, fmt, 3, formats.MAX_LINE_BYTES + 1)
    failure = import_fails(study, stream, fmt)
    assert_error(failure, line, None, "longer than the limit", f"{formats.MAX_LINE_BYTES:,} bytes")


@pytest.mark.parametrize("ending", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_line_of_exactly_the_limit_is_accepted(verification_study, ending):
    stream, _ = padded("verification", "jsonl", 3, formats.MAX_LINE_BYTES)
    data = stream.getvalue().replace(b"\n", ending.encode())
    assert import_items(study=verification_study, stream=io.BytesIO(data), fmt="jsonl").created == 3
    assert len(Item.objects.get(external_id="c-3").payload["claim"]) > formats.MAX_LINE_BYTES - 1000


@pytest.mark.parametrize("ending", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_over_long_line_is_refused_whatever_its_ending(verification_study, ending):
    stream, line = padded("verification", "jsonl", 3, formats.MAX_LINE_BYTES + 1)
    data = stream.getvalue().replace(b"\n", ending.encode()) + ending.encode()
    failure = import_fails(verification_study, io.BytesIO(data), "jsonl")
    assert_error(failure, line, None, "longer than the limit")


@pytest.mark.parametrize("extra", [-2, -1, 0])
def test_a_bom_does_not_count_towards_the_first_lines_limit(verification_study, extra):
    """A long first line after a BOM is read whole, never split into two lines."""
    record = json.dumps(verification_item("c-1", claim="@PAD@")).encode()
    length = formats.MAX_LINE_BYTES + extra
    line = record.replace(b"@PAD@", b"x" * (length - len(record) + len(b"@PAD@")))
    data = b"\xef\xbb\xbf" + line + b"\n" + json.dumps(verification_item("c-2")).encode() + b"\n"
    assert import_items(study=verification_study, stream=io.BytesIO(data), fmt="jsonl").created == 2
    assert Item.objects.get(external_id="c-1").payload["claim"].startswith("xxx")


@pytest.mark.parametrize(
    "fmt, data",
    [
        ("jsonl", b""),
        ("jsonl", b"\n  \n\r\n\t\n"),
        ("jsonl", b"\xef\xbb\xbf"),
        ("csv", b""),
        ("csv", b"id,claim,source,lists\n"),
        ("csv", b"id,claim,source,lists\n\n,,,\n"),
    ],
    ids=["jsonl-empty", "jsonl-blank-lines", "jsonl-bom-only", "csv-empty", "csv-header-only", "csv-empty-rows"],
)
@pytest.mark.parametrize("kind", KINDS)
def test_empty_file(request, kind, fmt, data):
    study = study_for(request, kind)
    failure = import_fails(study, io.BytesIO(data), fmt)
    assert_error(failure, None, None, "holds no records")


@pytest.mark.parametrize("kind", KINDS)
def test_csv_row_with_the_wrong_number_of_cells(request, kind):
    study = study_for(request, kind)
    lines = build(kind, "csv", [good(kind, 1), good(kind, 2)]).getvalue().decode().splitlines()
    header_cells = len(lines[0].split(","))
    lines.insert(2, lines[1].replace(good(kind, 1)["id"], "extra-1", 1) + ",one more")
    short = ",".join(["short-1"] + [""] * (header_cells - 3))  # two cells too few
    lines.append(short)
    failure = import_fails(study, io.BytesIO(("\n".join(lines) + "\n").encode()), "csv")
    assert {(error.line, error.field) for error in failure.errors} == {(3, None), (5, None)}
    messages = {error.line: error.message for error in failure.errors}
    assert f"expected {header_cells} cells as in the header, found {header_cells + 1}" in messages[3]
    assert f"expected {header_cells} cells as in the header, found {header_cells - 2}" in messages[5]


@pytest.mark.parametrize("kind", KINDS)
def test_csv_header_with_duplicate_columns(request, kind):
    study = study_for(request, kind)
    header = "id,claim,domain,claim" if kind == "verification" else "id,source,list:a,list:b,source"
    data = (header + "\n" + "x-1,a,b,c" + ("" if kind == "verification" else ",d") + "\n").encode()
    failure = import_fails(study, io.BytesIO(data), "csv")
    name = "claim" if kind == "verification" else "source"
    assert_error(failure, 1, None, "duplicate column(s) in header", name)


def test_csv_value_under_a_nameless_column_is_not_dropped_silently(verification_study):
    data = b"id,claim,\nc-1,One.,\nc-2,Two.,forgotten note\n"  # a trailing comma, as spreadsheets write
    failure = import_fails(verification_study, io.BytesIO(data), "csv")
    assert_error(failure, 3, None, "column 3, which has no name in the header")
    assert (
        import_items(
            study=verification_study, stream=io.BytesIO(data.replace(b"forgotten note", b"")), fmt="csv"
        ).created
        == 2
    )


def test_csv_with_an_unterminated_quote(verification_study):
    data = b'id,claim\nc-1,fine\nc-2,"never closed\n'
    failure = import_fails(verification_study, io.BytesIO(data), "csv")
    assert_error(failure, 3, None, "malformed CSV")


# --- good files ---------------------------------------------------------------------


def no_carriage_returns(value: Any) -> bool:
    if isinstance(value, str):
        return "\r" not in value
    if isinstance(value, dict):
        return all(no_carriage_returns(k) and no_carriage_returns(v) for k, v in value.items())
    if isinstance(value, list):
        return all(no_carriage_returns(v) for v in value)
    return True


def stored_text(study: Study) -> list:
    return list(Item.objects.filter(study=study).values_list("external_id", "domain", "summary", "payload"))


@pytest.mark.parametrize("fmt", BOTH_FORMATS)
@pytest.mark.parametrize("kind", KINDS)
def test_utf8_bom_is_not_part_of_the_first_id(request, kind, fmt):
    study = study_for(request, kind)
    data = b"\xef\xbb\xbf" + build(kind, fmt, [good(kind, 1), good(kind, 2)]).getvalue()
    assert import_items(study=study, stream=io.BytesIO(data), fmt=fmt).created == 2
    ids = list(Item.objects.filter(study=study).order_by("position").values_list("external_id", flat=True))
    assert ids == [good(kind, 1)["id"], good(kind, 2)["id"]]
    assert "\ufeff" not in json.dumps(stored_text(study), ensure_ascii=False)


@pytest.mark.parametrize("fmt", BOTH_FORMATS)
@pytest.mark.parametrize("kind", KINDS)
def test_crlf_line_endings_leave_no_stray_carriage_return(request, kind, fmt):
    study = study_for(request, kind)
    records = [good(kind, 1, domain="news"), good(kind, 2, domain="bio")]
    result = import_items(study=study, stream=build(kind, fmt, records, newline="\r\n"), fmt=fmt)
    assert result.created == 2
    rows = stored_text(study)
    assert [row[1] for row in rows] == ["news", "bio"]
    assert all(no_carriage_returns(row) for row in rows), rows
    item = Item.objects.get(study=study, external_id=good(kind, 2)["id"])
    if kind == "verification":
        assert item.payload["evidence"] == verification_item()["evidence"]
    else:
        assert item.payload["lists"] == preference_item()["lists"]


def test_crlf_csv_with_multi_line_cells(preference_study):
    data = (
        b"id,source,list:veriscore,list:safe\r\n"
        b'p-1,"First line.\r\nSecond line.","Claim one.\r\nClaim two.","[""Only claim.""]"\r\n'
    )
    import_items(study=preference_study, stream=io.BytesIO(data), fmt="csv")
    item = Item.objects.get(study=preference_study)
    assert item.payload["source"] == "First line.\nSecond line."
    assert item.payload["lists"] == {"veriscore": ["Claim one.", "Claim two."], "safe": ["Only claim."]}


def test_csv_evidence_as_a_json_cell(verification_study):
    evidence = [
        {
            "text": "First passage, with a comma.",
            "title": 'Doc "A"',
            "url": "https://a.example/x?y=1",
            "source_type": "news",
        },
        {"text": "Second passage."},
    ]
    stream = csv_bytes([verification_item("c-1", evidence=evidence, gold="Supported")])
    import_items(study=verification_study, stream=stream, fmt="csv")
    item = Item.objects.get(study=verification_study)
    assert item.payload["evidence"] == [
        evidence[0],
        {"text": "Second passage.", "title": "", "url": "", "source_type": ""},
    ]
    assert (item.gold_label, item.gold_raw) == ("supported", "Supported")


def test_preference_csv_with_list_columns(preference_study):
    data = (
        b"id,domain,source,list:veriscore,list:safe\n"
        b'p-1,bio,Source one.,"[""A1"", ""A2""]","[""B1""]"\n'
        b'p-2,bio,Source two.,"A1 on its own line\nA2 on the next\n","B1"\n'
    )
    assert import_items(study=preference_study, stream=io.BytesIO(data), fmt="csv").created == 2
    lists = {item.external_id: item.payload["lists"] for item in Item.objects.filter(study=preference_study)}
    assert lists == {
        "p-1": {"veriscore": ["A1", "A2"], "safe": ["B1"]},
        "p-2": {"veriscore": ["A1 on its own line", "A2 on the next"], "safe": ["B1"]},
    }
    preference_study.refresh_from_db()
    assert preference_study.systems == ["veriscore", "safe"]


def test_first_preference_import_declares_the_systems(preference_study):
    assert preference_study.systems == []
    stream = jsonl(
        preference_item("p-1", lists={"safe": ["S"], "veriscore": ["V"]}),
        preference_item("p-2", lists={"veriscore": ["V2"], "safe": ["S2"]}),
    )
    import_items(study=preference_study, stream=stream, fmt="jsonl")
    preference_study.refresh_from_db()
    assert preference_study.systems == ["safe", "veriscore"]  # in the order of the first item
    # A later file must use the same two systems.
    failure = import_fails(
        preference_study, jsonl(preference_item("p-3", lists={"safe": ["S"], "other": ["O"]})), "jsonl"
    )
    assert_error(failure, 1, "lists", "do not match", "safe, veriscore")


def test_preference_lists_follow_the_declared_order(db):
    study = create_study(slug="declared", name="D", kind="preference", systems=["veriscore", "safe"])
    reversed_lists = {"safe": ["S1", "S2"], "veriscore": ["V1"]}
    # The parsed row is in declared order whatever the file says...
    row = parse_preference_item(
        1, preference_item("p-1", lists=reversed_lists), systems=study.systems, labels=study.labels, aliases={}
    )
    assert list(row.payload["lists"]) == ["veriscore", "safe"]
    # ...and what is stored maps each system to its own claims (never swapped by position).
    import_items(study=study, stream=jsonl(preference_item("p-1", lists=reversed_lists)), fmt="jsonl")
    study.refresh_from_db()
    assert study.systems == ["veriscore", "safe"]
    lists = Item.objects.get(study=study).payload["lists"]
    assert lists == {"veriscore": ["V1"], "safe": ["S1", "S2"]}


def test_blank_lines_are_ignored_and_line_numbers_stay_physical(verification_study):
    lines = [
        "",  # 1
        json.dumps(verification_item("c-1")),  # 2
        "   ",  # 3
        "",  # 4
        json.dumps(verification_item("c-2")),  # 5
        "\t",  # 6
    ]
    data = "\n".join(lines).encode() + b"\n"
    assert import_items(study=verification_study, stream=io.BytesIO(data), fmt="jsonl").created == 2
    lines = [line.replace('"c-', '"d-') for line in lines] + [
        "",
        json.dumps(without(verification_item("d-8"), "claim")),
    ]
    failure = import_fails(verification_study, io.BytesIO("\n".join(lines).encode()), "jsonl")
    assert_error(failure, 8, "claim", "is required")  # the last line has no newline: still read
    csv_data = b"id,claim\n\nc-5,Five.\n\n\nc-6,\n"
    failure = import_fails(verification_study, io.BytesIO(csv_data), "csv")
    assert_error(failure, 6, "claim", "is required")


def test_integer_ids_are_accepted(db, verification_study, preference_study):
    import_items(
        study=verification_study, stream=jsonl(verification_item(42), verification_item(7, response_id=99)), fmt="jsonl"
    )
    assert set(Item.objects.filter(study=verification_study).values_list("external_id", flat=True)) == {"42", "7"}
    assert Item.objects.get(external_id="7").response_id == "99"
    import_items(study=preference_study, stream=jsonl(preference_item(1)), fmt="jsonl")
    assert Item.objects.filter(study=preference_study, external_id="1").exists()


def test_stored_fields_of_a_verification_item(verification_study):
    record = verification_item(
        "c-1", domain="longfact", context="The context.", response_id="r-1", system="gpt-4o", gold="contradicted"
    )
    import_items(study=verification_study, stream=jsonl(record), fmt="jsonl")
    item = Item.objects.get(study=verification_study)
    assert (item.domain, item.response_id, item.system, item.gold_label) == (
        "longfact",
        "r-1",
        "gpt-4o",
        "contradicted",
    )
    assert item.payload == {"claim": record["claim"], "context": "The context.", "evidence": record["evidence"]}
    assert item.summary == record["claim"]


@pytest.mark.parametrize("fmt", BOTH_FORMATS)
def test_nul_characters_are_refused_on_every_database(verification_study, fmt):
    """PostgreSQL refuses U+0000 in text and jsonb: every format refuses it by line and field, on SQLite too
    (the one rule, annotation/lib/formats.py; every route: test_control_characters.py)."""
    record = verification_item("c-1", claim="A claim.", evidence=[{"text": "sodium. s\x00 end", "title": "T"}])
    with pytest.raises(ImportFailed) as failed:
        import_items(study=verification_study, stream=build("verification", fmt, [record]), fmt=fmt)
    line = 2 if fmt == "csv" else 1
    assert str(failed.value.errors[0]) == (
        f"line {line}, field 'evidence[0].text': contains a NUL character (U+0000), which cannot be stored"
    )
    assert not Item.objects.filter(study=verification_study).exists()


class NoSlurp(io.RawIOBase):
    """A binary stream that refuses to be read whole: only bounded reads are allowed."""

    def __init__(self, data: bytes) -> None:
        self.inner = io.BytesIO(data)
        self.largest_read = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            raise AssertionError("the importer tried to read the whole file")
        self.largest_read = max(self.largest_read, size)
        return self.inner.read(size)

    def readall(self) -> bytes:
        raise AssertionError("the importer tried to read the whole file")

    def readinto(self, buffer) -> int:
        data = self.inner.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def readline(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            raise AssertionError("an unbounded readline lets one huge line fill memory")
        self.largest_read = max(self.largest_read, size)
        return self.inner.readline(size)


@pytest.mark.parametrize("fmt", BOTH_FORMATS)
@pytest.mark.parametrize("kind", KINDS)
def test_import_reads_the_file_as_a_stream(request, kind, fmt):
    study = study_for(request, kind)
    data = build(kind, fmt, [good(kind, n) for n in range(1, 51)]).getvalue()
    stream = NoSlurp(data)
    assert import_items(study=study, stream=stream, fmt=fmt).created == 50
    assert stream.largest_read <= formats.MAX_LINE_BYTES + 8  # the limit, a CRLF and a BOM
