"""A study's predictions as CSV or JSON Lines, streamed to a file (docs/formats.md, issue 35).

One row per prediction, in the order they were written (the primary key: an import's in its file's
order), so both databases write the same rows in the same order; a sort by anything else cost
PostgreSQL more than the rest of the export. The columns: the import's (``item``,
``verifier``, ``label``, ``score``, ``rationale``: the file re-imports with ``import_predictions``,
which ignores the rest) and what the verifier said beyond the verdict (``raw_label``,
``parse_status``, ``error``, ``latency_ms``, ``tokens_in``, ``tokens_out``, ``order_labels``,
``raw_output``).

Why two writers: a verifier-scale study holds a million predictions, and the export must stay
within 2x of a bare ``COPY TO`` of the same rows and in bounded memory. On PostgreSQL the
database writes the file's text itself (``COPY (SELECT ...) TO STDOUT``): CSV cells made safe in
SQL by the rule of ``annotation.lib.csvsafe`` (a leading ``'`` before ``= + - @``, tab or CR;
empty text as an empty cell) and rows ended in CRLF here; JSON Lines from ``row_to_json``. On
SQLite a server-side iterator feeds the project's CSV / JSON Lines writers. Both hold one batch
of rows at a time; the tests compare the two outputs value by value.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import IO, Any

from django.db import connection

from annotation.lib.csvsafe import LINE_END, csv_lines
from annotation.lib.rawsql import quote, table
from annotation.models import Item, Study

from ..models import Prediction, Verifier

__all__ = ["EXPORT_COLUMNS", "FORMATS", "copied_csv", "prediction_chunks", "prediction_rows", "write_predictions"]

FORMATS = ("csv", "jsonl")
#: (column of the file, SQL of its value): p = the prediction, v = its verifier, i = its item.
_COLUMNS: tuple[tuple[str, str], ...] = (
    ("item", "i.external_id"),
    ("verifier", "v.name"),
    ("label", "p.label"),
    ("score", "p.score"),
    ("rationale", "p.rationale"),
    ("raw_label", "p.raw_label"),
    ("parse_status", "p.parse_status"),
    ("error", "p.error"),
    ("latency_ms", "p.latency_ms"),
    ("tokens_in", "p.tokens_in"),
    ("tokens_out", "p.tokens_out"),
    ("order_labels", "p.order_labels"),
    ("raw_output", "p.raw_output"),
)
EXPORT_COLUMNS = tuple(name for name, _ in _COLUMNS)
#: Text columns: made safe for spreadsheets in the CSV (numbers and JSON are data, left alone).
_TEXT = frozenset({"item", "verifier", "label", "rationale", "raw_label", "parse_status", "error", "raw_output"})
#: Rows fetched (SQLite) or lines written (both) at a time: bounds the memory whatever the study's size.
BATCH = 5000
#: Bytes gathered before each write to the file.
WRITE_BYTES = 1 << 20


def write_predictions(study: Study, fmt: str, path: Path) -> int:
    """Write the study's predictions to `path` in `fmt`, whole or not at all (via `<path>.partial`); the rows."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown predictions export format {fmt!r}; use csv or jsonl")
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("wb") as target:
            written = _write(study, fmt, target)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return written


