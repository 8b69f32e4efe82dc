"""Background jobs survive their worker: the worker registry, claim, heartbeat and lock retries.

Each `manage.py worker` registers itself (WorkerHeartbeat: id, host, pid, started, last seen)
and stamps its row every WORKER_BEAT_SECONDS (`WorkerRegistration`: from a side thread, or from
the RQ worker's own loop). A job
(import, export, verifier run chunk, report build) records the worker that runs it
(`current_worker()`). Any worker, at start and every RECOVERY_CHECK_SECONDS while idle, calls
`recover_lost_work()`: the recoveries registered in RECOVERIES re-queue (or, after their attempts, fail
with the reason) what gone workers held, and the gone workers' task rows (django-tasks-db's
DBTaskResult, RUNNING for ever otherwise) are marked failed. A worker is gone when its process
is dead on this host, or silent for WorkerHeartbeat.LOST_AFTER elsewhere (models.py). So a job
killed with its worker runs again within seconds of a worker being available, with no cron.

As before, a running job's worker also stamps the job's `heartbeat_at` every
JOB_STALE_SECONDS / 4; a job silent for JOB_STALE_SECONDS (a worker that lives but lost its
task, e.g. an RQ work horse killed alone) is re-queued by the same code
(`resume_stale_jobs`, annotation/transfer/services/recovery.py).

Lock contention ("database is locked" on SQLite when a long write holds the
lock past the busy timeout), a lost connection (a PostgreSQL restart) and the other passing
faults of lib/dblocks.py are temporary: `retry_on_db_fault` retries with exponential backoff
a bounded number of times before giving up.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

from django.conf import settings
from django.db import OperationalError, ProgrammingError, connections, models
from django.utils import timezone
from django.utils.crypto import get_random_string

from annotation.lib.dblocks import UNAVAILABLE, close_broken_connections, database_fault
from annotation.models import ExportJob, ImportJob, JobStatus, WorkerHeartbeat, this_host

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Patched by tests, so that backoff costs no real time.
sleep: Callable[[float], None] = time.sleep


def stale_after() -> timedelta:
    """Heartbeat silence after which a running job counts as orphaned (settings.JOB_STALE_SECONDS)."""
    return timedelta(seconds=settings.JOB_STALE_SECONDS)


def retry_on_db_fault(action: Callable[[], T], *, what: str, retries: int | None = None) -> T:
    """`action()`, retried with exponential backoff while it fails on a passing database fault; then
    the fault is raised.

    The faults are dblocks.database_fault's: a lock held too long (SQLite's busy timeout), a
    lost connection (a PostgreSQL restart or failover: the broken connection is closed so the
    next try connects afresh), a serialisation conflict or deadlock, a read-only server. Only
    for actions that are whole transactions (the fault rolled them back, so running them again
    is safe).
    """
    retries = settings.JOB_LOCK_RETRIES if retries is None else retries
    for attempt in range(retries + 1):
        try:
            return action()
        except Exception as exc:
            kind = database_fault(exc)
            if kind is None or attempt == retries:
                raise
            if kind == UNAVAILABLE:
                close_broken_connections()
            delay = settings.JOB_LOCK_BACKOFF_SECONDS * 2**attempt
            logger.warning("%s: %s (%s); retry %d of %d in %.1f s", what, kind, exc, attempt + 1, retries, delay)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def claim(model: type[ImportJob] | type[ExportJob], job_id: int) -> bool:
    """Mark a queued job running for this worker (at most one worker wins); counts the attempt and
    records the worker (current_worker()), so that the job is re-queued as soon as its worker is gone."""
    now = timezone.now()
    return bool(
        retry_on_db_fault(
            lambda: model.objects.filter(pk=job_id, status=JobStatus.QUEUED).update(
                status=JobStatus.RUNNING, heartbeat_at=now, attempts=models.F("attempts") + 1, worker=current_worker()
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


#: How often a registered worker stamps its row.
WORKER_BEAT_SECONDS = 1.0
#: How often an idle worker looks for work that gone workers held.
RECOVERY_CHECK_SECONDS = 2.0
#: What `recover_lost_work` runs, each `f(lost_workers: set[str]) -> list`: registered by the
#: features (transfer/services/recovery.py for imports and exports, metaeval.tasks for verifier
#: runs and report builds), since lib/ imports no feature.
RECOVERIES: list[Callable[[set[str]], list[Any]]] = []


def register_recovery(recovery: Callable[[set[str]], list[Any]]) -> None:
    """Have every worker run `recovery(lost_workers)` at start and every RECOVERY_CHECK_SECONDS while idle."""
    if recovery not in RECOVERIES:
        RECOVERIES.append(recovery)


#: Modules a forking (RQ) worker imports once before its first task: registered by the features whose
#: tasks import heavy modules lazily (the verifier runner's openai client, ~1.5 s), so that no work
#: horse pays that import again, chunk after chunk.
PRELOADS: list[str] = []


def register_preload(module: str) -> None:
    """Have a forking worker import `module` before its first task (its work horses then inherit it)."""
    if module not in PRELOADS:
        PRELOADS.append(module)


_current_worker = ""


def current_worker() -> str:
    """The id of the registered worker this process is (or was forked from); "" outside a worker."""
    return _current_worker


def new_worker_id(name: str = "") -> str:
    """A registry id never used before: the worker's own name (if any) and a random suffix."""
    return f"{name[:60]}.{get_random_string(12)}" if name else f"{socket.gethostname()[:60]}.{get_random_string(16)}"


