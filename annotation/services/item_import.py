"""Importing items from JSONL or CSV, all or nothing."""

from __future__ import annotations

from datetime import datetime
from typing import IO

from django.db import transaction
from django.utils import timezone

from ..bulk import insert_rows
from ..formats import MAX_LINE_BYTES, RecordError
from ..importers import ItemRow, parse_preference_item, parse_verification_item
from ..models import Item, Study
from .errors import ErrorCollector, ImportResult

BATCH_SIZE = 1000
INSERTED_FIELDS = [
    "study",
    "external_id",
    "position",
    "domain",
    "summary",
    "payload",
    "response_id",
    "system",
    "gold_label",
    "gold_raw",
    "slots_taken",
    "created_at",
    "updated_at",
]
UPDATED_FIELDS = ["domain", "summary", "payload", "response_id", "system", "gold_label", "gold_raw", "updated_at"]


def import_items(
    *,
    study: Study,
    stream: IO[bytes],
    fmt: str,
    update: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> ImportResult:
    """Import a study's items from a binary stream; raise ImportFailed on any problem.

    The file is read one line at a time and written in batches inside one
    transaction: when a problem turns up (even on the last line) the whole
    import is rolled back. Every remaining line is still checked, so the user
    sees all problems at once instead of one per attempt.
    """
    errors = ErrorCollector()
    result = ImportResult()
    now = timezone.now()
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        existing = dict(Item.objects.filter(study=study).values_list("external_id", "pk"))
        next_position = (
            Item.objects.filter(study=study).order_by("-position").values_list("position", flat=True).first() or 0
        ) + 1
        seen: dict[str, int] = {}
        systems = list(study.systems)
        to_create: list[tuple] = []
        to_update: list[Item] = []
        for line, record in errors.records(stream, fmt, result, max_line_bytes=max_line_bytes):
            row = _parse(study, line, record, systems)
            if isinstance(row, list):
                errors.extend(row)
                continue
            if study.is_preference and not systems:
                systems = list(row.payload["lists"])
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
            if row.external_id in existing:
                if not update:
                    errors.extend(
                        [
                            RecordError(
                                line,
                                f"item {row.external_id!r} already exists in this study; use --update to replace it",
                                "id",
                            )
                        ]
                    )
                    continue
                to_update.append(_item(study, row, pk=existing[row.external_id]))
            elif not errors:
                to_create.append(_new_item_row(study, row, next_position, now))
                next_position += 1
            if errors:
                to_create.clear()
                to_update.clear()
            elif len(to_create) >= BATCH_SIZE or len(to_update) >= BATCH_SIZE:
                result.created += _flush(to_create, to_update, result)
        errors.raise_if_any()
        result.created += _flush(to_create, to_update, result)
        if study.is_preference and systems != study.systems:
            study.systems = systems
            study.save(update_fields=["systems", "updated_at"])
    return result


def _parse(study: Study, line: int, record: dict, systems: list[str]) -> ItemRow | list[RecordError]:
    if study.is_preference:
        return parse_preference_item(line, record, systems=systems, labels=study.labels, aliases=study.label_aliases)
    return parse_verification_item(line, record, labels=study.labels, aliases=study.label_aliases)


def _item(study: Study, row: ItemRow, *, pk: int) -> Item:
    return Item(
        pk=pk,
        study=study,
        external_id=row.external_id,
        domain=row.domain,
        summary=row.summary,
        payload=row.payload,
        response_id=row.response_id,
        system=row.system,
        gold_label=row.gold_label,
        gold_raw=row.gold_raw,
    )


def _new_item_row(study: Study, row: ItemRow, position: int, now: datetime) -> tuple:
    """A new item as a tuple in INSERTED_FIELDS order (see annotation/bulk.py for why)."""
    return (
        study.pk,
        row.external_id,
        position,
        row.domain,
        row.summary,
        row.payload,
        row.response_id,
        row.system,
        row.gold_label,
        row.gold_raw,
        0,
        now,
        now,
    )


def _flush(to_create: list[tuple], to_update: list[Item], result: ImportResult) -> int:
    """Write pending rows; returns how many were created (updates counted on result)."""
    created = insert_rows(Item, INSERTED_FIELDS, to_create)
    if to_update:
        now = timezone.now()
        for item in to_update:
            item.updated_at = now
        Item.objects.bulk_update(to_update, UPDATED_FIELDS, batch_size=BATCH_SIZE)
        result.updated += len(to_update)
    to_create.clear()
    to_update.clear()
    return created
