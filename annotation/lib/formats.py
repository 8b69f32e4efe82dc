"""File formats: streaming JSONL/CSV readers with line numbers, and the JSONL writer.

Readers never hold a whole file: they decode one physical line at a time, so a
100,000-item upload costs memory for one line, and every problem can name the
line it is on. They refuse NUL characters, naming the line and field
(`nul_error`: the one rule for control characters, for every input).
CSV is written by annotation/lib/csvsafe.py, which makes every cell safe.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import sub
from pathlib import Path
from typing import IO, Any

MAX_LINE_BYTES = 2 * 1024 * 1024
# Deepest nesting of arrays and objects a JSON value may have: real records need 4;
# a deeper value would exhaust Python's recursion limit while being parsed or cleaned.
MAX_JSON_DEPTH = 64
# One limit for both formats: a CSV cell may be as long as a JSONL line.
csv.field_size_limit(max(csv.field_size_limit(), MAX_LINE_BYTES))
_CSV_TOO_LONG = "field larger than field limit"
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")
_DEPTH_STEPS = str.maketrans({"[": "\x02", "{": "\x02", "]": "\x00", "}": "\x00"})
FORMATS = ("jsonl", "csv")
_EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}
_BOM = b"\xef\xbb\xbf"

# --- the one rule for control characters ---------------------------------------------------
#
# Every input refuses U+0000 (NUL) and keeps every other character: each file format (JSON
# Lines, CSV, CSV cells holding JSON, every pipeline's file, whole-JSON files) through
# `nul_error`, with the line and the field, and every API body through lib/parsers.py.
#
# Why refuse NUL: PostgreSQL cannot store it in text or jsonb, so the same file would import on
# SQLite and fail (or, dropped quietly as before, import altered) on PostgreSQL; it never means
# anything in a claim, a label or a name; it is almost always a sign of a mis-decoded file
# (UTF-16 read as UTF-8), which its owner should know about rather than find silently mangled.
# Why only NUL: tab, line feed and carriage return are text; the other C0 controls (a form feed
# that pdftotext writes between pages, a vertical tab from a word processor, ESC in a model's
# captured output) occur in real evidence and model outputs, both databases store them, and
# every export carries them back unchanged (JSON escapes them, CSV quotes them). Refusing them
# would turn away real files for no reason of storage. Django and DRF draw the same line
# (ProhibitNullCharactersValidator refuses NUL only).
NUL = "\x00"
NUL_REFUSED = "contains a NUL character (U+0000), which cannot be stored"
NUL_IN_NAME = "the field name contains a NUL character (U+0000), which cannot be stored"
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


@dataclass(frozen=True)
class RecordError:
    """One problem in an input file, located by line and field."""

    line: int | None
    message: str
    field: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else "file"
        if self.field:
            where += f", field '{self.field}'"
        return f"{where}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "field": self.field, "message": self.message}


class JSONTooDeep(ValueError):
    """A JSON text nested deeper than MAX_JSON_DEPTH."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than the limit of {limit} levels of arrays and objects")


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in a JSON text (brackets inside strings do not count)."""
    brackets = "".join(_JSON_BRACKET.findall(_JSON_STRING.sub("", text)))
    steps = brackets.translate(_DEPTH_STEPS).encode("latin-1")  # 2: opens, 0: closes
    return max(accumulate(map(sub, steps, repeat(1))), default=0)


def loads(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads with a bound on nesting, checked before parsing; JSONTooDeep beyond it.

    The check is skipped when the text holds too few brackets to nest that deep.
    """
    if text.count("[") + text.count("{") > max_depth and json_depth(text) > max_depth:
        raise JSONTooDeep(max_depth)
    return json.loads(text)


class FileFormatError(Exception):
    """The file cannot be read on from here (bad encoding, over-long line...)."""

    def __init__(self, error: RecordError) -> None:
        super().__init__(str(error))
        self.error = error


def detect_format(filename: str, explicit: str | None = None) -> str:
    """The format named explicitly, else the one the file extension implies."""
    if explicit:
        if explicit not in FORMATS:
            raise ValueError(f"unknown format {explicit!r}; use one of {', '.join(FORMATS)}")
        return explicit
    suffix = Path(filename).suffix.lower()
    if suffix not in _EXTENSIONS:
        raise ValueError(
            f"cannot tell the format of {Path(filename).name!r} from its extension; "
            "name it .jsonl or .csv, or give the format explicitly"
        )
    return _EXTENSIONS[suffix]


