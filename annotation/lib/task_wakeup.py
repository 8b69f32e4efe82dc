"""An idle worker starts a queued task at once instead of at its next look at the queue (issue 15).

Why: django-tasks-db's worker looks for tasks every ``--interval`` seconds (1 s by default)
and sleeps in between, so a report, import or export that a page queued waited up to a
second before it began: half a second on average added to the wait for a big study's
first report, whose first sections otherwise show about 1.5 s after the view.

On PostgreSQL the side that queues a task sends ``NOTIFY`` on ``CHANNEL`` in the transaction
that stores the task (PostgreSQL delivers it when that commits, so the worker then finds the
row), and an idle worker waits for it on a connection of its own that LISTENs, the interval
still bounding each wait: a notification lost with a dropped connection costs one interval,
as before. Elsewhere (SQLite) there is no such signal, and the worker looks every
``POLL_SECONDS`` instead.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg
from django.db import connections, router
from django.dispatch import receiver
from django_tasks.signals import task_enqueued
from django_tasks_db.backend import DatabaseBackend
from django_tasks_db.models import DBTaskResult

__all__ = ["CHANNEL", "POLL_SECONDS", "Wakeup", "default_interval", "notify_workers"]

logger = logging.getLogger(__name__)

#: The channel the queueing side notifies and idle workers listen on.
CHANNEL = "claimlab_tasks"
#: How often a worker looks at the queue where nothing wakes it (SQLite).
POLL_SECONDS = 0.25
#: ... and where a notification wakes it (PostgreSQL): only what a lost notification may cost.
NOTIFIED_POLL_SECONDS = 1.0
#: After the listening connection could not be opened, the worker tries again this much later.
LISTEN_RETRY_SECONDS = 60


def _tasks_connection() -> Any:
    return connections[router.db_for_write(DBTaskResult)]


def notifies() -> bool:
    """Whether the task queue's database can wake a worker (PostgreSQL's LISTEN/NOTIFY)."""
    return _tasks_connection().vendor == "postgresql"


def default_interval() -> float:
    """The worker's seconds between looks at the queue, when the operator gives none."""
    return NOTIFIED_POLL_SECONDS if notifies() else POLL_SECONDS


@receiver(task_enqueued)
def notify_workers(sender: type, **kwargs: Any) -> None:
    """Wake the idle workers when a task is queued in the database (PostgreSQL; delivered on commit)."""
    if not issubclass(sender, DatabaseBackend) or not notifies():
        return
    with _tasks_connection().cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, '')", [CHANNEL])


class Wakeup:
    """What an idle worker waits on: a notification from the queueing side, or the interval's end.

    Without LISTEN/NOTIFY (or after its connection failed) it simply sleeps the interval.
    The listening connection is the worker's own, apart from Django's, which the worker
    closes and reopens between tasks.
    """

    def __init__(self) -> None:
        self._listening: psycopg.Connection | None = None
        self._failed_at: float | None = None

    def _listen(self) -> psycopg.Connection | None:
        if self._listening is not None:
            return self._listening
        if not notifies() or (
            self._failed_at is not None and time.monotonic() - self._failed_at < LISTEN_RETRY_SECONDS
        ):
            return None
        try:
            params = _tasks_connection().get_connection_params()
            params.pop("cursor_factory", None)  # Django's cursor class; the plain one is enough here
            params.pop("context", None)
            self._listening = psycopg.connect(**params, autocommit=True)
            self._listening.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error:
            logger.warning("the worker cannot listen for new tasks; it looks at the queue every interval instead")
            self._failed_at = time.monotonic()
            self.close()
        return self._listening

    def wait(self, seconds: float) -> bool:
        """Wait until a task may have been queued, at most `seconds`; True when a notification came."""
        listening = self._listen()
        if listening is None:
            time.sleep(seconds)
            return False
        try:
            woken = any(True for _ in listening.notifies(timeout=seconds, stop_after=1))
        except psycopg.Error:
            logger.warning("the worker's listening connection failed; it is opened again on the next wait")
            self.close()
            return False
        if woken:  # more may have come meanwhile: the queue is looked at once for all of them
            for _ in listening.notifies(timeout=0):
                pass
        return woken

    def close(self) -> None:
        if self._listening is not None:
            try:
                self._listening.close()
            finally:
                self._listening = None
