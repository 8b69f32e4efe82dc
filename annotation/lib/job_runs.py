"""Background jobs survive their worker: claim, heartbeat and lock retries.

The verifier runs' pattern (metaeval.verifiers.services.runs) applied to import
and export jobs. A running job's worker stamps `heartbeat_at` every
JOB_STALE_SECONDS / 4 from a side thread; a worker killed mid-job stops stamping, and
`resume_stale_jobs` (annotation/transfer/recovery.py) re-queues or fails the job.

Lock contention ("database is locked" on SQLite when a long write holds the
lock past the busy timeout) is temporary: `retry_on_lock` retries with
exponential backoff a bounded number of times before giving up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TypeVar

from django.conf import settings
from django.db import connections, models
from django.utils import timezone

from annotation.lib.dblocks import is_lock_error
from annotation.models import ExportJob, ImportJob, JobStatus

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Patched by tests, so that backoff costs no real time.
sleep: Callable[[float], None] = time.sleep


def stale_after() -> timedelta:
    """Heartbeat silence after which a running job counts as orphaned (settings.JOB_STALE_SECONDS)."""
    return timedelta(seconds=settings.JOB_STALE_SECONDS)


def retry_on_lock(action: Callable[[], T], *, what: str, retries: int | None = None) -> T:
    """`action()`, retried with exponential backoff while it fails on a lock; then the lock error is raised.

    Only for actions that are whole transactions (a lock error rolled them back, so running
    them again is safe).
    """
    retries = settings.JOB_LOCK_RETRIES if retries is None else retries
    for attempt in range(retries + 1):
        try:
            return action()
        except Exception as exc:
            if not is_lock_error(exc) or attempt == retries:
                raise
            delay = settings.JOB_LOCK_BACKOFF_SECONDS * 2**attempt
            logger.warning("%s: database locked (%s); retry %d of %d in %.1f s", what, exc, attempt + 1, retries, delay)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def claim(model: type[ImportJob] | type[ExportJob], job_id: int) -> bool:
    """Mark a queued job running for this worker (at most one worker wins); counts the attempt."""
    now = timezone.now()
    return bool(
        retry_on_lock(
            lambda: model.objects.filter(pk=job_id, status=JobStatus.QUEUED).update(
                status=JobStatus.RUNNING, heartbeat_at=now, attempts=models.F("attempts") + 1
            ),
            what=f"claiming {model.__name__} {job_id}",
        )
    )


@contextmanager
def heartbeat(model: type[ImportJob] | type[ExportJob], job_id: int) -> Iterator[None]:
    """Stamp the job's heartbeat from a side thread while the body runs.

    The stamp is a tiny UPDATE in its own connection; if another write holds
    the lock it is skipped (the next beat tries again), never an error.
    """
    interval = max(settings.JOB_STALE_SECONDS / 4, 0.05)
    done = threading.Event()

    def beat() -> None:
        try:
            while not done.wait(interval):
                try:
                    model.objects.filter(pk=job_id, status=JobStatus.RUNNING).update(heartbeat_at=timezone.now())
                except Exception as exc:  # a busy database must not kill the job
                    logger.info("heartbeat of %s %s skipped: %s", model.__name__, job_id, exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=beat, name=f"heartbeat-{model.__name__}-{job_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
