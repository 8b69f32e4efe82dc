"""Running a queued export: what the `run_export_job` task does.

Only runs jobs; queueing them is export_jobs.py, which imports the task.
This module never imports annotation.tasks, so tasks can import it at the top.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

from django.utils import timezone

from annotation.errors import ServiceError
from annotation.lib.export_formats import export_format
from annotation.lib.job_runs import claim, heartbeat, retry_on_db_fault
from annotation.lib.storage import EXPORTS, delete_quietly, scratch_dir, store_finished_file
from annotation.models import ExportJob
from annotation.transfer.exports import CONTENT_TYPES, export_filename, write_export

logger = logging.getLogger(__name__)


def run_export_job(*, job_id: int) -> ExportJob:
    """Write a queued export; safe to call twice. A failure is recorded on the job and leaves no file.

    The file is written in this host's scratch folder (as `.partial`, renamed when whole), then
    handed to the file storage, and only then named on the job: a download never meets half a
    file. The claim records the worker, so a killed one is noticed within seconds by any worker
    (recovery.recover_lost_jobs), which removes what it left and queues the job again.
    """
    if not claim(ExportJob, job_id):
        return ExportJob.objects.select_related("study").get(pk=job_id)
    job = ExportJob.objects.select_related("study").get(pk=job_id)
    where = {"job": job.pk, "study": job.study.slug, "format": job.file_format}
    logger.info("export job %s started: %s of study %s", job.pk, job.file_format, job.study.slug, extra=where)
    started = time.monotonic()
    basename = f"{job.pk}-{uuid.uuid4().hex}-{export_filename(job.study, job.file_format)}"
    local = scratch_dir(EXPORTS) / basename
    try:
        with heartbeat(ExportJob, job.pk):
            # A database restart mid-read is tried again from the start (the file is rewritten whole).
            rows = retry_on_db_fault(lambda: _write(job, local), what=f"export job {job.pk}")
            stored = store_finished_file(local, f"{EXPORTS}/{basename}")
    except Exception as exc:
        local.unlink(missing_ok=True)
        seconds = round(time.monotonic() - started, 3)
        logger.exception("export job %s failed after %.1f s", job.pk, seconds, extra={**where, "seconds": seconds})
        job.status, job.error = ExportJob.Status.FAILED, f"{type(exc).__name__}: {exc}"
    else:
        seconds = round(time.monotonic() - started, 3)
        logger.info(
            "export job %s finished in %.1f s: %d annotations",
            job.pk,
            seconds,
            rows,
            extra={**where, "n_rows": rows, "seconds": seconds},
        )
        job.status, job.rows, job.file_path = ExportJob.Status.SUCCEEDED, rows, stored
    job.finished_at = timezone.now()
    retry_on_db_fault(
        lambda: job.save(update_fields=["status", "rows", "file_path", "error", "finished_at"]),
        what=f"recording the outcome of export job {job.pk}",
    )
    if job.status == ExportJob.Status.SUCCEEDED:
        _drop_older_files(job)
    return job


def _write(job: ExportJob, local: Path) -> int:
    """The annotations as CSV / JSON Lines, or a format another app registered (lib/export_formats.py:
    `hf`, the Hugging Face dataset zip that metaeval builds); the number of annotations written."""
    if job.file_format in CONTENT_TYPES:
        return write_export(job.study, job.file_format, local)
    registered = export_format(job.file_format)
    if registered is None:
        raise ServiceError(f"no app builds {job.file_format!r} exports here")
    return registered.build(job.study, local, {"license": job.license} if job.license else {})


def _drop_older_files(job: ExportJob) -> None:
    """Older finished exports of the same study and format: file deleted, row kept (it says "replaced")."""
    older = ExportJob.objects.filter(study=job.study, file_format=job.file_format, pk__lt=job.pk).exclude(file_path="")
    for stale in older:
        delete_quietly(stale.file_path, wait_for_store=True)
    older.update(file_path="")
