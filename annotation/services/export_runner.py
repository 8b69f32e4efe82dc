"""Running a queued export: what the `run_export_job` task does.

Only runs jobs; queueing them is export_jobs.py, which imports the task.
This module never imports annotation.tasks, so tasks can import it at the top.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from ..exports import write_export
from ..models import ExportJob
from .job_recovery import claim, heartbeat, retry_on_lock

logger = logging.getLogger(__name__)


def export_dir() -> Path:
    path = Path(settings.VAR_DIR) / "exports"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_export_job(*, job_id: int) -> ExportJob:
    """Write a queued export; safe to call twice. A failure is recorded on the job and leaves no file.

    The worker stamps a heartbeat while writing, so a killed one is noticed by
    resume_stale_jobs, which removes its `.partial` file and queues the job again.
    """
    if not claim(ExportJob, job_id):
        return ExportJob.objects.select_related("study").get(pk=job_id)
    job = ExportJob.objects.select_related("study").get(pk=job_id)
    where = {"job": job.pk, "study": job.study.slug, "format": job.file_format}
    logger.info("export job %s started: %s of study %s", job.pk, job.file_format, job.study.slug, extra=where)
    started = time.monotonic()
    path = export_dir() / f"{job.pk}-{uuid.uuid4().hex}-{job.study.slug}-annotations.{job.file_format}"
    try:
        with heartbeat(ExportJob, job.pk):
            rows = write_export(job.study, job.file_format, path)
    except Exception as exc:
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
        job.status, job.rows, job.file_path = ExportJob.Status.SUCCEEDED, rows, str(path)
    job.finished_at = timezone.now()
    retry_on_lock(
        lambda: job.save(update_fields=["status", "rows", "file_path", "error", "finished_at"]),
        what=f"recording the outcome of export job {job.pk}",
    )
    if job.status == ExportJob.Status.SUCCEEDED:
        _drop_older_files(job)
    return job


def _drop_older_files(job: ExportJob) -> None:
    """Older finished exports of the same study and format: file deleted, row kept (it says "replaced")."""
    older = ExportJob.objects.filter(study=job.study, file_format=job.file_format, pk__lt=job.pk).exclude(file_path="")
    for stale in older:
        Path(stale.file_path).unlink(missing_ok=True)
    older.update(file_path="")
