"""Long lists of flat records as JSON text straight from their columns: the text ``json.dumps`` gives.

Why: a big report stores its long lists (every response's scores, the disagreement list) as JSON
text, a thousand records per chunk. Making each record a dict and handing the dicts to ``json.dumps``
cost about 6 µs per record (0.6 s of a 100,000-item report's first build). Here each column becomes
its distinct JSON tokens (``str`` of the ints, ``repr`` of the floats, ``json``'s own C string encoder:
each distinct value written once) and a code per record; the fields whose values repeat (counts,
scores, systems) are written together once per distinct combination, so a record is one ``%`` format of
its few varying tokens (an id) and that combination's text. The text is the very text
``json.dumps(records, allow_nan=False)`` writes with its default separators
(tests/metaeval/test_report_shared_codes.py compares them), so what is stored does not change.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii  # json's own (C) string encoder
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Coded", "RecordWindows", "SpilledTexts", "coded", "json_list", "record_texts", "string_tokens"]

_NOT_COMPLIANT = "Out of range float values are not JSON compliant"
#: A field whose distinct values are more than this share of the records is written record by record.
_VARYING = 0.25


@dataclass(frozen=True)
class Coded:
    """One field of many records: its distinct JSON tokens, and each record's token by its code."""

    codes: np.ndarray
    tokens: list[str]

    def __len__(self) -> int:
        return len(self.codes)

    def each(self) -> list[str]:
        """The record by record tokens."""
        return np.asarray(self.tokens, dtype=object)[self.codes].tolist() if len(self.codes) else []


def string_tokens(values: Sequence[Any]) -> list[str]:
    """Each value as ``json.dumps`` writes it (ensure_ascii, allow_nan False): strings by json's own encoder."""
    return [
        encode_basestring_ascii(value) if type(value) is str else json.dumps(value, allow_nan=False) for value in values
    ]


def coded(column: np.ndarray, known: np.ndarray | None = None, *, distinct: bool = True) -> Coded:
    """One column's values as JSON tokens, ``null`` where ``known`` is False (the value stands for None).

    The values are the Python scalars ``tolist`` gives, which is what the dicts held: ints as ``int``,
    floats as ``float`` (``repr``, as json writes them; NaN or infinity is an error, as there), bools,
    anything else as ``json.dumps`` writes it. ``distinct`` False: a column of (nearly) unique values,
    written value by value without looking for repeats.
    """
    kind = column.dtype.kind
    if kind == "f":
        present = known if known is not None else np.ones(len(column), dtype=bool)
        if not np.isfinite(column[present]).all():
            raise ValueError(_NOT_COMPLIANT)
        zero = column == 0
        if zero.any() and np.signbit(column[zero]).any():  # -0.0 and 0.0 are one value to a hash table
            out = _one_by_one(column.tolist(), float.__repr__)
        else:
            out = _each_distinct_once(column, float.__repr__)
    elif kind == "b":
        out = Coded(column.astype(np.int64), ["false", "true"])
    elif kind in "iu":
        out = _each_distinct_once(column, str)
    elif distinct and pd.api.types.infer_dtype(column, skipna=False) == "string":
        # only strings are grouped by value: a hash table takes 1, 1.0 and True for one value, json does not
        codes, uniques = pd.factorize(column, use_na_sentinel=False)
        out = Coded(codes.astype(np.int64), string_tokens(uniques.tolist()))
    else:
        out = _one_by_one(column.tolist(), None)
    if known is not None and not known.all():
        codes = out.codes.copy()
        codes[~known] = len(out.tokens)
        out = Coded(codes, [*out.tokens, "null"])
    return out


def _one_by_one(values: list[Any], write: Callable[[Any], str] | None) -> Coded:
    tokens = string_tokens(values) if write is None else list(map(write, values))
    return Coded(np.arange(len(tokens), dtype=np.int64), tokens)