def prediction_chunks(study: Study, fmt: str, counter: _RowCounter | None = None) -> Iterator[bytes]:
    """The export as byte chunks (tests and small downloads; `write_predictions` for files); `counter` counts
    the predictions on the way."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown predictions export format {fmt!r}; use csv or jsonl")
    counter = counter or _RowCounter()
    if connection.vendor == "postgresql":
        return _copied(study, fmt, counter)
    return (text.encode("utf-8") for text in _python_chunks(study, fmt, counter))


def _write(study: Study, fmt: str, target: IO[bytes]) -> int:
    """Write the chunks to `target`, a megabyte at a time; the number of predictions written."""
    counter = _RowCounter()
    pending: list[bytes] = []
    size = 0
    chunks = prediction_chunks(study, fmt, counter)
    try:
        for chunk in chunks:
            pending.append(chunk)
            size += len(chunk)
            if size >= WRITE_BYTES:
                target.write(b"".join(pending))
                pending.clear()
                size = 0
        target.write(b"".join(pending))
    finally:
        # End the COPY (or cursor) now, in the caller's transaction: after a failed write the traceback keeps
        # the generator alive, and closing it later would end the COPY in whatever transaction the garbage
        # collector runs in (as transfer/exports.write_export does).
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return counter.rows


class _RowCounter:
    """Counts the rows read on the way (a quoted cell may hold line ends, so the file's lines do not say)."""

    def __init__(self) -> None:
        self.rows = 0

    def counted(self, rows: Iterable[Any]) -> Iterator[Any]:
        for row in rows:
            self.rows += 1
            yield row


def _where() -> tuple[str, str]:
    """FROM ... WHERE ... ORDER BY of the study's predictions (one parameter: the study's id)."""
    sql = (
        f"FROM {table(Prediction)} p JOIN {table(Verifier)} v ON v.{quote('id')} = p.{quote('verifier_id')} "
        f"JOIN {table(Item)} i ON i.{quote('id')} = p.{quote('item_id')} WHERE v.{quote('study_id')} = %s"
    )
    return sql, f"ORDER BY p.{quote('id')}"


def _python_chunks(study: Study, fmt: str, counter: _RowCounter | None = None) -> Iterator[str]:
    """SQLite: the rows through the project's writers (csvsafe for CSV), a batch at a time."""
    rows = (counter or _RowCounter()).counted(prediction_rows(study))
    if fmt == "csv":
        return csv_lines(EXPORT_COLUMNS, rows, batch=BATCH)
    return _jsonl(rows)


def prediction_rows(study: Study) -> Iterator[tuple[Any, ...]]:
    """The study's prediction rows (EXPORT_COLUMNS), read BATCH at a time; `order_labels` as data, not text."""
    source, order = _where()
    select = ", ".join(sql for _, sql in _COLUMNS)
    json_at = EXPORT_COLUMNS.index("order_labels")
    # chunked_cursor: a server-side cursor on PostgreSQL (a plain one would fetch every row at once).
    with connection.chunked_cursor() as cursor:
        cursor.execute(f"SELECT {select} {source} {order}", [study.pk])
        while batch := cursor.fetchmany(BATCH):
            for row in batch:
                values = list(row)
                if isinstance(values[json_at], str):
                    values[json_at] = json.loads(values[json_at])
                yield tuple(values)


def _jsonl(rows: Iterable[tuple[Any, ...]]) -> Iterator[str]:
    parts: list[str] = []
    for row in rows:
        parts.append(json.dumps(dict(zip(EXPORT_COLUMNS, row, strict=True)), ensure_ascii=False, separators=(",", ":")))
        parts.append("\n")
        if len(parts) >= 2 * BATCH:
            yield "".join(parts)
            parts.clear()
    yield "".join(parts)


def _safe_sql(name: str, sql: str) -> str:
    """A CSV cell's SQL: text a spreadsheet would run as a formula gets a leading quote (csvsafe's rule),
    empty text is NULL (an empty cell, as csv.writer writes it, not PostgreSQL's quoted "")."""
    if name not in _TEXT:
        return f"{sql} AS {quote(name)}"
    # ascii(): the first character's code (= + - @ tab CR), without the substring left() would build.
    return (
        f"CASE WHEN ascii({sql}) IN (61, 43, 45, 64, 9, 13) THEN '''' || {sql} "
        f"ELSE NULLIF({sql}, '') END AS {quote(name)}"
    )


def _copied(study: Study, fmt: str, counter: _RowCounter) -> Iterator[bytes]:
    """PostgreSQL: the file's text written by the database (COPY TO STDOUT), read MESSAGES rows at a time.

    COPY TO sends each row as one message ("always one per row", PostgreSQL's protocol docs), the
    CSV's header first: so the rows are counted by their messages, and a row's own LF is its
    message's last byte."""
    source, order = _where()
    if fmt == "csv":
        select = ", ".join(_safe_sql(name, sql) for name, sql in _COLUMNS)
        statement = f"COPY (SELECT {select} {source} {order}) TO STDOUT WITH (FORMAT csv, HEADER)"
    else:
        select = ", ".join(f"{sql} AS {quote(name)}" for name, sql in _COLUMNS)
        statement = f"COPY (SELECT row_to_json(r)::text FROM (SELECT {select} {source} {order}) r) TO STDOUT"
    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.cursor.copy(statement, [study.pk]) as copy:
            rows = iter(copy)
            if fmt == "csv":
                yield _crlf_rows([next(rows)])  # the header, not a prediction
            while batch := list(islice(rows, MESSAGES)):
                counter.rows += len(batch)
                if fmt == "csv":
                    yield _crlf_rows(batch)
                else:  # COPY's text format doubles each backslash (its escape); JSON text holds no raw tab,
                    # CR or LF, so that is its only change to a line of row_to_json, undone here
                    yield b"".join(batch).replace(b"\\\\", b"\\")


#: COPY messages (rows) joined into one chunk: per-row Python work is what the export adds to a bare COPY.
MESSAGES = 4096


def _crlf_rows(messages: list[Any]) -> bytes:
    """Whole CSV rows (one per message) with PostgreSQL's LF row ends as the project's CRLF (csvsafe.LINE_END).

    When the LFs are as many as the rows, none is inside a quoted cell: one replace does all. Else each
    row's last byte is its end, and any other LF is a quoted cell's own (kept)."""
    data = b"".join(messages)
    if data.count(b"\n") == len(messages):
        return data.replace(b"\n", LINE_END.encode("ascii"))
    return b"".join(bytes(message)[:-1] + LINE_END.encode("ascii") for message in messages)


@contextmanager
def copied_csv(study: Study) -> Iterator[IO[bytes]]:
    """PostgreSQL: the study's predictions as the database's own CSV (header, LF rows, values as stored: NULL an
    empty cell, empty text ``""``), read as a file (the Hugging Face export's parquet reads it with pyarrow)."""
    source, order = _where()
    select = ", ".join(f"{sql} AS {quote(name)}" for name, sql in _COLUMNS)
    statement = f"COPY (SELECT {select} {source} {order}) TO STDOUT WITH (FORMAT csv, HEADER)"
    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.cursor.copy(statement, [study.pk]) as copy:
            yield io.BufferedReader(_MessageReader(copy), buffer_size=1 << 20)


class _MessageReader(io.RawIOBase):
    """COPY's messages as a readable stream."""

    def __init__(self, messages: Iterable[Any]) -> None:
        self._messages = iter(messages)
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        """As many whole messages as fit (a message is a row, ~100 bytes: one call per row would cost more
        than the row), the rest of one that does not kept for the next call."""
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view):
            if not self._left:
                message = next(self._messages, None)
                if message is None:
                    break
                self._left = bytes(message)
            size = min(len(view) - filled, len(self._left))
            view[filled : filled + size] = self._left[:size]
            self._left = self._left[size:]
            filled += size
        return filled
