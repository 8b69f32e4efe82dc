"""Recognising database faults that pass: lock contention, lost connections, conflicts, a read-only server.

Lock contention (SQLite's "database is locked", PostgreSQL's lock timeouts) means "another
writer held the lock too long": background jobs retry it with backoff (lib/job_runs.py).
Every fault of this module (`database_fault`) is temporary from a client's point of view:
nothing of the request was saved and the same request may succeed in a moment, so a request
that meets one answers 503 with Retry-After (`fault_response`, from middleware.py for views
and from api_errors.server_error for the rest), never a 500:

- ``database_busy``: a lock wait that gave up, a statement cancelled by its timeout;
- ``database_unavailable``: the connection was lost or refused (a server restart or
  failover, ``pg_terminate_backend``: AdminShutdown, "server closed the connection"), too
  many connections, SQLite's file could not be opened or read;
- ``database_conflict``: a serialisation failure or a deadlock that was not retried (or
  exhausted its retries);
- ``database_read_only``: the server is a read-only replica (or SQLite's file is read-only).

The file store's outage (an S3-compatible bucket refusing, timing out or answering 5xx while an
upload is saved or an export handed out, lib/storage.is_storage_outage) passes the same way and
answers the same 503, with ``storage_unavailable``.

A programming error (a missing table, a syntax error, a constraint) is none of these and
stays a 500. After a lost connection the request's connections are closed
(`close_broken_connections`), so the next request connects afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import Error, InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from annotation.lib.storage import is_storage_outage

V = TypeVar("V", bound=Callable[..., object])

#: PostgreSQL SQLSTATEs of a lock wait that gave up: lock_not_available, deadlock_detected.
_PG_LOCK_CODES = {"55P03", "40P01"}
_MESSAGES = ("database is locked", "database table is locked", "lock timeout", "deadlock detected")

BUSY = "database_busy"
UNAVAILABLE = "database_unavailable"
CONFLICT = "database_conflict"
READ_ONLY = "database_read_only"
STORAGE_UNAVAILABLE = "storage_unavailable"

MESSAGES = {
    BUSY: "The database is busy with another write (for example a large import); nothing was saved. Try again shortly.",
    UNAVAILABLE: "The database connection was lost (the database may be restarting); nothing was saved. "
    "Try again shortly.",
    CONFLICT: "This change collided with another one at the same moment; nothing was saved. Try again shortly.",
    READ_ONLY: "The database accepts no changes at the moment (read-only, for example during a failover); "
    "nothing was saved. Try again shortly.",
    STORAGE_UNAVAILABLE: "The file store does not answer at the moment (it may be restarting); nothing was saved. "
    "Try again shortly.",
}

#: SQLite's messages (sqlite3.OperationalError has no code) of a fault that passes, by kind.
_SQLITE_MESSAGES = (
    ("database is locked", BUSY),
    ("database table is locked", BUSY),
    ("readonly database", READ_ONLY),
    ("unable to open database file", UNAVAILABLE),
    ("disk i/o error", UNAVAILABLE),
)


def is_lock_error(exc: BaseException) -> bool:
    """Whether `exc` is a database error caused by another transaction holding a lock."""
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) in _PG_LOCK_CODES or getattr(cause, "pgcode", None) in _PG_LOCK_CODES:
        return True
    text = str(exc).lower()
    return any(message in text for message in _MESSAGES)


def _sqlstate(exc: BaseException) -> str | None:
    for candidate in (exc, exc.__cause__):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(code, str):
            return code
    return None


def _from_psycopg(exc: BaseException) -> bool:
    return any(type(candidate).__module__.startswith("psycopg") for candidate in (exc, exc.__cause__))


def _kind_of_sqlstate(code: str) -> str | None:
    if code.startswith(("08", "57P", "53")):  # connection exception, operator intervention, resources
        return UNAVAILABLE
    if code in ("55P03", "57014"):  # lock_not_available, query_canceled (statement or lock timeout)
        return BUSY
    if code.startswith("40"):  # serialization_failure, deadlock_detected, ...
        return CONFLICT
    if code == "25006":  # read_only_sql_transaction: a hot standby, or default_transaction_read_only
        return READ_ONLY
    return None


def database_fault(exc: BaseException) -> str | None:
    """The kind of passing database fault `exc` is (BUSY, UNAVAILABLE, CONFLICT, READ_ONLY), or None."""
    if not isinstance(exc, Error) and not _from_psycopg(exc):
        return None
    if is_lock_error(exc):
        return BUSY
    code = _sqlstate(exc)
    if code is not None:
        return _kind_of_sqlstate(code)
    if isinstance(exc, InterfaceError):  # "connection already closed"
        return UNAVAILABLE
    if _from_psycopg(exc):
        # psycopg's operational errors without a SQLSTATE are the client's own: the connection is
        # lost ("server closed the connection unexpectedly", "consuming input failed") or refused.
        names = {kind.__name__ for candidate in (exc, exc.__cause__) for kind in type(candidate).__mro__}
        return UNAVAILABLE if names & {"OperationalError", "InterfaceError"} else None
    text = str(exc).lower()
    return next((kind for message, kind in _SQLITE_MESSAGES if message in text), None)


def close_broken_connections() -> None:
    """Close every connection of this thread that a fault left unusable, so the next request reconnects.

    Django would close them when the request finishes (`close_old_connections`), but only if its
    signal runs (not under the test client, nor for work outside requests); inside a transaction
    nothing is closed (the transaction's owner rolls it back).
    """
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or conn.in_atomic_block:
            continue
        if not conn.is_usable():
            conn.close()


def fault_response(request: HttpRequest, exc: BaseException) -> HttpResponse | None:
    """503 with Retry-After for a passing database or file-store fault (None for anything else): the API's error shape
    (``{"detail", "code"}``) under /api/ or when JSON is asked for, else a plain page.

    The page is rendered without the request (no context processors): the database it would
    read the user from is the one that just failed.
    """
    kind = database_fault(exc) or (STORAGE_UNAVAILABLE if is_storage_outage(exc) else None)
    if kind is None:
        return None
    if kind == UNAVAILABLE:
        close_broken_connections()
    message = MESSAGES[kind]
    response: HttpResponse
    if request.path.startswith("/api/") or "json" in request.headers.get("Accept", ""):
        response = JsonResponse({"detail": message, "code": kind}, status=503)
    else:
        response = HttpResponse(render_to_string("503.html", {"message": message}), status=503)
    response["Retry-After"] = str(settings.DB_BUSY_RETRY_AFTER_SECONDS)
    response.passing_fault = kind  # type: ignore[attr-defined]  # read by middleware.RepeatAfterDatabaseFaultMiddleware
    return response


def repeat_safe(view: V) -> V:
    """Mark a view (a function, or an APIView class) as safe to run again whole after a passing database fault.

    Only for what gives the same outcome run twice: a claim (it returns the user's current
    assignment) and an answer (an identical answer is left alone). The middleware
    (RepeatAfterDatabaseFaultMiddleware) then answers the annotator after the fault instead of a 503.
    """
    view.repeat_safe = True  # type: ignore[attr-defined]
    return view


def is_repeat_safe(view: Callable[..., object]) -> bool:
    """Whether `view` (as the URL resolver returns it: an APIView's as_view() keeps its class in .cls) is `repeat_safe`."""
    return bool(getattr(view, "repeat_safe", False) or getattr(getattr(view, "cls", None), "repeat_safe", False))
