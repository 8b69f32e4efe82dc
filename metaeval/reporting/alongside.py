"""Work a report's build hands to a thread of its own while it computes the rest: the per-domain agreement.

Why (issue 35): the report page asks for the agreement per domain, a bootstrap per domain: at 100,000
items x 3 labels in 4 domains about 0.6 s, nearly all in numpy, which lets go of the GIL while it draws
and counts resamples. Meanwhile the later sections (the reference, quality, scores, disagreements,
verifiers) read the database and work in pandas on the other core. The first sections (the agreement on
all labels) are computed and handed over before, on the build's thread, as soon as ever. The numbers are
the same either way: the work is the same function on its own inputs (``agreement.AgreementInputs``), each
bootstrap with its own seeded generator.

What runs there reads no database: a query on that thread raises ``NoDatabaseHere``. Its connection
would be another one than the build's: outside the build's snapshot on PostgreSQL, outside a test's
transaction on SQLite.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import connection

__all__ = ["start", "NoDatabaseHere"]

T = TypeVar("T")


class NoDatabaseHere(RuntimeError):
    """A query was made on the thread of work that reads no database."""


def start(work: Callable[[], T]) -> Callable[[], T]:
    """Run ``work`` on a thread now (with the caller's context variables); the callable returned waits for it
    and gives its result, or raises its error."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="report-alongside")
    future = executor.submit(contextvars.copy_context().run, _without_database, work)
    executor.shutdown(wait=False)  # the thread ends once the work is done
    return future.result


def _without_database(work: Callable[[], T]) -> T:
    with connection.execute_wrapper(_refuse):
        return work()


def _refuse(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    raise NoDatabaseHere(f"the report's work alongside its build reads no database; it asked: {sql[:200]}")