def _is_missing_table(exc: BaseException) -> bool:
    """A table not created yet: "no such table" (SQLite), "relation ... does not exist" (PostgreSQL)."""
    text = str(exc).lower()
    return isinstance(exc, (ProgrammingError, OperationalError)) and (
        "no such table" in text or ("relation" in text and "does not exist" in text)
    )


def _when_schema_ready(action: Callable[[], T], *, what: str) -> T:
    """`action()`, waited for while the database has no tables yet or does not answer yet.

    Why: a worker started beside the web server (compose, a process manager) commonly starts
    before the database is up or before `migrate` has finished; it should wait, not exit.
    After WORKER_SCHEMA_WAIT_SECONDS it gives up with the database's own error.
    """
    deadline = time.monotonic() + WORKER_SCHEMA_WAIT_SECONDS
    while True:
        try:
            return action()
        except (ProgrammingError, OperationalError) as exc:
            if _is_missing_table(exc):
                waiting_for = "the database's tables (run migrate)"
            elif database_fault(exc) == UNAVAILABLE:
                waiting_for = "the database to answer"
            else:
                raise
            if time.monotonic() >= deadline:
                raise
            logger.info("%s waits for %s: %s", what, waiting_for, exc)
            connections.close_all()
            sleep(1.0)


#: How long a starting worker waits for `migrate` to create its tables before it exits.
WORKER_SCHEMA_WAIT_SECONDS = 600


class WorkerRegistration:
    """This process as a registered worker: its row, stamped every WORKER_BEAT_SECONDS until `close()`.

    With `beat_thread` (the database worker, which runs tasks in its own process) a side thread
    stamps the row; without it the owner calls `beat()` from its own loop (the RQ worker, which
    forks a work horse per task: a fork taken while a side thread is inside the database driver
    inherits that thread's locks, and the horse hangs for ever on its first query).
    """

    def __init__(self, worker_id: str, *, beat_thread: bool = True) -> None:
        global _current_worker
        now = timezone.now()
        self.worker_id = worker_id
        _when_schema_ready(
            lambda: retry_on_db_fault(
                lambda: WorkerHeartbeat.objects.update_or_create(
                    pk=worker_id,
                    defaults={"host": this_host(), "pid": os.getpid(), "started_at": now, "last_seen": now},
                ),
                what=f"registering worker {worker_id}",
            ),
            what=f"registering worker {worker_id}",
        )
        _current_worker = worker_id
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        if beat_thread:
            self._thread = threading.Thread(target=self._beat_loop, name=f"worker-heartbeat-{worker_id}", daemon=True)
            self._thread.start()

    def beat(self) -> None:
        """Stamp the row (made again if it was removed); a busy database skips this beat, never an error."""
        try:
            now = timezone.now()
            if not WorkerHeartbeat.objects.filter(pk=self.worker_id).update(last_seen=now):
                # Removed as gone (it was silent too long): what it held was re-queued; it lives on.
                WorkerHeartbeat.objects.create(
                    pk=self.worker_id, host=this_host(), pid=os.getpid(), started_at=now, last_seen=now
                )
        except Exception as exc:  # a busy database must not kill the worker
            logger.info("heartbeat of worker %s skipped: %s", self.worker_id, exc)
        finally:
            connections.close_all()

    def _beat_loop(self) -> None:
        try:
            while not self._done.wait(WORKER_BEAT_SECONDS):
                self.beat()
        finally:
            connections.close_all()

    def close(self) -> None:
        """Stop beating and leave the registry (a worker that ends normally holds nothing)."""
        global _current_worker
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        try:
            WorkerHeartbeat.objects.filter(pk=self.worker_id).delete()
        except Exception as exc:
            logger.info("worker %s could not leave the registry: %s", self.worker_id, exc)
        _current_worker = ""


