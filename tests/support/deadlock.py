"""Database errors as psycopg raises them through Django, for tests of what is retried and what is not."""

from __future__ import annotations

from django.db import OperationalError


class DatabaseCause(Exception):
    """The driver's exception behind Django's, carrying PostgreSQL's SQLSTATE."""

    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def database_error(message: str, sqlstate: str | None) -> OperationalError:
    """An OperationalError whose cause has this SQLSTATE (None: no SQLSTATE at all)."""
    error = OperationalError(message)
    error.__cause__ = DatabaseCause(sqlstate) if sqlstate else None
    return error


def deadlock() -> OperationalError:
    """What a transaction PostgreSQL chose as a deadlock's victim raises (SQLSTATE 40P01)."""
    return database_error("deadlock detected", "40P01")
