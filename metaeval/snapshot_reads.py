"""Several ``COPY ... TO STDOUT`` reads of one PostgreSQL snapshot at once (a big report's label and item reads).

Why: a 100,000-item study's report begins by reading its 300,000 labels and its 100,000 items,
and each read is mostly the server's work (a join, a scan). One after the other they leave a core
idle while the report waits. Inside the report build's REPEATABLE READ transaction the snapshot
is exported (``pg_export_snapshot``) and each further read runs on a connection of its own that
imports it, as ``pg_dump --jobs`` does: every read sees exactly what the caller's transaction sees.

Anywhere else (SQLite, no transaction, READ COMMITTED, a transaction that has written, a savepoint)
the reads run one after the other on the caller's connection, as does a read whose own connection
fails (it is read again in line: slower, never wrong).
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Sequence

from django.db import connection, transaction
from psycopg import sql

logger = logging.getLogger(__name__)

#: The snapshot of the caller's transaction, or NULL when another connection could not share it:
#: a transaction that has written (its rows are its own until it commits) or that re-reads the
#: data at each statement (READ COMMITTED: the next statement would see another snapshot).
_EXPORT = (
    "SELECT CASE WHEN pg_current_xact_id_if_assigned() IS NULL"
    " AND current_setting('transaction_isolation') = 'repeatable read'"
    " THEN pg_export_snapshot() END"
)


def copy_rows(queries: Sequence[str]) -> list[bytes]:
    """The CSV text of each ``COPY (query) TO STDOUT (FORMAT CSV)``, all of one snapshot, in order."""
    snapshot = _shared_snapshot() if len(queries) > 1 else None
    if snapshot is None:
        return [_copy(query) for query in queries]
    side = [_SideRead(snapshot, query) for query in queries[1:]]
    for read in side:
        read.thread.start()
    first = _copy(queries[0])
    for read in side:
        read.thread.join()
    return [first, *(read.data if read.data is not None else _copy(read.query) for read in side)]


def _shared_snapshot() -> str | None:
    """The caller's snapshot for other connections to import, or None when it cannot be shared."""
    if connection.vendor != "postgresql" or not connection.in_atomic_block or connection.savepoint_ids:
        return None  # pg_export_snapshot fails in a subtransaction, and a failure would abort the caller's
    with connection.cursor() as cursor:
        cursor.execute(_EXPORT)
        return cursor.fetchone()[0]


def _copy(query: str) -> bytes:
    data = io.BytesIO()
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY ({query}) TO STDOUT (FORMAT CSV)") as copy:
            for block in copy:
                data.write(block)
    return data.getvalue()


class _SideRead:
    """One read on a thread of its own, with its own connection, in the exported snapshot."""

    def __init__(self, snapshot: str, query: str):
        self.snapshot, self.query = snapshot, query
        self.data: bytes | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with transaction.atomic():  # this thread's own connection
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    # a utility statement takes no bound parameter: the id is quoted as a literal
                    statement = sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(self.snapshot))
                    cursor.execute(statement.as_string(cursor.cursor.connection))
                self.data = _copy(self.query)
        except Exception:  # e.g. no connection left: the caller reads it in line
            logger.warning("a read alongside the report's could not run; it is read in line", exc_info=True)
        finally:
            connection.close()
