"""Recovery of stale import and export jobs: re-queued, or failed with the reason.

A worker killed mid-job (SIGKILL, OOM, reboot) stops stamping its job's heartbeat
(annotation/lib/job_runs.py), and `resume_stale_jobs` (run by `manage.py resume_stale_jobs`,
which `make run` calls before starting the worker) re-queues the job, or fails it with the
reason once it has used JOB_MAX_ATTEMPTS. An import is one transaction, so a killed one
changed nothing and re-running it cannot duplicate anything. Files a dead job leaves (the
upload in the file storage, a `.partial` export in this host's scratch folder, an export
stored but not yet recorded) are removed when the job ends or is queued again.

This module imports the tasks at the top: the tasks import the runners, which import
lib/job_runs.py (heartbeat, claim, lock retries) and never this module, so no import is circular.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.lib.formats import RecordError
from annotation.lib.job_runs import stale_after
from annotation.lib.storage import EXPORTS, delete_quietly, files, scratch_dir, stored_names
from annotation.models import ExportJob, ImportJob, JobStatus
from annotation.tasks import run_export_job, run_import_job
from config.request_id import enqueue

logger = logging.getLogger(__name__)


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
