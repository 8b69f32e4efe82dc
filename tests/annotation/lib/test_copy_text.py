"""COPY text rows formatted by annotation/lib/copy_text.py equal psycopg's own formatting of the same values."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from psycopg._copy_base import TextFormatter
from psycopg.adapt import Transformer

from annotation.lib.copy_text import CHUNK_LINES, CopyTextWriter, text_value


def psycopg_line(values: tuple) -> bytes:
    """psycopg's text-format line for `values` (the reference: what `Copy.write_row` sends)."""
    formatter = TextFormatter(Transformer())
    return bytes(formatter.write_row(values)) + bytes(formatter.end())


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice("ab \\\t\n\r\"'{}[]é€\U0001f600N,;") for _ in range(rng.randint(0, 12)))


def test_rows_of_the_types_imports_write_equal_psycopgs():
    rng = random.Random(35)
    for _ in range(5_000):
        values = (
            rng.randint(-(2**62), 2**62),
            random_text(rng),
            None,
            rng.choice([True, False]),
            rng.choice([rng.random(), -rng.random() * 1e12, 0.1, 1e-300, float(rng.randint(0, 9))]),
            '{"claim": "a \\"quoted\\" word", "evidence": []}',
        )
        assert ("\t".join(map(text_value, values)) + "\n").encode() == psycopg_line(values)


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 12, 7, 4, 57, 42, 164961, tzinfo=UTC),
        datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    ],
)
def test_aware_datetimes_read_back_as_the_same_instant(moment):
    assert datetime.fromisoformat(text_value(moment)) == moment


def test_what_has_no_place_in_a_row_is_refused():
    with pytest.raises(ValueError, match="naive"):
        text_value(datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="no COPY text form for dict"):
        text_value({"a": 1})


class Sink:
    def __init__(self) -> None:
        self.chunks: list[str] = []

    def write(self, data: str) -> None:
        self.chunks.append(data)


def test_rows_are_sent_a_chunk_at_a_time_and_all_of_them_by_flush():
    sink = Sink()
    writer = CopyTextWriter(sink)
    for n in range(CHUNK_LINES + 3):
        writer.write_row((n, "x"))
    assert len(sink.chunks) == 1
    writer.flush()
    assert "".join(sink.chunks) == "".join(f"{n}\tx\n" for n in range(CHUNK_LINES + 3))


def test_a_copy_not_started_takes_no_row_and_ends_as_nothing():
    from annotation.lib.copy_text import OpenCopy

    copy = OpenCopy('"t"', ['"a"'])
    assert not copy.is_open
    with pytest.raises(RuntimeError, match="start"):
        copy.write_row((1,))
    copy.end()  # nothing open: nothing to end
    copy.end(ValueError("the import failed"))
    assert not copy.is_open
