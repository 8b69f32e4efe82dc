"""Rows for PostgreSQL's COPY in its text format, formatted here instead of by psycopg's `write_row`.

Why: psycopg adapts every value through its registry of dumpers, about 8 us for an import's row
of 15 columns on this machine, 4x what formatting the few types imports write takes here (str,
int, float, bool, None, aware datetimes): at a million rows that was six seconds of an import's
Python time, which is what bounds it (the server stores rows meanwhile). The lines are sent in
chunks of `CHUNK_LINES` through psycopg's own `Copy.write`.

The text format (PostgreSQL's COPY docs): columns separated by a tab, a row ended by a newline,
NULL as \\N, and in a value a backslash, tab, newline or carriage return escaped by a backslash.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

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
