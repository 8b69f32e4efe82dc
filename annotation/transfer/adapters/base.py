"""What every adapter shares: the records it yields, where they came from, and bounded readers.

An adapter reads one pipeline's own file and yields Claimlab records (the
shapes of docs/formats.md), each with the line or record of the SOURCE
file it came from, so that every problem found later, by the import services,
still names a place in the file the user has.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from annotation.lib.formats import RecordError, json_type
from annotation.transfer.adapters.documents import jsonl_objects as jsonl_objects
from annotation.transfer.adapters.documents import whole_json as whole_json

# Where an import was asked for, and how each face names an option (the import services read them too).
from annotation.transfer.faces import API as API
from annotation.transfer.faces import CLI as CLI
from annotation.transfer.faces import OPTIONS as OPTIONS
from annotation.transfer.faces import PAGE as PAGE
from annotation.transfer.faces import option as option
from annotation.vocab import canonical_label

ITEMS = "items"
ANNOTATIONS = "annotations"
PREDICTIONS = "predictions"
#: Responses that abstained (no claims): kept on the study so the respond ratio counts them.
ABSTENTIONS = "abstentions"
TARGETS = (ITEMS, ANNOTATIONS, PREDICTIONS)


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
    #: The face the import came from (CLI, PAGE or API): errors name its options (`option`).
    face: str = CLI

    def option(self, name: str) -> str:
        return option(name, self.face)

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


# --- reading fields ------------------------------------------------------------------------


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