def _text_lines(stream: IO[bytes], max_line_bytes: int) -> Iterator[tuple[int, str]]:
    """Yield (line number, decoded line with its ending) from a binary stream.

    Strips a UTF-8 BOM, accepts LF and CRLF, and turns a bad byte or an
    over-long line into an error that names the line.
    """
    number = 0
    while True:
        # Room for the limit plus CRLF (and a BOM on line 1): neither counts towards the limit.
        raw = stream.readline(max_line_bytes + 2 + (len(_BOM) if number == 0 else 0))
        if not raw:
            return
        number += 1
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
        content = raw[:-1] if raw.endswith(b"\n") else raw
        if len(content) - content.endswith(b"\r") > max_line_bytes:
            raise FileFormatError(RecordError(number, f"line is longer than the limit of {max_line_bytes:,} bytes"))
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FileFormatError(
                RecordError(
                    number,
                    f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); save the file as UTF-8",
                )
            ) from None


def single_document_error(shape: str) -> RecordError:
    """The one error for a whole-JSON file where JSON Lines is expected: what it is and how to fix it."""
    return RecordError(
        None,
        f"the file is a single JSON document ({shape}), not JSON Lines (one JSON object per line): "
        "write each record on a line of its own (for an array: jq -c '.[]' FILE)",
    )


def json_error_text(exc: json.JSONDecodeError) -> str:
    """'invalid JSON: <what> at column N', without doubling the 'at' of json's "... starting at" messages."""
    where = "column" if exc.msg.endswith(" at") else "at column"
    return f"invalid JSON: {exc.msg} {where} {exc.colno}"


def iter_jsonl(
    stream: IO[bytes], *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, dict[str, Any] | RecordError]]:
    """Yield (line, object) per non-blank line, or (line, error) for a bad one.

    A file that is one JSON document (its first line opens an array, or is a lone '{') gets one error
    saying so, not one "invalid JSON" per line."""
    first = True
    for number, text in _text_lines(stream, max_line_bytes):
        text = text.strip()
        if not text:
            continue
        if first and (text == "{" or text.startswith("[")):
            yield number, single_document_error("an array" if text.startswith("[") else "an object spanning lines")
            return
        first = False
        if NUL in text:  # a raw NUL byte: invalid JSON, but the one rule says more
            yield number, raw_nul_error(text, line=number)
            continue
        try:
            value = loads(text)
        except json.JSONDecodeError as exc:
            yield number, RecordError(number, json_error_text(exc))
            continue
        except JSONTooDeep as exc:
            yield number, RecordError(number, f"invalid JSON: {exc}")
            continue
        refused = nul_error_in_json(text, value, line=number)
        if refused is not None:
            yield number, refused
            continue
        if not isinstance(value, dict):
            yield number, RecordError(number, f"expected a JSON object per line, got {json_type(value)}")
            continue
        yield number, value


def iter_csv(
    stream: IO[bytes], *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, dict[str, Any] | RecordError]]:
    """Yield (line, row dict) per CSV record; empty cells are left out of the row.

    The line is where the record starts (a quoted cell may span lines).
    """
    lines = _text_lines(stream, max_line_bytes)
    current = {"line": 0}

    def feed() -> Iterator[str]:
        for number, text in lines:
            current["line"] = number
            # A CRLF file must not leave a stray "\r" inside a quoted multi-line cell.
            yield text[:-2] + "\n" if text.endswith("\r\n") else text

    reader = csv.reader(feed(), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        raise FileFormatError(RecordError(current["line"], f"in the CSV header: {_csv_problem(exc)}")) from None
    header = [name.strip() for name in header]
    if any(NUL in name for name in header):
        raise FileFormatError(RecordError(1, f"in the CSV header: {NUL_IN_NAME}"))
    if not any(header):
        raise FileFormatError(RecordError(1, "the first line must be a header naming the columns"))
    duplicates = sorted({name for name in header if name and header.count(name) > 1})
    if duplicates:
        raise FileFormatError(RecordError(1, f"duplicate column(s) in header: {', '.join(duplicates)}"))
    while True:
        start = current["line"] + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if _CSV_TOO_LONG in str(exc):  # the reader is lost inside the cell: stop here
                raise FileFormatError(RecordError(start, _csv_problem(exc))) from None
            yield start, RecordError(start, _csv_problem(exc))
            continue
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            yield start, RecordError(start, f"expected {len(header)} cells as in the header, found {len(cells)}")
            continue
        unnamed = [
            index + 1 for index, (name, cell) in enumerate(zip(header, cells, strict=True)) if not name and cell.strip()
        ]
        if unnamed:
            yield (
                start,
                RecordError(
                    start, f"a value in column {unnamed[0]}, which has no name in the header; name it or empty it"
                ),
            )
            continue
        record = {name: cell for name, cell in zip(header, cells, strict=True) if name and cell != ""}
        refused = nul_error(start, record) if any(NUL in cell for cell in cells) else None
        yield start, refused if refused is not None else record


def _csv_problem(exc: csv.Error) -> str:
    """The csv module's complaint in the user's terms (its cell limit is the line limit)."""
    if _CSV_TOO_LONG in str(exc):
        return f"a cell is longer than the limit of {csv.field_size_limit():,} characters"
    return f"malformed CSV: {exc}"


def iter_records(
    stream: IO[bytes], fmt: str, *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, dict[str, Any] | RecordError]]:
    """Records of a JSONL or CSV stream, each with its line number."""
    reader = iter_jsonl if fmt == "jsonl" else iter_csv
    return reader(stream, max_line_bytes=max_line_bytes)


