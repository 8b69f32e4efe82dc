"""Reading a pipeline's file as JSON Lines, or as the one JSON document it turned out to be.

Researchers often save a pipeline's records as one JSON array, or pretty-print one
record over many lines. Read line by line, such a file gave one "invalid JSON" per
line; here it gets one error saying what it is, and an adapter that knows its records
may come as a list reads the array's objects as its records, each at the line where
it starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import IO, Any

from annotation.lib.formats import (
    MAX_JSON_DEPTH,
    MAX_LINE_BYTES,
    NUL,
    FileFormatError,
    JSONTooDeep,
    RecordError,
    iter_jsonl,
    json_error_text,
    json_type,
    loads,
    nul_error_in_json,
    raw_nul_error,
    single_document_error,
)

_BOM = b"\xef\xbb\xbf"
#: Whole-JSON reads when the caller names no limit (Context.max_json_bytes's default).
DEFAULT_LIMIT = 200 * 1024 * 1024
_BETWEEN = re.compile(r"[\s,]*")

Objects = Iterator[tuple[int, dict[str, Any] | RecordError]]


def whole_json(stream: IO[bytes], *, limit: int) -> Any | RecordError:
    """A whole-JSON file (Label Studio, SAFE, FActScore's scorer output), read up to `limit` bytes.

    Bigger files, bad UTF-8, truncated JSON and nesting deeper than
    formats.MAX_JSON_DEPTH become one error naming the place.
    """
    text = _whole_text(stream, limit)
    return text if isinstance(text, RecordError) else _parse(text)


def jsonl_objects(stream: IO[bytes], *, arrays: bool = False, limit: int = DEFAULT_LIMIT) -> Objects:
    """The objects of a JSON Lines file with their lines (formats.MAX_LINE_BYTES and depth limits apply).

    A file that is one JSON document instead gets one error saying so; with `arrays` (the adapter's
    records may come as a list), a JSON array's objects are read as the records."""
    shape = _document_shape(stream)
    if shape is not None:
        yield from _document(stream, shape, arrays=arrays, limit=limit)
        return
    yield from _lines(stream)


def _lines(stream: IO[bytes]) -> Objects:
    try:
        yield from iter_jsonl(stream, max_line_bytes=MAX_LINE_BYTES)
    except FileFormatError as exc:
        yield exc.error.line or 0, exc.error


def _document_shape(stream: IO[bytes]) -> str | None:
    """'array' or 'object' when the file's first line opens a JSON document that is no JSON Lines record;
    None otherwise (or for a stream that cannot be read again). The stream is left where it was."""
    if not stream.seekable():
        return None
    start = stream.tell()
    try:
        while raw := stream.readline(MAX_LINE_BYTES + 8):
            text = raw.removeprefix(_BOM).decode("utf-8", errors="replace").strip()
            if not text:
                continue
            if text.startswith("["):
                return "array"
            if text.startswith("{") and not _parses(text):
                return "object"
            return None
        return None
    finally:
        stream.seek(start)


def _document(stream: IO[bytes], shape: str, *, arrays: bool, limit: int) -> Objects:
    start = stream.tell()
    text = _whole_text(stream, limit)
    if isinstance(text, RecordError):
        yield text.line or 0, text
        return
    value = _parse(text)
    if isinstance(value, RecordError):
        if shape == "object" and text.strip().splitlines()[0].strip() != "{":
            stream.seek(start)  # no document after all: a JSON Lines file whose first record is broken
            yield from _lines(stream)
        else:
            yield value.line or 0, value
        return
    if isinstance(value, list) and arrays:
        for line, record in zip(_element_lines(text), value, strict=True):
            if isinstance(record, dict):
                yield line, record
            else:
                yield (
                    line,
                    RecordError(line, f"expected a JSON object per record of the array, got {json_type(record)}"),
                )
        return
    if isinstance(value, list):
        described = f"an array of {len(value)} value(s)"
    elif isinstance(value, dict):
        described = f"an object spanning lines 1-{text.count(chr(10)) + 1}"
    else:
        described = json_type(value)
    yield 0, single_document_error(described)


def _element_lines(text: str) -> Iterator[int]:
    """The line where each element of the (valid) JSON array `text` starts."""
    decoder = json.JSONDecoder()
    index = text.index("[") + 1
    line, counted = 1, 0
    while True:
        index = _BETWEEN.match(text, index).end()  # type: ignore[union-attr]
        if index >= len(text) or text[index] == "]":
            return
        line += text.count("\n", counted, index)
        counted = index
        yield line
        _, index = decoder.raw_decode(text, index)


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _whole_text(stream: IO[bytes], limit: int) -> str | RecordError:
    data = stream.read(limit + 1)
    if len(data) > limit:
        return RecordError(None, f"the file is larger than the limit of {limit:,} bytes for a whole-JSON file")
    data = data.removeprefix(_BOM)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RecordError(
            None, f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        )
    if not text.strip():
        return RecordError(None, "the file is empty")
    return text


def _parse(text: str) -> Any | RecordError:
    if NUL in text:  # a raw NUL byte: invalid JSON, but the one rule (lib/formats.py) says more
        return raw_nul_error(text)
    try:
        value = loads(text, max_depth=MAX_JSON_DEPTH)
    except json.JSONDecodeError as exc:
        return RecordError(exc.lineno, json_error_text(exc))
    except JSONTooDeep as exc:
        return RecordError(None, f"invalid JSON: {exc}")
    refused = nul_error_in_json(text, value)
    return refused if refused is not None else value
