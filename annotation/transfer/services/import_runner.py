"""Running an import job: inline for small uploads, or what the `run_import_job` task does.

Only runs jobs; recording and queueing them is import_jobs.py, which imports
the task. This module never imports annotation.tasks, so tasks can import it
at the top.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import IO

from django.conf import settings
from django.utils import timezone

from annotation.errors import ImportFailed, ImportResult
from annotation.lib.dblocks import database_fault, is_lock_error
from annotation.lib.formats import RecordError
from annotation.lib.job_runs import claim, heartbeat, retry_on_db_fault
from annotation.lib.storage import delete_quietly, local_copy
from annotation.models import ImportJob
from annotation.transfer.faces import WEB
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items

logger = logging.getLogger(__name__)

IMPORTERS: dict[str, Callable[..., ImportResult]] = {
    ImportJob.What.ITEMS: import_items,
    ImportJob.What.ANNOTATIONS: import_annotations,
}


def run_import_job(*, job_id: int) -> ImportJob:
    """Run a queued import job from its stored file; safe to call twice.

    The claim records the worker (a killed worker's job is queued again by any worker within
    seconds: recovery.recover_lost_jobs), the job's heartbeat is stamped while it runs, and it retries the import while the database is locked by
    another write. The upload is read from the file storage (on another host's worker, through a
    local copy it removes afterwards) and removed once the job has finished or failed.
    """
    if not claim(ImportJob, job_id):
        return ImportJob.objects.select_related("study").get(pk=job_id)
    job = ImportJob.objects.select_related("study").get(pk=job_id)
    stored = job.file_path
    try:
        with heartbeat(ImportJob, job.pk), local_copy(stored, kind="imports") as stream:
            run_import(job, stream, lock_retries=settings.JOB_LOCK_RETRIES)
    finally:
        if job.status != ImportJob.Status.RUNNING:
            delete_quietly(stored, wait_for_store=True)
    return job


def run_import(job: ImportJob, stream: IO[bytes], *, lock_retries: int = 0, face: str = WEB) -> None:
    """Import `stream` as the job says and record the outcome on it.

    A file with problems fails with its line-numbered errors; an unexpected
    error fails the job too (logged with its traceback), so that no job is
    left "running" for ever. Either way the import changed nothing. A locked
    database is retried `lock_retries` times with backoff (the import is one
    transaction, so a retry starts from a clean slate), then fails the job
    with that reason. `face` (transfer/faces.py): who asked, for the names of options in the errors; a
    queued job's upload came from the page or the API (WEB).
    """
    where = {"job": job.pk, "study": job.study.slug, "what": job.what}
    logger.info(
        "import job %s started: %s into study %s from %s", job.pk, job.what, job.study.slug, job.file_name, extra=where
    )
    started = time.monotonic()

    def attempt() -> ImportResult:
        stream.seek(0)
        return IMPORTERS[job.what](
            study=job.study, stream=stream, fmt=job.file_format, update=job.update_existing, face=face
        )

    try:
        result = retry_on_db_fault(attempt, what=f"import job {job.pk}", retries=lock_retries)
    except ImportFailed as exc:
        seconds = round(time.monotonic() - started, 3)
        logger.info(
            "import job %s refused the file after %.1f s: %d problem(s)",
            job.pk,
            seconds,
            exc.total,
            extra={**where, "n_problems": exc.total, "seconds": seconds},
        )
        job.status = ImportJob.Status.FAILED
        job.errors = [error.as_dict() for error in exc.errors]
        job.error_count = exc.total
    except Exception as exc:
        seconds = round(time.monotonic() - started, 3)
        logger.exception("import job %s failed after %.1f s", job.pk, seconds, extra={**where, "seconds": seconds})
        job.status = ImportJob.Status.FAILED
        if is_lock_error(exc):
            message = (
                f"the database stayed locked by another write through {lock_retries + 1} attempt(s) "
                f"over {seconds:.0f} s; nothing was changed. Import the file again once the other write is done"
            )
        elif database_fault(exc) is not None:
            message = (
                f"the database did not answer ({exc}) through {lock_retries + 1} attempt(s) over {seconds:.0f} s; "
                "nothing was changed. Import the file again once the database is back"
            )
        else:
            message = f"the import stopped on an unexpected error ({type(exc).__name__}: {exc}); nothing was changed"
        job.errors, job.error_count = [RecordError(None, message).as_dict()], 1
    else:
        seconds = round(time.monotonic() - started, 3)
        logger.info(
            "import job %s finished in %.1f s: %d created, %d updated from %d records",
            job.pk,
            seconds,
            result.created,
            result.updated,
            result.records,
            extra={
                **where,
                "n_created": result.created,
                "n_updated": result.updated,
                "n_records": result.records,
                "seconds": seconds,
            },
        )
        job.status = ImportJob.Status.SUCCEEDED
        job.created, job.updated = result.created, result.updated
    job.finished_at = timezone.now()
    job.file_path = ""
    retry_on_db_fault(job.save, what=f"recording the outcome of import job {job.pk}", retries=lock_retries)
