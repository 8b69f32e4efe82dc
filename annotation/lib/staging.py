"""Private temporary tables that big imports stage their rows in.

Used by the item and annotation imports (transfer/services/item_staging.py,
annotation_staging.py) and by metaeval's prediction import
(metaeval/verifiers/services/prediction_staging.py).

Why: on SQLite a transaction that writes holds the database's only write lock
until it ends. An import that read, checked and inserted a whole big file in
one transaction held it for as long as that took (~30 s for a million items),
past the 20 s busy timeout: annotators' submits failed and the background
worker died on "database is locked". Instead the slow part (reading, checking
and converting the file) writes its rows into a TEMPORARY table: private to
the import's connection, never taking the main database's write lock (SQLite
keeps temporary tables in a separate database; PostgreSQL does not log them),
and gone with the connection if the process is killed, so nothing is left to
clean up. Only the switch, a few INSERT ... SELECT statements run inside the
database in one transaction, holds the lock. To the user the import stays all
or nothing: nobody else can see the staged rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from django.db import connection, models

from annotation.lib.bulk import insert_rows
from annotation.lib.rawsql import quote


@contextmanager
def temporary_table(columns_of_no_rows: str) -> Iterator[str]:
    """A fresh temporary table (its quoted name) shaped by `SELECT ... WHERE 1 = 0`, dropped afterwards.

    Selecting no rows from the real tables gives the staging columns the same
    types as the columns they will be copied into, on both databases.
    """
    name = quote(f"claimlab_staging_{uuid.uuid4().hex}")
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {name} AS {columns_of_no_rows}")
    try:
        yield name
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {name}")


def stage_rows(model: type[models.Model], field_names: Sequence[str], table: str, rows: Sequence[tuple]) -> None:
    """Write rows (tuples in `field_names` order of the staging model) to a staging table."""
    if not rows:
        return
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        insert_rows(model, field_names, rows, into=table)
        return
    # One transaction per batch instead of one per row (autocommit), ~2x faster. Not
    # transaction.atomic(): it begins IMMEDIATE (settings), which takes the main database's
    # write lock; a DEFERRED transaction that writes only the temporary table never does.
    with connection.cursor() as cursor:
        cursor.execute("BEGIN DEFERRED")
        try:
            insert_rows(model, field_names, rows, into=table)
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")
