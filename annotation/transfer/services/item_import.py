"""Importing items from JSONL or CSV, all or nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from functools import partial
from typing import IO

from django.db import transaction
from django.utils import timezone

from annotation.errors import ErrorCollector, ImportFailed, ImportResult
from annotation.lib.copy_text import copies_directly
from annotation.lib.formats import MAX_LINE_BYTES, RecordError
from annotation.lib.gc_pause import paused_collection
from annotation.lib.randomisation import claim_rank
from annotation.models import Item, Study
from annotation.transfer.faces import CLI, to_replace
from annotation.transfer.importers import ItemRow, parse_preference_item, parse_verification_item
from annotation.transfer.services.item_copy import ItemCopy, finish_copy, item_copy_for, lock_item_imports
from annotation.transfer.services.item_staging import (
    Staging,
    responses_mixed_with_stored,
    stage_item_rows,
    staging_for,
)
from annotation.transfer.services.item_staging import switch_live as switch_staged

BATCH_SIZE = 1000


def import_items(
    *,
    study: Study,
    stream: IO[bytes],
    fmt: str,
    update: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    face: str = CLI,
) -> ImportResult:
    """Import a study's items from a binary stream; raise ImportFailed on any problem.

    The file is read one line at a time and its rows written while it is read,
    with no lock others wait on: on PostgreSQL an import that adds items COPYs them
    straight into the item table in its own transaction (item_copy.py); otherwise
    they are staged a batch at a time in a private table (item_staging.py: no
    transaction spans the whole file, so annotators keep working during a big import)
    and switched live in one short transaction. When a problem turns up (even on the
    last line) nothing becomes live. Every remaining line is still checked, so the
    user sees all problems at once instead of one per attempt. `face` (transfer/faces.py): where the
    import was asked for, so an error that asks for `update` names it as that face does.
    """
    errors = ErrorCollector()
    result = ImportResult()
    now = timezone.now()
    systems = list(study.systems)
    read = partial(_rows_to_store, study, stream, fmt, update=update, systems=systems, errors=errors, result=result)
    with paused_collection():
        if copies_directly(update=update):
            with item_copy_for(study, now=now) as target:
                for row in read(target.existing, face=face, max_line_bytes=max_line_bytes):
                    target.add(row)
                if errors:
                    raise errors.fail()
                target.copy.end()
                switch_live(target, systems=systems, now=now, face=face)
            return result
        existing = dict(Item.objects.filter(study=study).values_list("external_id", "pk"))
        with staging_for(study) as staging:
            batch: list[tuple] = []
            for row in read(existing, face=face, max_line_bytes=max_line_bytes):
                batch.append(row)
                if len(batch) >= BATCH_SIZE:
                    stage_item_rows(staging, batch)
                    batch.clear()
            if errors:
                raise errors.fail()
            stage_item_rows(staging, batch)
            if existing and not study.is_preference:
                mixed = responses_mixed_with_stored(staging)
                if mixed:
                    raise ImportFailed(mixed)
            switch_live(staging, systems=systems, now=now, face=face)
    return result


def switch_live(target: Staging | ItemCopy, *, systems: list[str], now: datetime, face: str = CLI) -> None:
    """Make the import's rows live in its transaction (the COPY's, or the staging switch's), or raise ImportFailed.

    Holds the study's item-import lock (item_copy.lock_item_imports): on PostgreSQL, imports of one
    study switch one at a time, an import that copies holding it throughout.
    """
    if isinstance(target, ItemCopy):
        finish_copy(target, systems=systems)
        return
    with transaction.atomic():
        lock_item_imports(target.study)
        switch_staged(target, systems=systems, now=now, face=face)


def _rows_to_store(
    study: Study,
    stream: IO[bytes],
    fmt: str,
    existing: dict[str, int],
    *,
    update: bool,
    systems: list[str],
    errors: ErrorCollector,
    result: ImportResult,
    face: str,
    max_line_bytes: int,
) -> Iterator[tuple]:
    """The file's items to write, as tuples in item_staging.STAGED_FIELDS order, counted on `result`.

    Problems go to `errors`; after the first, the rest of the file is still checked but no row is
    given. A preference study without systems takes those of the first item (into `systems`).
    """
    seen: dict[str, int] = {}
    responses = ResponseCheck(enabled=not study.is_preference)
    new_rank = 0
    for line, record in errors.records(stream, fmt, result, max_line_bytes=max_line_bytes):
        row = _parse(study, line, record, systems)
        if isinstance(row, list):
            errors.extend(row)
            continue
        if study.is_preference and not systems:
            systems[:] = list(row.payload["lists"])
        if row.external_id in seen:
            errors.extend(
                [
                    RecordError(
                        line, f"duplicate id {row.external_id!r}, first seen on line {seen[row.external_id]}", "id"
                    )
                ]
            )
            continue
        seen[row.external_id] = line
        mixed = responses.check(line, row)
        if mixed:
            errors.extend(mixed)
            continue
        target = existing.get(row.external_id)
        if target is not None and not update:
            errors.extend(
                [RecordError(line, f"item {row.external_id!r} already exists in this study; {to_replace(face)}", "id")]
            )
            continue
        if errors:
            continue  # the import will fail: check the rest, store nothing more
        if target is None:
            new_rank += 1
            result.created += 1
        else:
            result.updated += 1
        yield _staged_row(study, line, row, None if target else new_rank, target)


class ResponseCheck:
    """A verification study's response is one system's answer in one domain: the claims of one ``response_id``
    share its ``system`` and ``domain`` (the factuality scores count claims per response, and refuse a response
    with two). Checked within the file here; against the stored items by ``responses_mixed_with_stored``."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.first: dict[str, tuple[str, str, int]] = {}  # response id -> system, domain, line first seen

    def check(self, line: int, row: ItemRow) -> list[RecordError]:
        if not self.enabled or not row.response_id:
            return []
        system, domain, first_line = self.first.setdefault(row.response_id, (row.system, row.domain, line))
        return [
            RecordError(
                line,
                f"response {row.response_id!r} is {name} {theirs!r} on line {first_line}, here {ours!r}: "
                f"the claims of one response share its {name}",
                name,
            )
            for name, theirs, ours in (("system", system, row.system), ("domain", domain, row.domain))
            if theirs != ours
        ]


def _parse(study: Study, line: int, record: dict, systems: list[str]) -> ItemRow | list[RecordError]:
    if study.is_preference:
        return parse_preference_item(line, record, systems=systems, labels=study.labels, aliases=study.label_aliases)
    return parse_verification_item(line, record, labels=study.labels, aliases=study.label_aliases)


def _staged_row(study: Study, line: int, row: ItemRow, new_rank: int | None, target: int | None) -> tuple:
    """An item row as a tuple in item_staging.STAGED_FIELDS order (see annotation/lib/bulk.py for why tuples)."""
    return (
        line,
        new_rank,
        target,
        row.external_id,
        claim_rank(study.seed, row.external_id),
        row.domain,
        row.summary,
        row.payload,
        row.response_id,
        row.system,
        row.gold_label,
        row.gold_raw,
    )
