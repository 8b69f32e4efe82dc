"""Recognising lock contention: SQLite's "database is locked", PostgreSQL's lock timeouts.

Both mean "another writer held the lock too long", which is temporary: the
annotate pages answer 503 with Retry-After (middleware.py) and background
jobs retry with backoff (lib/job_runs.py) instead of failing.
"""

from __future__ import annotations

from django.db import OperationalError

#: PostgreSQL SQLSTATEs of a lock wait that gave up: lock_not_available, deadlock_detected.
_PG_LOCK_CODES = {"55P03", "40P01"}
_MESSAGES = ("database is locked", "database table is locked", "lock timeout", "deadlock detected")


def is_lock_error(exc: BaseException) -> bool:
    """Whether `exc` is a database error caused by another transaction holding a lock."""
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) in _PG_LOCK_CODES or getattr(cause, "pgcode", None) in _PG_LOCK_CODES:
        return True
    text = str(exc).lower()
    return any(message in text for message in _MESSAGES)
