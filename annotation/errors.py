"""Outcomes and errors shared by the annotation services."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.db import transaction

from annotation.lib.formats import FileFormatError, RecordError, iter_records

MAX_REPORTED_ERRORS = 50


class ServiceError(Exception):
    """A request a service refuses, with a message meant for the user."""


class ImportFailed(ServiceError):
    """An import that changed nothing, with its first problems by line and field."""

    def __init__(self, errors: list[RecordError], total: int | None = None) -> None:
        self.errors = errors[:MAX_REPORTED_ERRORS]
        self.total = total if total is not None else len(errors)
        shown = "\n".join(f"  {error}" for error in self.errors)
        more = f"\n  ... and {self.total - len(self.errors)} more" if self.total > len(self.errors) else ""
        super().__init__(f"import failed, nothing was changed ({self.total} problem(s)):\n{shown}{more}")


@dataclass
class ImportResult:
    """What an import did."""

    created: int = 0
    updated: int = 0
    records: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"created": self.created, "updated": self.updated, "records": self.records, "notes": self.notes}


class ErrorCollector:
    """Keeps the first problems of an import and counts all of them."""

    def __init__(self) -> None:
        self.errors: list[RecordError] = []
        self.total = 0

    def extend(self, errors: list[RecordError]) -> None:
        self.total += len(errors)
        room = MAX_REPORTED_ERRORS - len(self.errors)
        if room > 0:
            self.errors.extend(errors[:room])

    def __bool__(self) -> bool:
        return self.total > 0

    def fail(self) -> ImportFailed:
        return ImportFailed(self.errors, self.total)

    def records(
        self, stream: IO[bytes], fmt: str, result: ImportResult, *, max_line_bytes: int
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """The readable records of a file, counted on `result`; the rest become errors here."""
        try:
            for line, record in iter_records(stream, fmt, max_line_bytes=max_line_bytes):
                result.records += 1
                if isinstance(record, RecordError):
                    self.extend([record])
                    continue
                yield line, record
        except FileFormatError as exc:
            self.extend([exc.error])
        if not self and result.records == 0:
            self.extend([RecordError(None, "the file holds no records")])

    def raise_if_any(self) -> None:
        """Roll back the import's transaction and report, if anything was wrong."""
        if self:
            transaction.set_rollback(True)
            raise self.fail()