def _each_distinct_once(column: np.ndarray, write: Callable[[Any], str]) -> Coded:
    """``write`` of each distinct value (NaN: ``null``): scores and counts repeat."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    tokens = [*map(write, uniques.tolist()), "null"]
    return Coded(np.where(codes < 0, len(tokens) - 1, codes).astype(np.int64), tokens)


def record_texts(names: Sequence[str], columns: Sequence[Coded]) -> list[str]:
    """Each record's JSON object text (as ``json.dumps`` writes it) from its fields ``names``' columns."""
    if not columns or not len(columns[0]):
        return []
    n = len(columns[0])
    keys = [f"{encode_basestring_ascii(name)}: " for name in names]
    # consecutive fields with few distinct values form a group, written once per distinct combination
    groups: list[list[int]] = []
    for field, column in enumerate(columns):
        repeats = len(column.tokens) <= max(1, _VARYING * n)
        if repeats and groups and groups[-1][0] >= 0 and _fits([columns[f] for f in groups[-1]] + [column]):
            groups[-1].append(field)
        else:
            groups.append([field] if repeats else [-1 - field])  # -1 - field: a field written record by record
    parts: list[list[str]] = []
    for group in groups:
        if group[0] < 0:
            field = -1 - group[0]
            parts.append([keys[field] + token for token in columns[field].each()])
        else:
            parts.append(_group_texts([columns[f] for f in group], [keys[f] for f in group]))
    template = "{" + ", ".join(["%s"] * len(parts)) + "}"
    return [template % row for row in zip(*parts, strict=True)]


def json_list(texts: Sequence[str]) -> str:
    """``json.dumps`` of the records whose texts these are (``record_texts``)."""
    return "[" + ", ".join(texts) + "]"


class RecordWindows:
    """A long list's record texts, written a window of records at a time (``write(start, stop)``) as its
    chunks are asked for in order: never the whole list's texts at once (a million claims' responses)."""

    WINDOW = 64_000

    def __init__(self, write: Callable[[int, int], list[str]], length: int) -> None:
        self._write, self._length = write, length
        self._start, self._texts = 0, list[str]()

    def json_text(self, start: int, stop: int) -> str:
        start, stop, _ = slice(start, stop).indices(self._length)
        if stop <= start:
            return "[]"
        if not (self._start <= start and stop <= self._start + len(self._texts)):
            end = min(self._length, max(stop, start + self.WINDOW))
            self._start, self._texts = start, self._write(start, end)
        return json_list(self._texts[start - self._start : stop - self._start])


def _fits(columns: list[Coded]) -> bool:
    """The columns' codes combine into one int64 (a mixed-radix number)."""
    size = 1
    for column in columns:
        size *= max(len(column.tokens), 1)
    return size < 2**62


def _group_texts(columns: list[Coded], keys: list[str]) -> list[str]:
    """Each record's text of these fields ("key": token, ...), written once per distinct combination."""
    combined = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        combined = combined * max(len(column.tokens), 1) + column.codes
    _, first, which = np.unique(combined, return_index=True, return_inverse=True)
    texts = [
        ", ".join(key + column.tokens[column.codes[row]] for key, column in zip(keys, columns, strict=True))
        for row in first.tolist()
    ]
    return np.asarray(texts, dtype=object)[which.reshape(-1)].tolist()


class SpilledTexts:
    """A long list's record texts written once to a temporary file, and read back a slice at a time.

    Why (issue 35): a report of a million responses keeps a per-response list for each source it scores
    (the human majority, the reference, each verifier) until the report is stored. As columns that was about
    130 MB per list, and with three verifiers the build took 1.8 GB. Here a list holds 8 bytes per record
    in memory (where its text starts) and its text on disk. It is the text ``json_list`` writes: records
    joined by ``", "``, every character ASCII (``record_texts`` escapes the rest as json does).
    """

    _SEPARATOR = ", "
    #: Records written at a time: their texts, joined and encoded, are held three times over while written
    #: (at a million responses this is the build's peak: 20 MB a copy at 64,000 records).
    WINDOW = 16_000

    def __init__(self, write: Callable[[int, int], list[str]], length: int, window: int | None = None):
        self._file = tempfile.TemporaryFile(prefix="claimlab-rows-")
        self._length = length
        self._starts = np.zeros(length + 1, dtype=np.int64)  # record i is at [starts[i], starts[i + 1] - 2)
        try:
            at, window = 0, window or self.WINDOW
            for start in range(0, length, window):
                texts = write(start, min(length, start + window))
                data = "".join(text + self._SEPARATOR for text in texts).encode("ascii")
                sizes = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + len(self._SEPARATOR)
                self._starts[start + 1 : start + 1 + len(texts)] = at + np.cumsum(sizes)
                self._file.write(data)
                at += len(data)
            self._file.flush()
        except BaseException:
            self._file.close()  # a full disk: nothing half-written is kept
            raise

    def __len__(self) -> int:
        return self._length

    def json_text(self, start: int, stop: int) -> str:
        """``json_list`` of records ``start`` to ``stop``, read from the file."""
        start, stop, _ = slice(start, stop).indices(self._length)
        if stop <= start:
            return "[]"
        begin, end = int(self._starts[start]), int(self._starts[stop]) - len(self._SEPARATOR)
        return "[" + os.pread(self._file.fileno(), end - begin, begin).decode("ascii") + "]"

    def records(self, positions: range) -> list[Any]:
        """The records at ``positions`` (a slice's ``range``), as json reads them back."""
        if not positions:
            return []
        low = min(positions[0], positions[-1])
        rows = json.loads(self.json_text(low, max(positions[0], positions[-1]) + 1))
        return [rows[position - low] for position in positions]

    def close(self) -> None:
        self._file.close()
