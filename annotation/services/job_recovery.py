"""Background jobs survive their worker: heartbeat, lock retries, and recovery of stale jobs.

The verifier runs' pattern (metaeval.verifiers.services.runs) applied to import
and export jobs. A running job's worker stamps `heartbeat_at` every
JOB_STALE_SECONDS / 4 from a side thread; a worker killed mid-job (SIGKILL,
OOM, reboot) stops stamping, and `resume_stale_jobs` (run by
`manage.py resume_stale_jobs`, which `make run` calls before starting the
worker) re-queues the job, or fails it with the reason once it has used
JOB_MAX_ATTEMPTS. An import is one transaction, so a killed one changed nothing
and re-running it cannot duplicate anything. Files a dead job leaves (the
upload in the file storage, a `.partial` export in this host's scratch folder, an export
stored but not yet recorded) are removed when the job ends or is queued again.

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
from functools import partial
from typing import TypeVar

from django.conf import settings
from django.db import connections, models, transaction
from django.db.models import Q
from django.utils import timezone

from config.request_id import enqueue

from ..dblocks import is_lock_error
from ..formats import RecordError
from ..models import ExportJob, ImportJob, JobStatus
from ..storage import EXPORTS, delete_quietly, files, scratch_dir, stored_names

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


def _stale(model: type[ImportJob] | type[ExportJob], cutoff) -> list[int]:
    running = Q(status=JobStatus.RUNNING) & (
        Q(heartbeat_at__lte=cutoff) | Q(heartbeat_at__isnull=True, created_at__lte=cutoff)
    )
    return list(model.objects.filter(running).values_list("pk", flat=True))


def _give_up_message(job: ImportJob | ExportJob, changed: str) -> str:
    return (
        f"the worker running this job stopped without finishing it (no heartbeat for over "
        f"{int(settings.JOB_STALE_SECONDS)} s) {job.attempts} time(s); {changed} Start it again"
    )


def resume_stale_jobs(*, older_than: timedelta | None = None) -> list[ImportJob | ExportJob]:
    """Re-queue (or fail, after JOB_MAX_ATTEMPTS) running jobs whose heartbeat is older than `older_than`."""
    from ..tasks import run_export_job, run_import_job  # the tasks import the runners, which import this module

    threshold = stale_after() if older_than is None else older_than
    cutoff = timezone.now() - threshold
    handled: list[ImportJob | ExportJob] = []
    for job_id in _stale(ImportJob, cutoff):
        with transaction.atomic():
            job = ImportJob.objects.select_for_update().get(pk=job_id)
            if job.status != JobStatus.RUNNING:
                continue
            upload_there = bool(job.file_path) and files().exists(job.file_path)
            if job.attempts < settings.JOB_MAX_ATTEMPTS and upload_there:
                job.status, job.heartbeat_at = JobStatus.QUEUED, None
                job.save(update_fields=["status", "heartbeat_at"])
                transaction.on_commit(partial(enqueue, run_import_job, job.pk))
                logger.warning("import job %s: worker died (attempt %d); queued again", job.pk, job.attempts)
            else:
                reason = _give_up_message(job, "the import changed nothing (it is all or nothing).")
                if not upload_there:
                    reason = (
                        "the uploaded file is gone, so the import cannot run again; it changed nothing. Upload it again"
                    )
                job.status, job.finished_at = JobStatus.FAILED, timezone.now()
                job.errors, job.error_count = [RecordError(None, reason).as_dict()], 1
                stored, job.file_path = job.file_path, ""
                job.save(update_fields=["status", "finished_at", "errors", "error_count", "file_path"])
                delete_quietly(stored)
                logger.warning("import job %s failed: %s", job.pk, reason)
            handled.append(job)
    for job_id in _stale(ExportJob, cutoff):
        with transaction.atomic():
            export = ExportJob.objects.select_for_update().get(pk=job_id)
            if export.status != JobStatus.RUNNING:
                continue
            remove_partial_exports(export)
            if export.attempts < settings.JOB_MAX_ATTEMPTS:
                export.status, export.heartbeat_at = JobStatus.QUEUED, None
                export.save(update_fields=["status", "heartbeat_at"])
                transaction.on_commit(partial(enqueue, run_export_job, export.pk))
                logger.warning("export job %s: worker died (attempt %d); queued again", export.pk, export.attempts)
            else:
                export.status, export.finished_at = JobStatus.FAILED, timezone.now()
                export.error = _give_up_message(export, "no file was written.")
                export.save(update_fields=["status", "finished_at", "error"])
                logger.warning("export job %s failed: %s", export.pk, export.error)
            handled.append(export)
    return handled


def remove_partial_exports(job: ExportJob) -> None:
    """Delete what a dead worker left for this unfinished export job: its `.partial` file in this
    host's scratch folder (a worker on another host leaves its own there; see docs/deploy.md), and
    a file it had stored but not yet recorded on the job."""
    for leftover in scratch_dir(EXPORTS).glob(f"{job.pk}-*"):
        leftover.unlink(missing_ok=True)
    for name in stored_names(EXPORTS):
        if name.startswith(f"{EXPORTS}/{job.pk}-") and name != job.file_path:
            files().delete(name)
