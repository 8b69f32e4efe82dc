"""The one CSV writer: every CSV the project hands out (exports, report) goes through it.

Two things every such file needs, whoever writes it:

- cells a spreadsheet would run as a formula (text starting with = + - @,
  tab or CR) get a leading ``'`` (CSV injection);
- rows end in CRLF, as in RFC 4180: the csv module quotes a cell holding
  "\\r" only when "\\r" is part of the line terminator, and an unquoted "\\r"
  splits the row for every reader.

Lives in `annotation` so that both apps can use it (metaeval imports
annotation, never the other way round).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

LINE_END = "\r\n"
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralise_cell(value: Any) -> Any:
    """Prefix a quote to text a spreadsheet would run as a formula; numbers are data, left alone."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def csv_cell(value: Any) -> Any:
    """One value as a CSV cell: nested data as JSON, None as empty, text neutralised."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        value = json.dumps(value, ensure_ascii=False)
    return neutralise_cell(value)


class _LineBuffer:
    """A write target for csv.writer that hands back what was written."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def take(self) -> str:
        text = "".join(self.parts)
        self.parts.clear()
        return text


def csv_lines(header: Sequence[str], rows: Iterable[Sequence[Any]], *, batch: int = 2000) -> Iterator[str]:
    """Stream a CSV (header first) as text chunks of about `batch` rows each; every cell made safe."""
    buffer = _LineBuffer()
    writer = csv.writer(buffer, lineterminator=LINE_END)
    writer.writerow(header)
    pending = 0
    for row in rows:
        writer.writerow([csv_cell(value) for value in row])
        pending += 1
        if pending >= batch:
            yield buffer.take()
            pending = 0
    yield buffer.take()


def csv_chunks(columns: list[str], rows: Iterable[dict[str, Any]], *, batch: int = 2000) -> Iterator[str]:
    """Stream dict rows as CSV with `columns` (header first), in chunks of about `batch` rows."""
    return csv_lines(columns, ([row.get(column) for column in columns] for row in rows), batch=batch)


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A whole CSV as one string (for files small enough to build in memory)."""
    return "".join(csv_lines(header, rows))
