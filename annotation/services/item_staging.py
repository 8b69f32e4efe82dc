"""Staging big item imports: rows go into a private temporary table, then live in one short transaction.

Why: on SQLite a transaction that writes holds the database's only write lock
until it ends. An import that parsed, checked and inserted a million items in
one transaction held it for ~30 s, past the 20 s busy timeout, so annotators'
submits failed and the background worker died on "database is locked". Here
the slow part (reading, checking and converting the file) writes its rows
into a TEMPORARY table: private to the import's connection, never the main
database's write lock (SQLite keeps temporary tables in a separate database;
PostgreSQL does not log them), and gone with the connection if the process is
killed, so nothing is left to clean up. Only the switch (one INSERT ... SELECT
and one UPDATE ... FROM, run inside the database) holds the lock. To the user
the import is still all or nothing: nobody else can see the staged rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from ..bulk import insert_rows
from ..formats import RecordError
from ..models import Item, StagedItem, Study
from ..rawsql import Names, quote
from .errors import ImportFailed

STAGED_FIELDS = [
    "line",
    "new_rank",
    "target",
    "external_id",
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
    """A fresh temporary staging table for one import, dropped afterwards.

    Its columns are made by selecting no rows from the item table (plus the
    staging's own), so their types follow the items' on both databases.
    """
    item, staged = Names(Item), Names(StagedItem)
    name = quote(f"claimlab_staging_{uuid.uuid4().hex}")
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMPORARY TABLE {name} AS SELECT {item.position} AS {staged.line}, "
            f"{item.position} AS {staged.new_rank}, {item.id} AS {staged.target}, {item.external_id}, "
            f"{', '.join(getattr(item, column) for column in COPIED)} FROM {item.table} WHERE 1 = 0"
        )
    try:
        yield Staging(study=study, table=name)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {name}")


def stage_rows(staging: Staging, rows: Sequence[tuple]) -> None:
    """Write rows (tuples in STAGED_FIELDS order) to the staging table; takes no lock others wait on."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        insert_rows(StagedItem, STAGED_FIELDS, rows, into=staging.table)
        return
    # One transaction per batch instead of one per row (autocommit), ~2x faster. Not
    # transaction.atomic(): it begins IMMEDIATE (settings), which takes the main database's
    # write lock; a DEFERRED transaction that writes only the temporary table never does.
    with connection.cursor() as cursor:
        cursor.execute("BEGIN DEFERRED")
        try:
            insert_rows(StagedItem, STAGED_FIELDS, rows, into=staging.table)
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")


def switch_live(staging: Staging, *, systems: list[str], now: datetime) -> None:
    """Make the staged rows the study's items in one transaction, or raise ImportFailed.

    Between staging and this switch another import may have added some of the
    same ids (the unique constraint would stop it anyway; here they are named
    by line), or set the study's systems differently.
    """
    study = staging.study
    staged, item = Names(StagedItem), Names(Item)
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        conflicts = _new_ids_taken_since(staging)
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
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {item.table} ({item.study}, {item.external_id}, {item.position}, {', '.join(columns)}, "
                f"{item.slots_taken}, {item.created_at}, {item.updated_at}) "
                f"SELECT %s, {staged.external_id}, %s + {staged.new_rank}, {', '.join(columns)}, 0, %s, %s "
                f"FROM {staging.table} WHERE {staged.target} IS NULL ORDER BY {staged.new_rank}",
                [study.pk, last or 0, stamp, stamp],
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


def _new_ids_taken_since(staging: Staging) -> list[RecordError]:
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
            "import the file again (with --update to replace it)",
            "id",
        )
        for line, external_id in rows
    ]