def nul_error(line: int | None, value: Any, field: str | None = None) -> RecordError | None:
    """The refusal of a value that holds U+0000 anywhere (the one rule above), or None when it holds none.

    `value` is decoded data: text, or a record (objects and arrays, nested). The error names
    `line` and the place of the first NUL under `field`: `claim`, `evidence[0].text`, or the
    field whose name holds it.
    """
    found = _nul_place(value)
    if found is None:
        return None
    place, in_name = found
    return RecordError(line, NUL_IN_NAME if in_name else NUL_REFUSED, _joined(field, place) or None)


def _nul_place(value: Any) -> tuple[str, bool] | None:
    """Where the first NUL is: its path ('' for the value itself) and whether it is in a field's name."""
    if isinstance(value, str):
        return ("", False) if NUL in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            name = str(key)
            if NUL in name:
                return name.replace(NUL, "\\u0000"), True
            found = _nul_place(item)
            if found is not None:
                return _joined(name, found[0]), found[1]
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _nul_place(item)
            if found is not None:
                return _joined(f"[{index}]", found[0]), found[1]
    return None


def _joined(field: str | None, place: str) -> str:
    if not field or not place:
        return field or place
    return field + place if place.startswith("[") else f"{field}.{place}"


def nul_error_in_json(
    text: str, value: Any, *, line: int | None = None, field: str | None = None
) -> RecordError | None:
    """`nul_error` for a value decoded from JSON `text` (only text with a NUL escape is searched),
    located in the text: `line` for a one-line text, else the line of the first NUL escape."""
    if "\\u0000" not in text:
        return None
    error = nul_error(line, value, field)
    if error is not None and line is None:
        escape = _NUL_ESCAPE.search(text)
        if escape is not None:
            error = RecordError(text.count("\n", 0, escape.end()) + 1, error.message, error.field)
    return error


def raw_nul_error(text: str, *, line: int | None = None) -> RecordError:
    """A JSON text holding a raw NUL byte (invalid JSON as it stands): the field it is in, when the
    text is JSON but for it, and the line it is on."""
    where = line if line is not None else text.count("\n", 0, text.index(NUL)) + 1
    try:
        value = loads(text.replace(NUL, "\\u0000"))
    except (json.JSONDecodeError, JSONTooDeep):
        return RecordError(where, NUL_REFUSED)
    error = nul_error(where, value)
    return error if error is not None else RecordError(where, NUL_REFUSED)


def json_type(value: Any) -> str:
    """The JSON name of a Python value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


# --- writers (CSV: annotation/lib/csvsafe.py) ------------------------------------------


def jsonl_chunks(rows: Iterable[dict[str, Any]], *, batch: int = 2000) -> Iterator[str]:
    """Stream JSON Lines as text chunks of about `batch` rows each."""
    parts: list[str] = []
    for row in rows:
        parts.append(json.dumps(row, ensure_ascii=False))
        parts.append("\n")
        if len(parts) >= 2 * batch:
            yield "".join(parts)
            parts.clear()
    yield "".join(parts)
