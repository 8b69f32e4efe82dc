"""Recovery of import and export jobs whose worker is gone: re-queued, or failed with the reason.

A job records the registered worker that runs it (annotation/lib/job_runs.py). When that
worker is gone (SIGKILL, OOM, reboot: its process dead on this host, or its registry row
silent for seconds elsewhere), any worker, at start and every few seconds while idle, calls
`recover_lost_jobs`, which re-queues the job, or fails it with the reason once it has used
JOB_MAX_ATTEMPTS; a job silent for JOB_STALE_SECONDS is handled the same way.
`resume_stale_jobs` (`manage.py resume_stale_jobs`) runs the same code by hand. An import is one transaction, so a killed one
changed nothing and re-running it cannot duplicate anything. Files a dead job leaves (the
upload in the file storage, a `.partial` export or a Hugging Face dataset folder in this host's
scratch folder, an export stored but not yet recorded) are removed when the job ends or is
queued again.

This module imports the tasks at the top: the tasks import the runners, which import
lib/job_runs.py (heartbeat, claim, lock retries) and never this module, so no import is circular.
"""

from __future__ import annotations

import logging
import shutil
from datetime import timedelta
from functools import partial
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.lib.formats import RecordError
from annotation.lib.job_runs import register_recovery, stale_after
from annotation.lib.storage import EXPORTS, delete_quietly, files, scratch_dir, stored_names
from annotation.models import ExportJob, ImportJob, JobStatus, WorkerHeartbeat, this_host
from annotation.tasks import run_export_job, run_import_job
from config.request_id import enqueue

logger = logging.getLogger(__name__)


def _stale(model: type[ImportJob] | type[ExportJob], cutoff) -> list[int]:
    running = Q(status=JobStatus.RUNNING) & (
        Q(heartbeat_at__lte=cutoff) | Q(heartbeat_at__isnull=True, created_at__lte=cutoff)
    )
    return list(model.objects.filter(running).values_list("pk", flat=True))


def _held_by_lost_workers(model: type[ImportJob] | type[ExportJob], lost: set[str]) -> list[int]:
    """Running jobs whose worker is gone: in `lost`, or no longer in the registry at all.

    The jobs are read before the registry: a worker registers before it claims a job, so
    a job claimed meanwhile has its worker in the registry read after it.
    """
    held = list(model.objects.filter(status=JobStatus.RUNNING).exclude(worker="").values_list("pk", "worker"))
    if not held:
        return []
    registered = set(WorkerHeartbeat.objects.filter(pk__in={w for _, w in held}).values_list("pk", flat=True))
    return [pk for pk, worker in held if worker in lost or worker not in registered]


def _give_up_message(job: ImportJob | ExportJob, changed: str) -> str:
    return (
        f"the worker running this job stopped without finishing it (killed, or no heartbeat) "
        f"{job.attempts} time(s); {changed} Start it again"
    )


def resume_stale_jobs(*, older_than: timedelta | None = None) -> list[ImportJob | ExportJob]:
    """Re-queue (or fail, after JOB_MAX_ATTEMPTS) running jobs whose heartbeat is older than `older_than`,
    and those whose worker is gone (the workers' own recovery, `recover_lost_jobs`, does the same)."""
    from annotation.lib.job_runs import lost_workers

    return recover_lost_jobs(lost_workers(), older_than=older_than)


