"""Staging big item imports: rows go into a private temporary table, then live in one short transaction.

Why, and how the temporary table works: annotation/lib/staging.py. Used on SQLite, and by update
imports on PostgreSQL; there an import that only adds items COPYs them live instead (item_copy.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from annotation.errors import ImportFailed
from annotation.lib.formats import RecordError
from annotation.lib.rawsql import Names
from annotation.lib.staging import stage_rows, temporary_table
from annotation.models import Item, StagedItem, Study
from annotation.progress.counters import items_switched, recount_study
from annotation.transfer.faces import CLI, again_to_replace
from annotation.workbench.adaptive import unopened_slots

STAGED_FIELDS = [
    "line",
    "new_rank",
    "target",
    "external_id",
    "claim_rank",
    "domain",
    "summary",
    "payload",
    "response_id",
    "system",
    "gold_label",
    "gold_raw",
]
#: Item columns copied from a staged row, by the INSERT and by the UPDATE of the switch.
COPIED = ["domain", "summary", "payload", "response_id", "system", "gold_label", "gold_raw"]
MAX_REPORTED_CONFLICTS = 50


@dataclass(frozen=True)
class Staging:
    """A temporary table holding one import's rows (StagedItem's columns)."""

    study: Study
    table: str  # quoted


@contextmanager
def staging_for(study: Study) -> Iterator[Staging]:
    """A fresh temporary staging table for one item import, dropped afterwards."""
    item, staged = Names(Item), Names(StagedItem)
    shape = (
        f"SELECT {item.position} AS {staged.line}, {item.position} AS {staged.new_rank}, {item.id} AS {staged.target}, "
        f"{item.external_id}, {item.claim_rank}, {', '.join(getattr(item, column) for column in COPIED)} "
        f"FROM {item.table} WHERE 1 = 0"
    )
    with temporary_table(shape) as table:
        yield Staging(study=study, table=table)


def stage_item_rows(staging: Staging, rows: Sequence[tuple]) -> None:
    """Write rows (tuples in STAGED_FIELDS order) to the staging table; takes no lock others wait on."""
    stage_rows(StagedItem, STAGED_FIELDS, staging.table, rows)


def switch_live(staging: Staging, *, systems: list[str], now: datetime, face: str = CLI) -> None:
    """Make the staged rows the study's items in one transaction, or raise ImportFailed.

    Between staging and this switch another import may have added some of the
    same ids (the unique constraint would stop it anyway; here they are named
    by line, with how `face` replaces them: transfer/faces.py), or set the study's systems differently.
    """
    study = staging.study
    staged, item = Names(StagedItem), Names(Item)
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        conflicts = _new_ids_taken_since(staging, face)
        if conflicts:
            raise ImportFailed(conflicts)
        if study.is_preference and locked.systems and systems != locked.systems:
            raise ImportFailed(
                [
                    RecordError(
                        None,
                        f"the study's systems became {locked.systems} while this file (systems {systems}) "
                        "was being read; nothing was changed",
                    )
                ]
            )
        last = Item.objects.filter(study=study).order_by("-position").values_list("position", flat=True).first()
        stamp = connection.ops.adapt_datetimefield_value(now)
        columns = [getattr(item, name) for name in COPIED]
        updates = _updates_any(staging)
        if not updates:
            items_switched(study, staging.table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {item.table} ({item.study}, {item.external_id}, {item.position}, {item.claim_rank}, "
                f"{', '.join(columns)}, {item.slots_taken}, {item.created_at}, {item.updated_at}) "
                f"SELECT %s, {staged.external_id}, %s + {staged.new_rank}, {staged.claim_rank}, {', '.join(columns)}, "
                "%s, %s, %s "
                f"FROM {staging.table} WHERE {staged.target} IS NULL ORDER BY {staged.new_rank}",
                # adaptive overlap: a new item's unopened slots count as taken (workbench/adaptive.py)
                [study.pk, last or 0, unopened_slots(locked), stamp, stamp],
            )
            # UPDATE ... FROM: PostgreSQL, and SQLite since 3.33.
            assignments = ", ".join(f"{column} = s.{column}" for column in columns)
            cursor.execute(
                f"UPDATE {item.table} SET {assignments}, {item.updated_at} = %s FROM {staging.table} AS s "
                f"WHERE s.{staged.target} = {item.table}.{item.id}",
                [stamp],
            )
        if study.is_preference and systems != locked.systems:
            locked.systems = systems
            locked.save(update_fields=["systems", "updated_at"])
            study.systems = systems
        if updates:
            recount_study(study)  # updated items may have moved domain (their labels with them) or gained gold


def responses_mixed_with_stored(staging: Staging) -> list[RecordError]:
    """Staged claims whose response the study's stored items (those this import does not replace) give another
    system or domain (item_import.ResponseCheck: a response's claims share both); the first few, by line.

    Read before the switch's transaction: at a million stored items the join takes a second, which the
    switch's lock should not hold. An import racing this one could still mix a response; the report names it.
    """
    staged, item = Names(StagedItem), Names(Item)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.{staged.line}, s.{staged.response_id}, s.{staged.system}, s.{staged.domain}, "
            f"i.{item.external_id}, i.{item.system}, i.{item.domain} FROM {staging.table} AS s "
            f"JOIN {item.table} AS i ON i.{item.study} = %s AND i.{item.response_id} = s.{staged.response_id} "
            f"WHERE s.{staged.response_id} <> '' "
            f"AND (i.{item.system} <> s.{staged.system} OR i.{item.domain} <> s.{staged.domain}) "
            f"AND NOT EXISTS (SELECT 1 FROM {staging.table} AS r WHERE r.{staged.target} = i.{item.id}) "
            f"ORDER BY s.{staged.line}, i.{item.position}, i.{item.id} LIMIT %s",
            [staging.study.pk, MAX_REPORTED_CONFLICTS],
        )
        rows = cursor.fetchall()
    return mixed_response_errors(rows)


def mixed_response_errors(rows: Sequence[Sequence]) -> list[RecordError]:
    """The problems of new claims whose response a stored item gives another system or domain: rows of
    (line, response, system, domain, stored item's id, its system, its domain), by line; one per line."""
    problems: list[RecordError] = []
    named: set[int] = set()
    for line, response, system, domain, stored_id, stored_system, stored_domain in rows:
        if line in named:
            continue  # the response's first stored item is named; its others say the same
        named.add(line)
        name, theirs, ours = (
            ("system", stored_system, system) if stored_system != system else ("domain", stored_domain, domain)
        )
        problems.append(
            RecordError(
                line,
                f"response {response!r} is {name} {theirs!r} in the study's item {stored_id!r}, here {ours!r}: "
                f"the claims of one response share its {name}",
                name,
            )
        )
    return problems


def _updates_any(staging: Staging) -> bool:
    """Whether the import changes items that exist already (not only adds new ones)."""
    staged = Names(StagedItem)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {staging.table} WHERE {staged.target} IS NOT NULL LIMIT 1")
        return cursor.fetchone() is not None


def _new_ids_taken_since(staging: Staging, face: str) -> list[RecordError]:
    """Staged new items whose id another import has added since this one read the study."""
    staged, item = Names(StagedItem), Names(Item)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.{staged.line}, s.{staged.external_id} FROM {staging.table} AS s "
            f"JOIN {item.table} AS i ON i.{item.study} = %s AND i.{item.external_id} = s.{staged.external_id} "
            f"WHERE s.{staged.target} IS NULL ORDER BY s.{staged.line} LIMIT %s",
            [staging.study.pk, MAX_REPORTED_CONFLICTS],
        )
        rows = cursor.fetchall()
    return [
        RecordError(
            line,
            f"item {external_id!r} was added to the study by another import while this file was being read; "
            + again_to_replace(face),
            "id",
        )
        for line, external_id in rows
    ]
