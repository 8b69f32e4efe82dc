"""Rows for PostgreSQL's COPY in its text format, formatted here instead of by psycopg's `write_row`.

Why: psycopg adapts every value through its registry of dumpers, about 8 us for an import's row
of 15 columns on this machine, 4x what formatting the few types imports write takes here (str,
int, float, bool, None, aware datetimes): at a million rows that was six seconds of an import's
Python time, which is what bounds it (the server stores rows meanwhile). The lines are sent in
chunks of `CHUNK_LINES` through psycopg's own `Copy.write`.

The text format (PostgreSQL's COPY docs): columns separated by a tab, a row ended by a newline,
NULL as \\N, and in a value a backslash, tab, newline or carriage return escaped by a backslash.

`OpenCopy` keeps such a COPY open while an import reads its file (the item and prediction imports on
PostgreSQL: transfer/services/item_copy.py, metaeval/verifiers/services/prediction_copy.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from datetime import datetime
from typing import Any

from django.db import connection

#: Lines sent to the server at once.
CHUNK_LINES = 500


def text_value(value: Any) -> str:
    """One value as the text format writes it."""
    if value is None:
        return "\\N"
    kind = type(value)
    if kind is str:
        if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
            return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
        return value
    if kind is bool:
        return "t" if value else "f"
    if kind is int:
        return str(value)
    if kind is float:
        return repr(value)  # round-trips exactly; 'inf' and 'nan' are float8 input too
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("a naive datetime has no place in a timestamp with time zone")
        return value.isoformat()
    raise TypeError(f"no COPY text form for {kind.__name__}")


class CopyTextWriter:
    """Writes rows to an open psycopg `Copy` (text format), a chunk of lines at a time; `flush` before ending it."""

    def __init__(self, copy: Any) -> None:
        self._copy = copy
        self._lines: list[str] = []

    def write_row(self, values: Sequence[Any]) -> None:
        self._lines.append("\t".join(map(text_value, values)))
        if len(self._lines) >= CHUNK_LINES:
            self.flush()

    def flush(self) -> None:
        if self._lines:
            self._copy.write("\n".join(self._lines) + "\n")
            self._lines.clear()


def copies_directly(*, update: bool) -> bool:
    """Whether an import COPYs its rows straight into the live table: PostgreSQL, no updates asked for
    (transfer/services/item_copy.py says why; an update import stages, on either database)."""
    return connection.vendor == "postgresql" and not update


def lock_imports(namespace: int, study_id: int) -> None:
    """PostgreSQL: wait for the study's other import of this kind (`namespace`) to end; held until this transaction
    ends. Elsewhere nothing: SQLite's writing transactions are serialised anyway."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [namespace, study_id])


class OpenCopy:
    """A COPY into `table` (quoted) of `columns` (quoted), open from `start` to `end` while an import reads its
    file; rows in the text format (`CopyTextWriter`). Meanwhile the connection runs no other statement."""

    def __init__(self, table: str, columns: Sequence[str]) -> None:
        self._statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
        self._writer: CopyTextWriter | None = None
        self._copying = ExitStack()

    @property
    def is_open(self) -> bool:
        return self._writer is not None

    def start(self) -> None:
        cursor = self._copying.enter_context(connection.cursor())
        self._copying.enter_context(connection.wrap_database_errors)
        self._writer = CopyTextWriter(self._copying.enter_context(cursor.cursor.copy(self._statement)))

    def write_row(self, values: Sequence[Any]) -> None:
        if self._writer is None:
            raise RuntimeError("start() the COPY before writing to it")
        self._writer.write_row(values)

    def end(self, failure: BaseException | None = None) -> None:
        """End the COPY: its rows stored, not yet committed; or, given the `failure` that stops the import, abort
        it (the server discards the rows; the transaction is rolled back after). Ending an ended COPY does nothing."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        if failure is None:
            writer.flush()
            self._copying.close()
        else:
            self._copying.__exit__(type(failure), failure, failure.__traceback__)