def recover_lost_jobs(lost: set[str], *, older_than: timedelta | None = None) -> list[ImportJob | ExportJob]:
    """Re-queue (or fail, after JOB_MAX_ATTEMPTS) running jobs held by gone workers (`lost`, or missing
    from the registry) or silent for `older_than` (default JOB_STALE_SECONDS). Run by every worker at
    start and every few seconds while idle (annotation.lib.job_runs.recover_lost_work)."""
    threshold = stale_after() if older_than is None else older_than
    cutoff = timezone.now() - threshold
    handled: list[ImportJob | ExportJob] = []
    for job_id in sorted(set(_stale(ImportJob, cutoff)) | set(_held_by_lost_workers(ImportJob, lost))):
        with transaction.atomic():
            job = ImportJob.objects.select_for_update().get(pk=job_id)
            if job.status != JobStatus.RUNNING:
                continue
            upload_there = bool(job.file_path) and files().exists(job.file_path)
            if job.attempts < settings.JOB_MAX_ATTEMPTS and upload_there:
                job.status, job.heartbeat_at, job.worker = JobStatus.QUEUED, None, ""
                job.save(update_fields=["status", "heartbeat_at", "worker"])
                transaction.on_commit(partial(enqueue, run_import_job, job.pk))
                logger.warning("import job %s: worker died (attempt %d); queued again", job.pk, job.attempts)
            else:
                reason = _give_up_message(job, "the import changed nothing (it is all or nothing).")
                if not upload_there:
                    reason = (
                        "the uploaded file is gone, so the import cannot run again; it changed nothing. Upload it again"
                    )
                job.status, job.finished_at, job.worker = JobStatus.FAILED, timezone.now(), ""
                job.errors, job.error_count = [RecordError(None, reason).as_dict()], 1
                stored, job.file_path = job.file_path, ""
                job.save(update_fields=["status", "finished_at", "errors", "error_count", "file_path", "worker"])
                delete_quietly(stored)
                logger.warning("import job %s failed: %s", job.pk, reason)
            handled.append(job)
    for job_id in sorted(set(_stale(ExportJob, cutoff)) | set(_held_by_lost_workers(ExportJob, lost))):
        with transaction.atomic():
            export = ExportJob.objects.select_for_update().get(pk=job_id)
            if export.status != JobStatus.RUNNING:
                continue
            remove_partial_exports(export)
            if export.attempts < settings.JOB_MAX_ATTEMPTS:
                export.status, export.heartbeat_at, export.worker = JobStatus.QUEUED, None, ""
                export.save(update_fields=["status", "heartbeat_at", "worker"])
                transaction.on_commit(partial(enqueue, run_export_job, export.pk))
                logger.warning("export job %s: worker died (attempt %d); queued again", export.pk, export.attempts)
            else:
                export.status, export.finished_at, export.worker = JobStatus.FAILED, timezone.now(), ""
                export.error = _give_up_message(export, "no file was written.")
                export.save(update_fields=["status", "finished_at", "error", "worker"])
                logger.warning("export job %s failed: %s", export.pk, export.error)
            handled.append(export)
    sweep_scratch_exports()
    return handled


def sweep_scratch_exports() -> list[str]:
    """Delete this host's scratch export files (and folders) that no worker on this host is writing; their names.

    Why: a worker killed on this host leaves its `.partial` export here, and the worker that
    re-queued the job may run on another host, which cannot reach this disk. A file is kept
    only while its job is running on a worker registered from this host (or on no recorded
    worker yet), so the next recovery on this host (a worker's start) removes the rest.
    """
    leftovers = {path: _job_id(path.name) for path in scratch_dir(EXPORTS).iterdir()}
    if not leftovers:
        return []
    running = dict(
        ExportJob.objects.filter(
            pk__in={pk for pk in leftovers.values() if pk is not None}, status=JobStatus.RUNNING
        ).values_list("pk", "worker")
    )
    here = set(WorkerHeartbeat.objects.filter(host=this_host()).values_list("pk", flat=True))
    removed = []
    for path, job_id in leftovers.items():
        if job_id in running and (running[job_id] == "" or running[job_id] in here):
            continue
        _remove(path)
        removed.append(path.name)
    if removed:
        logger.warning("removed %d export file(s) a stopped worker left on this host: %s", len(removed), removed)
    return removed


def _remove(path: Path) -> None:
    """A scratch file, or a folder (a Hugging Face export builds its dataset folder beside its zip)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _job_id(file_name: str) -> int | None:
    """The export job's id a scratch file is named after (`<job id>-<token>...`), if any."""
    head = file_name.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def remove_partial_exports(job: ExportJob) -> None:
    """Delete what a dead worker left for this unfinished export job: its `.partial` file in this
    host's scratch folder (a worker on another host leaves its own there; see docs/deploy.md), and
    a file it had stored but not yet recorded on the job."""
    for leftover in scratch_dir(EXPORTS).glob(f"{job.pk}-*"):
        _remove(leftover)
    for name in stored_names(EXPORTS):
        if name.startswith(f"{EXPORTS}/{job.pk}-") and name != job.file_path:
            files().delete(name)


register_recovery(recover_lost_jobs)
