"""Big exports: written to a file by a background task, then downloaded.

Long work never runs inside a request (DESIGN §5). A study with up to
EXPORT_INLINE_MAX_ROWS annotations is streamed straight from the request
(a few seconds at most; `selectors.export_runs_in_background` decides); a
bigger one gets an ExportJob that the
`run_export_job` task writes under var/exports, and the researcher downloads
the file when it is ready. A newer export of the same study and format
replaces the older file, so repeated exports do not fill the disk.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from ..exports import CONTENT_TYPES, write_export
from ..models import ExportJob, Study
from .errors import ServiceError


def export_dir() -> Path:
    path = Path(settings.VAR_DIR) / "exports"
    path.mkdir(parents=True, exist_ok=True)
    return path


def request_export(*, study: Study, file_format: str, created_by: AbstractBaseUser | None = None) -> ExportJob:
    """Queue an export of the study's annotations; the task writes it after this transaction commits."""
    if file_format not in CONTENT_TYPES:
        raise ServiceError(f"format must be csv or jsonl, got {file_format!r}")
    job = ExportJob.objects.create(study=study, file_format=file_format, created_by=created_by)
    from ..tasks import run_export_job as task

    transaction.on_commit(lambda: task.enqueue(job.pk))
    return job


def run_export_job(*, job_id: int) -> ExportJob:
    """Write a queued export; safe to call twice. A failure is recorded on the job and leaves no file."""
    job = ExportJob.objects.select_related("study").get(pk=job_id)
    claimed = ExportJob.objects.filter(pk=job.pk, status=ExportJob.Status.QUEUED).update(status=ExportJob.Status.RUNNING)
    if not claimed:
        return job
    path = export_dir() / f"{job.pk}-{uuid.uuid4().hex}-{job.study.slug}-annotations.{job.file_format}"
    try:
        rows = write_export(job.study, job.file_format, path)
    except Exception as exc:  # noqa: BLE001 - recorded on the job for the researcher to see
        job.status, job.error = ExportJob.Status.FAILED, f"{type(exc).__name__}: {exc}"
    else:
        job.status, job.rows, job.file_path = ExportJob.Status.SUCCEEDED, rows, str(path)
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "rows", "file_path", "error", "finished_at"])
    if job.status == ExportJob.Status.SUCCEEDED:
        _drop_older_files(job)
    return job


def _drop_older_files(job: ExportJob) -> None:
    """Older finished exports of the same study and format: file deleted, row kept (it says "replaced")."""
    older = ExportJob.objects.filter(study=job.study, file_format=job.file_format, pk__lt=job.pk).exclude(file_path="")
    for stale in older:
        Path(stale.file_path).unlink(missing_ok=True)
    older.update(file_path="")
