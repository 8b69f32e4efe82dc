"""Killing the worker mid-job loses nothing, imports nothing twice and leaves no file.

A real ``manage.py worker`` runs a big item import (or a big export) against
this test's database and gets SIGKILL halfway. The job is left "running" with
its upload on disk and no item imported (the rows staged so far were in the
worker's private temporary table, gone with its connection), or with a
``.partial`` export file. A second worker, started afterwards, sees at its start
that the job's worker is dead (its pid is gone on this host) and queues it again
(removing the partial file) with no ``resume_stale_jobs`` and no wait for a stale
heartbeat (its JOB_STALE_SECONDS is ten minutes); it marks the dead worker's task
row failed and finishes the job: every item imported exactly once, the upload
removed; the export whole, with every annotation once.
The same jobs on the RQ backend: tests/ops/test_rq_kill.py.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from django_tasks.base import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from annotation.models import ExportJob, ImportJob
from annotation.tasks import run_export_job, run_import_job
from tests.support.job_kill import (
    JOB_STALE_SECONDS,
    assert_export_whole,
    assert_import_whole,
    assert_killed_export_left_a_partial_file,
    assert_killed_import_changed_nothing,
    big_import_job,
    export_ended,
    export_is_writing,
    import_ended,
    import_is_staging,
    labelled_export_job,
)
from tests.support.worker import kill, start_db_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


#: A generous bound on "running again within the recovery window" (the worker looks at start and
#: every RECOVERY_CHECK_SECONDS while idle; the goal is 10 s), so a slow machine does not fail it.
RECOVERY_DEADLINE = 30.0
#: The second worker's job heartbeat limit: far beyond the deadline, so only the dead-worker rule can recover.
NO_STALE_RULE = "600"


def start_worker(
    log: Path, var: Path, stale_seconds: str = JOB_STALE_SECONDS, *, hold: str | None = None
) -> subprocess.Popen:
    env = {"CLAIMLAB_VAR_DIR": str(var), "CLAIMLAB_JOB_STALE_SECONDS": stale_seconds}
    return start_db_worker(log, env, hold=hold)


def running_again(model: type[ImportJob] | type[ExportJob], job_id: int) -> bool:
    job = model.objects.get(pk=job_id)
    return job.attempts >= 2 and job.status != model.Status.QUEUED


def assert_lost_task_row_failed(task_id: str) -> None:
    row = DBTaskResult.objects.get(pk=task_id)
    assert row.status == TaskResultStatus.FAILED and row.exception_class_path.endswith("WorkerLost"), row.status


def recovered_by_a_new_worker(model: type[ImportJob] | type[ExportJob], job_id: int, tmp_path: Path, var: Path):
    """Start a second worker and wait (RECOVERY_DEADLINE at most) for it to run the job again by itself;
    the worker and the seconds it took from its start."""
    started = time.monotonic()
    second = start_worker(tmp_path / "worker2.log", var, NO_STALE_RULE)
    wait_for(
        lambda: running_again(model, job_id),
        "a new worker to run the killed job again",
        second,
        tmp_path / "worker2.log",
        RECOVERY_DEADLINE,
    )
    seconds = time.monotonic() - started
    print(f"{model.__name__} {job_id} running again {seconds:.2f} s after the new worker started")
    return second, seconds


def test_a_worker_killed_mid_import_is_run_again_by_a_new_worker_without_duplicates_or_leftover_files(
    verification_study, settings, tmp_path
):
    var = tmp_path / "var"
    settings.VAR_DIR = var
    job, upload = big_import_job(verification_study)
    task = run_import_job.enqueue(job.pk)

    first = start_worker(tmp_path / "worker1.log", var, hold="import")
    try:
        log = tmp_path / "worker1.log"
        wait_for(lambda: import_is_staging(job.pk, log), "the import to be staging", first, log)
        kill(first)
    finally:
        stop(first)
    assert_killed_import_changed_nothing(job, upload)
    assert DBTaskResult.objects.get(pk=task.id).status == TaskResultStatus.RUNNING  # nothing could mark it

    second, _ = recovered_by_a_new_worker(ImportJob, job.pk, tmp_path, var)
    try:
        assert_lost_task_row_failed(task.id)
        wait_for(lambda: import_ended(job.pk), "the re-queued import to end", second, tmp_path / "worker2.log", 300)
    finally:
        stop(second)
    assert_import_whole(job, upload)


def test_a_worker_killed_mid_export_is_run_again_by_a_new_worker_whole_and_without_partial_files(
    verification_study, settings, tmp_path
):
    var = tmp_path / "var"
    settings.VAR_DIR = var
    job = labelled_export_job(verification_study)
    task = run_export_job.enqueue(job.pk)

    first = start_worker(tmp_path / "worker1.log", var, hold="export")
    try:
        log = tmp_path / "worker1.log"
        wait_for(lambda: export_is_writing(job.pk, log), "the export to be writing", first, log)
        kill(first)
    finally:
        stop(first)
    assert_killed_export_left_a_partial_file(job)

    second, _ = recovered_by_a_new_worker(ExportJob, job.pk, tmp_path, var)
    try:
        assert_lost_task_row_failed(task.id)
        wait_for(lambda: export_ended(job.pk), "the re-queued export to end", second, tmp_path / "worker2.log", 300)
    finally:
        stop(second)
    assert_export_whole(job)
