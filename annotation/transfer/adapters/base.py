"""What every adapter shares: the records it yields, where they came from, and bounded readers.

An adapter reads one pipeline's own file and yields Claimlab records (the
shapes of docs/formats.md), each with the line or record of the SOURCE
file it came from, so that every problem found later, by the import services,
still names a place in the file the user has.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from annotation.lib.formats import (
    MAX_JSON_DEPTH,
    MAX_LINE_BYTES,
    NUL,
    FileFormatError,
    JSONTooDeep,
    RecordError,
    iter_jsonl,
    json_type,
    loads,
    nul_error_in_json,
    raw_nul_error,
)
from annotation.vocab import canonical_label

ITEMS = "items"
ANNOTATIONS = "annotations"
PREDICTIONS = "predictions"
#: Responses that abstained (no claims): kept on the study so the respond ratio counts them.
ABSTENTIONS = "abstentions"
TARGETS = (ITEMS, ANNOTATIONS, PREDICTIONS)
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Origin:
    """Where a record came from: a line of a JSON Lines file, or a named record of a whole-JSON file."""

    line: int | None
    record: str = ""

    def error(self, message: str, field_name: str | None = None) -> RecordError:
        return RecordError(self.line, f"{self.record}: {message}" if self.record else message, field_name)


@dataclass(frozen=True)
class Converted:
    """One Claimlab record (an item, annotation, prediction or abstention) and its origin."""

    target: str
    origin: Origin
    record: dict[str, Any]


@dataclass
class SourceFile:
    """An uploaded or named file: its bytes and its name (adapters read names for defaults)."""

    stream: IO[bytes]
    name: str = ""

    @property
    def stem(self) -> str:
        return file_stem(self.name)


def file_stem(name: str) -> str:
    """A file's name without folders and extensions ('' for no name)."""
    return Path(name).name.split(".")[0] if name else ""


@dataclass
class Context:
    """What an adapter may know of the study and the user's options; it never touches the database itself."""

    kind: str
    labels: list[str]
    aliases: dict[str, str]
    systems: list[str] = field(default_factory=list)
    pair: SourceFile | None = None
    system_names: tuple[str, str] | None = None
    verifier: str = ""
    max_json_bytes: int = 200 * 1024 * 1024
    #: claim text -> [(item id, response id)] of the study's items, read only when an adapter asks.
    claims_index: Callable[[], dict[str, list[tuple[str, str]]]] = field(default=lambda: {})
    skipped: Counter[str] = field(default_factory=Counter)

    def label(self, *candidates: str) -> str | None:
        """The first candidate the study's labels or aliases know, as the study's canonical label."""
        for candidate in candidates:
            found = canonical_label(candidate, self.labels, self.aliases)
            if found is not None:
                return found
        return None


Yield = Iterator[Converted | RecordError]


class Adapter(ABC):
    """One pipeline's file format: what it can import into and how it converts."""

    name = ""
    title = ""
    targets: tuple[str, ...] = ()

    @abstractmethod
    def convert(self, source: SourceFile, target: str, context: Context) -> Yield:
        """Claimlab records (or line-numbered errors) for `target` from the pipeline's file."""


# --- bounded readers ----------------------------------------------------------------------


def jsonl_objects(stream: IO[bytes]) -> Iterator[tuple[int, dict[str, Any] | RecordError]]:
    """The objects of a JSON Lines file with their lines (formats.MAX_LINE_BYTES and depth limits apply)."""
    try:
        yield from iter_jsonl(stream, max_line_bytes=MAX_LINE_BYTES)
    except FileFormatError as exc:
        yield exc.error.line or 0, exc.error


def whole_json(stream: IO[bytes], *, limit: int) -> Any | RecordError:
    """A whole-JSON file (Label Studio, SAFE, FActScore's scorer output), read up to `limit` bytes.

    Bigger files, bad UTF-8, truncated JSON and nesting deeper than
    formats.MAX_JSON_DEPTH become one error naming the place.
    """
    data = stream.read(limit + 1)
    if len(data) > limit:
        return RecordError(None, f"the file is larger than the limit of {limit:,} bytes for a whole-JSON file")
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RecordError(
            None, f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        )
    if not text.strip():
        return RecordError(None, "the file is empty")
    if NUL in text:  # a raw NUL byte: invalid JSON, but the one rule (lib/formats.py) says more
        return raw_nul_error(text)
    try:
        value = loads(text, max_depth=MAX_JSON_DEPTH)
    except json.JSONDecodeError as exc:
        return RecordError(exc.lineno, f"invalid JSON: {exc.msg} at column {exc.colno}")
    except JSONTooDeep as exc:
        return RecordError(None, f"invalid JSON: {exc}")
    refused = nul_error_in_json(text, value)
    return refused if refused is not None else value


def text_field(record: dict[str, Any], name: str, origin: Origin, *, required: bool = True) -> str | RecordError:
    """A string field of a source record, or an error naming it."""
    value = record.get(name)
    if value is None:
        return origin.error("is missing", name) if required else ""
    if not isinstance(value, str):
        return origin.error(f"must be a string, got {json_type(value)}", name)
    if required and not value.strip():
        return origin.error("is empty", name)
    return value


def string(value: Any) -> str:
    """A source value that should be text, or '' (tolerant readers for optional fields)."""
    return value if isinstance(value, str) else ""


def short(text: str, limit: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
