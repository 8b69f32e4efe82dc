"""Several reads of one PostgreSQL snapshot at once, each as one list per column (a big report's reads).

Why side by side: a 100,000-item study's report begins by reading its 300,000 labels, their
assignments and its 100,000 items, and each read is mostly the server's work (a scan). One after
the other they leave a core idle while the report waits. Inside the report build's REPEATABLE
READ transaction the snapshot is exported (``pg_export_snapshot``) and each further read runs on
a connection of its own that imports it, as ``pg_dump --jobs`` does: every read sees exactly what
the caller's transaction sees.

Why one list per column: rows through psycopg cost Python work per row (a tuple, or with ``COPY
... TO STDOUT`` a block per row: 0.35 s of client CPU at 300,000 labels), which holds the GIL, so
the reads' threads could not overlap it. ``array_agg`` sends each column as one value that
psycopg's C loaders turn into a list (binary format): 0.03 s at 300,000 rows, and building the
arrays is within the server's scan time. Integer columns skip the list: ``_IntegerArrayLoader``
reads them straight into numpy arrays.

Anywhere else (no transaction, READ COMMITTED, a transaction that has written, a savepoint)
the reads run one after the other on the caller's connection, as does a read whose own connection
fails (it is read again in line: slower, never wrong). PostgreSQL only: SQLite has no arrays.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection, transaction
from psycopg import sql
from psycopg.adapt import Buffer
from psycopg.pq import Format
from psycopg.types.array import ArrayBinaryLoader

logger = logging.getLogger(__name__)

#: The snapshot of the caller's transaction, or NULL when another connection could not share it:
#: a transaction that has written (its rows are its own until it commits) or that re-reads the
#: data at each statement (READ COMMITTED: the next statement would see another snapshot).
_EXPORT = (
    "SELECT CASE WHEN pg_current_xact_id_if_assigned() IS NULL"
    " AND current_setting('transaction_isolation') = 'repeatable read'"
    " THEN pg_export_snapshot() END"
)


@dataclass(frozen=True)
class Query:
    """A SELECT (Django's SQL and parameters) and how many columns it returns."""

    sql: str
    params: Sequence[Any]
    width: int

    def as_columns(self) -> str:
        """The query as one row: each column's values in one array, all in the rows' order."""
        names = ", ".join(f"c{k}" for k in range(self.width))
        arrays = ", ".join(f"array_agg(c{k})" for k in range(self.width))
        return f"SELECT {arrays} FROM ({self.sql}) AS read_rows ({names})"


def column_lists(queries: Sequence[Query]) -> list[list[list[Any] | np.ndarray]]:
    """Each query's columns (rows in the same order in each), all of one snapshot, in order.

    A column is a list, or an int64 numpy array for an integer column (PostgreSQL int2, int4, int8).
    """
    snapshot = _shared_snapshot() if len(queries) > 1 else None
    if snapshot is None:
        return [_columns(query) for query in queries]
    side = [_SideRead(snapshot, query) for query in queries[1:]]
    for read in side:
        read.thread.start()
    first = _columns(queries[0])
    for read in side:
        read.thread.join()
    return [first, *(read.columns if read.columns is not None else _columns(read.query) for read in side)]


def _shared_snapshot() -> str | None:
    """The caller's snapshot for other connections to import, or None when it cannot be shared."""
    if connection.vendor != "postgresql" or not connection.in_atomic_block or connection.savepoint_ids:
        return None  # pg_export_snapshot fails in a subtransaction, and a failure would abort the caller's
    with connection.cursor() as cursor:
        cursor.execute(_EXPORT)
        return cursor.fetchone()[0]


def _columns(query: Query) -> list[list[Any] | np.ndarray]:
    with connection.cursor() as cursor:
        for oid in _INTEGER_ARRAYS:
            cursor.cursor.adapters.register_loader(oid, _IntegerArrayLoader)
        cursor.cursor.execute(query.as_columns(), query.params, binary=True)
        row = cursor.cursor.fetchone()
    return [[] if values is None else values for values in row]  # no rows: array_agg is NULL


#: The binary array types of int2, int4 and int8 (PostgreSQL's built-in OIDs) and each element's size.
_INTEGER_ARRAYS = {1005: 2, 1007: 4, 1016: 8}
_OID_SIZES = {21: 2, 23: 4, 20: 8}
_ARRAY_HEADER = struct.Struct("!iii")  # dimensions, has NULLs, element type
_DIMENSION = struct.Struct("!ii")  # each dimension's size and lower bound


class _IntegerArrayLoader(ArrayBinaryLoader):
    """A one-dimensional integer array without NULLs (the ids of a read) as an int64 numpy array.

    Why: psycopg's loader makes a Python int of each element, and numpy then reads them back:
    at 300,000 labels that was 0.1 s of a big report's first sections, holding the GIL the
    reads' threads need. Each element is its length and its big-endian value, read here by one
    structured view. Anything else (NULLs, several dimensions) goes through psycopg's own loader.
    """

    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray | list[Any]:  # type: ignore[override]  # a list only where psycopg reads it
        dimensions, has_nulls, element_oid = _ARRAY_HEADER.unpack_from(data)
        if dimensions == 0:
            return np.empty(0, dtype=np.int64)
        size = _OID_SIZES.get(element_oid)
        if dimensions != 1 or has_nulls or size is None:
            return super().load(data)
        length = _DIMENSION.unpack_from(data, _ARRAY_HEADER.size)[0]
        element = np.dtype([("length", ">i4"), ("value", f">i{size}")])
        values = np.frombuffer(data, dtype=element, count=length, offset=_ARRAY_HEADER.size + _DIMENSION.size)["value"]
        return values.astype(np.int64)


class _SideRead:
    """One read on a thread of its own, with its own connection, in the exported snapshot."""

    def __init__(self, snapshot: str, query: Query):
        self.snapshot, self.query = snapshot, query
        self.columns: list[list[Any] | np.ndarray] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with transaction.atomic():  # this thread's own connection
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    # a utility statement takes no bound parameter: the id is quoted as a literal
                    statement = sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(self.snapshot))
                    cursor.execute(statement.as_string(cursor.cursor.connection))
                self.columns = _columns(self.query)
        except Exception:  # e.g. no connection left: the caller reads it in line
            logger.warning("a read alongside the report's could not run; it is read in line", exc_info=True)
        finally:
            connection.close()