class WorkerLost(Exception):
    """What a task row of a gone worker failed with (its work was queued again as a new task)."""


WORKER_LOST_MESSAGE = "the worker running this task stopped (killed or crashed); its work was queued again"


def fail_lost_task_rows(lost: set[str]) -> int:
    """Mark failed the database queue's RUNNING task rows last claimed by a gone worker; their count."""
    if not lost:
        return 0
    from django_tasks.base import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    running = DBTaskResult.objects.filter(status=TaskResultStatus.RUNNING).only("pk", "worker_ids")
    ids = [row.pk for row in running if row.worker_ids and row.worker_ids[-1] in lost]
    if not ids:
        return 0
    failed = WorkerLost(WORKER_LOST_MESSAGE)
    return DBTaskResult.objects.filter(pk__in=ids, status=TaskResultStatus.RUNNING).update(
        status=TaskResultStatus.FAILED,
        finished_at=timezone.now(),
        exception_class_path=f"{WorkerLost.__module__}.{WorkerLost.__qualname__}",
        traceback=f"{WorkerLost.__qualname__}: {failed}\n",
        return_value=None,
    )


def lost_workers() -> set[str]:
    """The registered workers that are gone (WorkerHeartbeat.dead_ids)."""
    return WorkerHeartbeat.dead_ids()


def recover_lost_work() -> list[Any]:
    """Re-queue what gone workers held and what went stale (every recovery in RECOVERIES), mark
    their task rows failed, and drop the gone workers from the registry; what was handled.

    Safe to run from any number of workers at once: each recovery locks a job before moving it,
    and a job moved by one worker is no longer running for the next.
    """
    lost = lost_workers()
    handled: list[Any] = []
    if lost:  # the lost tasks fail first, so that a task row is never seen running beside its retry
        retry_on_db_fault(partial(fail_lost_task_rows, lost), what="failing the task rows of gone workers")
        lost_rq_jobs(lost)
    for recovery in RECOVERIES:
        handled += retry_on_db_fault(partial(recovery, lost), what=f"recovery {recovery.__qualname__}")
    if lost:
        WorkerHeartbeat.objects.filter(pk__in=lost).delete()
    return handled


def lost_rq_jobs(lost: set[str]) -> None:
    """On RQ, fail the gone workers' started jobs as RQ's abandoned-job cleanup does (failed registry,
    failure result), which RQ itself does only once the job's lease has run out."""
    from django_tasks import task_backends

    for backend in task_backends.all():
        if type(backend).__name__ != "RQBackend":
            continue
        try:
            import django_rq
            from rq.job import JobStatus as RQJobStatus
            from rq.job_lifecycle import record_job_failure
            from rq.registry import StartedJobRegistry

            for queue_name in backend.queues:
                queue = django_rq.get_queue(queue_name)
                started = StartedJobRegistry(queue=queue)
                for job_id, execution_id in started.get_job_and_execution_ids(cleanup=False):
                    job = queue.fetch_job(job_id)
                    if job is None or job.worker_name not in lost or job.get_status() != RQJobStatus.STARTED:
                        continue
                    with queue.connection.pipeline() as pipeline:
                        pipeline.zrem(started.key, f"{job_id}:{execution_id}")
                        record_job_failure(job, f"{WorkerLost.__qualname__}: {WORKER_LOST_MESSAGE}", pipeline)
                        pipeline.execute()
                    logger.warning(
                        "RQ job %s of a gone worker (%s) moved to the failed registry", job_id, job.worker_name
                    )
        except Exception as exc:  # Redis away: RQ's own cleanup does it later
            logger.info("RQ's registries not cleaned of lost workers: %s", exc)
