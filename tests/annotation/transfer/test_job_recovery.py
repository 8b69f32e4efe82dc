"""Background jobs survive their worker: lock retries, heartbeat, recovery of stale jobs.

The kill test (a real worker, SIGKILL mid-import) is test_job_kill.py; these
cover each rule on its own, without a worker process.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.db import OperationalError, connection, transaction
from django.utils import timezone
from django_tasks.base import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from annotation.lib import job_runs as job_recovery
from annotation.lib.storage import files, scratch_dir, stored_names
from annotation.models import ExportJob, ImportJob, Item, WorkerHeartbeat, this_host
from annotation.tasks import run_import_job as run_import_job_task
from annotation.transfer.services import export_runner, import_runner
from annotation.transfer.services.import_runner import run_import_job
from annotation.transfer.services.recovery import resume_stale_jobs
from tests.annotation.test_db_faults import terminate_own_backend
from tests.conftest import verification_item
from tests.support.worker import dead_pid, registered

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def var(settings, tmp_path, monkeypatch):
    settings.VAR_DIR = tmp_path / "var"
    settings.JOB_LOCK_RETRIES = 3
    settings.JOB_LOCK_BACKOFF_SECONDS = 2.0
    settings.JOB_MAX_ATTEMPTS = 2
    slept: list[float] = []
    monkeypatch.setattr(job_recovery, "sleep", slept.append)
    return slept


def queued_import(study, count: int = 3) -> ImportJob:
    """A big-upload job as submit_import leaves it: queued, with its file in the file storage (var/uploads)."""
    job = ImportJob.objects.create(study=study, what="items", file_name="items.jsonl", file_format="jsonl")
    text = "".join(json.dumps(verification_item(f"r-{n}")) + "\n" for n in range(count))
    job.file_path = files().save(f"uploads/{job.pk}-test.jsonl", ContentFile(text.encode()))
    job.save(update_fields=["file_path"])
    return job


def locking(times: int):
    """The items importer, failing with "database is locked" the first `times` calls."""
    real = import_runner.IMPORTERS[ImportJob.What.ITEMS]
    calls = {"n": 0}

    def importer(**kwargs):
        calls["n"] += 1
        if calls["n"] <= times:
            raise OperationalError("database is locked")
        return real(**kwargs)

    return importer


def test_an_import_retries_a_locked_database_with_backoff_and_succeeds(verification_study, monkeypatch, var):
    job = queued_import(verification_study)
    monkeypatch.setitem(import_runner.IMPORTERS, ImportJob.What.ITEMS, locking(2))
    run_import_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.created, job.attempts) == ("succeeded", 3, 1), job.errors
    assert var == [2.0, 4.0]  # doubling backoff
    assert Item.objects.filter(study=verification_study).count() == 3
    assert stored_names("uploads") == [] and job.file_path == ""


def test_an_import_that_stays_locked_fails_with_the_reason_and_removes_its_upload(verification_study, monkeypatch, var):
    job = queued_import(verification_study)
    monkeypatch.setitem(import_runner.IMPORTERS, ImportJob.What.ITEMS, locking(99))
    run_import_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and job.error_count == 1
    assert "stayed locked by another write through 4 attempt(s)" in job.errors[0]["message"]
    assert "nothing was changed" in job.errors[0]["message"]
    assert var == [2.0, 4.0, 8.0]
    assert not Item.objects.filter(study=verification_study).exists()
    assert stored_names("uploads") == []


def test_other_errors_are_not_retried(verification_study, monkeypatch, var):
    def broken(**kwargs):
        raise OperationalError("no such column: annotation_item.nonexistent")  # a bug, not a passing fault

    job = queued_import(verification_study)
    monkeypatch.setitem(import_runner.IMPORTERS, ImportJob.What.ITEMS, broken)
    run_import_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "no such column" in job.errors[0]["message"] and var == []


@pytest.mark.django_db(transaction=True)  # the connection is really cut: no test transaction to keep
def test_an_import_whose_connection_is_cut_by_a_database_restart_runs_again_and_succeeds(
    verification_study, monkeypatch, var
):
    """PostgreSQL restarting (or failing over) under a running import cuts its connection: the import,
    one transaction, is tried again on a new connection instead of failing (it failed in the fault
    matrix's postgres row). On PostgreSQL the backend is really terminated; SQLite's equivalent is
    its file being away for a moment."""
    job = queued_import(verification_study)
    real = import_runner.IMPORTERS[ImportJob.What.ITEMS]
    calls = {"n": 0}

    def cut_once(**kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            real(**kwargs)  # the whole import, rolled back below: nothing of it may stay
            if connection.vendor == "postgresql":
                terminate_own_backend()
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1")  # the cut connection fails here, as mid-import it would
            raise OperationalError("disk I/O error")
        return real(**kwargs)

    def in_one_transaction(**kwargs):
        with transaction.atomic():
            return cut_once(**kwargs)

    monkeypatch.setitem(import_runner.IMPORTERS, ImportJob.What.ITEMS, in_one_transaction)
    run_import_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.created, job.attempts) == ("succeeded", 3, 1), job.errors
    assert calls["n"] == 2 and len(var) == 1
    assert Item.objects.filter(study=verification_study).count() == 3


def stale(job, **fields) -> None:
    """Make `job` look like its worker died long ago while running it."""
    old = timezone.now() - timedelta(hours=1)
    type(job).objects.filter(pk=job.pk).update(status="running", heartbeat_at=old, **fields)


def test_a_stale_import_is_queued_again_then_runs_once(verification_study, django_capture_on_commit_callbacks):
    job = queued_import(verification_study)
    stale(job, attempts=1)
    fresh = queued_import(verification_study)
    type(fresh).objects.filter(pk=fresh.pk).update(status="running", heartbeat_at=timezone.now(), attempts=1)
    with django_capture_on_commit_callbacks(execute=True):
        [handled] = resume_stale_jobs()
    assert handled.pk == job.pk and handled.status == "queued"
    assert DBTaskResult.objects.filter(args_kwargs__args=[job.pk]).count() == 1  # handed to the workers
    assert ImportJob.objects.get(pk=fresh.pk).status == "running"  # a live worker's job is left alone
    run_import_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.created, job.attempts) == ("succeeded", 3, 2)
    assert Item.objects.filter(study=verification_study).count() == 3


def test_a_stale_import_out_of_attempts_fails_with_the_reason_and_its_upload_is_removed(verification_study):
    job = queued_import(verification_study)
    upload = job.file_path
    assert files().exists(upload)
    stale(job, attempts=2)
    out = io.StringIO()
    call_command("resume_stale_jobs", stdout=out)
    job.refresh_from_db()
    assert job.status == "failed" and job.finished_at is not None and job.file_path == ""
    assert "stopped without finishing it" in job.errors[0]["message"] and "changed nothing" in job.errors[0]["message"]
    assert not files().exists(upload)
    assert f"import job {job.pk} of study verif: failed (attempt 2)" in out.getvalue()


def test_a_stale_import_whose_upload_is_gone_fails_with_that_reason(verification_study):
    job = queued_import(verification_study)
    files().delete(job.file_path)
    stale(job, attempts=1)
    resume_stale_jobs()
    job.refresh_from_db()
    assert job.status == "failed" and "uploaded file is gone" in job.errors[0]["message"]


def test_a_stale_export_loses_its_partial_file_and_is_queued_again_or_failed(loaded_verification_study):
    export = ExportJob.objects.create(study=loaded_verification_study, file_format="csv")
    other = ExportJob.objects.create(study=loaded_verification_study, file_format="csv")
    partial = scratch_dir("exports") / f"{export.pk}-abc-verif-annotations.csv.partial"
    partial.write_text("half a file")
    kept = scratch_dir("exports") / f"{other.pk}-def-verif-annotations.csv.partial"
    kept.write_text("another job's file, being written on this host")
    registered("writing-here")
    held_by(other, "writing-here")
    # stored by a worker that died before it could name the file on its job
    unrecorded = files().save(f"exports/{export.pk}-ghi-verif-annotations.csv", ContentFile(b"whole but unrecorded"))
    others = files().save(f"exports/{other.pk}-jkl-verif-annotations.csv", ContentFile(b"another job's export"))
    stale(export, attempts=1)
    resume_stale_jobs()
    export.refresh_from_db()
    assert export.status == "queued" and not partial.exists() and kept.exists()
    assert not files().exists(unrecorded) and files().exists(others)
    stale(export, attempts=2)
    resume_stale_jobs()
    export.refresh_from_db()
    assert export.status == "failed" and "stopped without finishing it" in export.error


def test_import_jobs_have_a_stuck_rule_by_heartbeat(verification_study):
    job = queued_import(verification_study)
    now = timezone.now()
    assert not job.looks_stuck(now)
    assert job.looks_stuck(now + ImportJob.STUCK_AFTER + timedelta(seconds=1))
    job.status, job.heartbeat_at = "running", now + ImportJob.STUCK_AFTER
    assert not job.looks_stuck(now + ImportJob.STUCK_AFTER + timedelta(seconds=1))  # its worker is alive


@pytest.mark.django_db(transaction=True)
def test_a_running_import_stamps_its_heartbeat(verification_study, monkeypatch, settings):
    settings.JOB_STALE_SECONDS = 0.2  # a beat every 0.05 s
    job = queued_import(verification_study)
    real = import_runner.IMPORTERS[ImportJob.What.ITEMS]
    beats: list = []

    def watched(**kwargs):
        claimed = ImportJob.objects.get(pk=job.pk).heartbeat_at
        seen = threading.Event()
        for _ in range(400):  # until the side thread has stamped a newer heartbeat (at most 20 s)
            if ImportJob.objects.get(pk=job.pk).heartbeat_at != claimed:
                seen.set()
                break
            seen.wait(0.05)
        beats.append(seen.is_set())
        return real(**kwargs)

    monkeypatch.setitem(import_runner.IMPORTERS, ImportJob.What.ITEMS, watched)
    run_import_job(job_id=job.pk)
    assert beats == [True]
    assert ImportJob.objects.get(pk=job.pk).status == "succeeded"


# The worker registry (issue 31): a job held by a worker that is gone is queued again at once.


def held_by(job, worker_id: str, **fields) -> None:
    """`job` running for `worker_id`, with a fresh heartbeat (so the old stale rule would leave it alone)."""
    type(job).objects.filter(pk=job.pk).update(
        status="running", heartbeat_at=timezone.now(), worker=worker_id, attempts=1, **fields
    )


def task_row_of(job, worker_id: str) -> DBTaskResult:
    """The task row a worker left RUNNING when it died, as django-tasks-db's claim leaves it."""
    row = DBTaskResult.objects.get(pk=run_import_job_task.enqueue(job.pk).id)
    row.claim(worker_id)
    return row


def test_a_job_whose_worker_process_died_on_this_host_is_queued_again_at_once_and_its_task_row_failed(
    verification_study, django_capture_on_commit_callbacks
):
    job = queued_import(verification_study)
    registered("dead", pid=dead_pid())
    held_by(job, "dead")
    row = task_row_of(job, "dead")
    assert job_recovery.lost_workers() == {"dead"}
    with django_capture_on_commit_callbacks(execute=False) as queued:
        handled = job_recovery.recover_lost_work()
    assert [h.pk for h in handled] == [job.pk] and len(queued) == 1
    job.refresh_from_db()
    assert (job.status, job.worker, job.attempts) == ("queued", "", 1)
    row.refresh_from_db()
    assert row.status == TaskResultStatus.FAILED and row.exception_class_path.endswith("job_runs.WorkerLost")
    assert not WorkerHeartbeat.objects.filter(pk="dead").exists()


def test_a_job_whose_worker_lives_is_left_alone_and_not_stuck(verification_study):
    job = queued_import(verification_study)
    registered("alive")  # this very process
    registered("elsewhere", host="another-host", pid=1, seen_ago=1.0)
    other = queued_import(verification_study)
    held_by(job, "alive")
    held_by(other, "elsewhere")
    assert job_recovery.recover_lost_work() == []
    assert {j.status for j in ImportJob.objects.filter(pk__in=[job.pk, other.pk])} == {"running"}
    job.refresh_from_db()
    assert not job.looks_stuck()


def test_a_worker_silent_for_seconds_on_another_host_is_gone(verification_study, django_capture_on_commit_callbacks):
    job = queued_import(verification_study)
    registered("silent", host="another-host", pid=os.getpid(), seen_ago=WorkerHeartbeat.LOST_AFTER.total_seconds() + 1)
    held_by(job, "silent")
    job.refresh_from_db()
    assert job.looks_stuck()  # at once, not after ten minutes
    with django_capture_on_commit_callbacks(execute=False):
        job_recovery.recover_lost_work()
    assert ImportJob.objects.get(pk=job.pk).status == "queued"


def test_a_job_of_an_unregistered_worker_or_of_one_whose_pid_was_reused_is_queued_again(
    verification_study, django_capture_on_commit_callbacks
):
    missing = queued_import(verification_study)
    held_by(missing, "never-registered")
    reused = queued_import(verification_study)
    registered("before-restart", seen_ago=60.0)  # same host, same (live) pid, older: the pid is a newer worker's
    registered("after-restart")
    held_by(reused, "before-restart")
    with django_capture_on_commit_callbacks(execute=False):
        job_recovery.recover_lost_work()
    assert {j.status for j in ImportJob.objects.filter(pk__in=[missing.pk, reused.pk])} == {"queued"}
    assert set(WorkerHeartbeat.objects.values_list("pk", flat=True)) == {"after-restart"}


def test_a_job_whose_worker_keeps_dying_fails_with_the_reason_after_its_attempts(verification_study):
    job = queued_import(verification_study)
    registered("dead", pid=dead_pid())
    held_by(job, "dead")
    ImportJob.objects.filter(pk=job.pk).update(attempts=2)  # JOB_MAX_ATTEMPTS here
    job_recovery.recover_lost_work()
    job.refresh_from_db()
    assert job.status == "failed" and "stopped without finishing it" in job.errors[0]["message"]


@pytest.mark.django_db(transaction=True)
def test_a_worker_registers_beats_and_leaves(monkeypatch):
    monkeypatch.setattr(job_recovery, "WORKER_BEAT_SECONDS", 0.05)
    registration = job_recovery.WorkerRegistration("me")
    try:
        assert job_recovery.current_worker() == "me"
        first = WorkerHeartbeat.objects.get(pk="me")
        assert (first.host, first.pid) == (this_host(), os.getpid())
        WorkerHeartbeat.objects.filter(pk="me").delete()  # taken for gone by another worker: it comes back
        for _ in range(200):
            if WorkerHeartbeat.objects.filter(pk="me").exists():
                break
            time.sleep(0.05)
        assert WorkerHeartbeat.objects.get(pk="me").last_seen >= first.last_seen
    finally:
        registration.close()
    assert job_recovery.current_worker() == "" and not WorkerHeartbeat.objects.exists()


def test_recovery_on_a_host_removes_the_export_files_no_worker_there_is_writing(loaded_verification_study):
    """A worker killed here leaves its `.partial`; the job may be re-run on another host, which cannot
    reach this disk: the next recovery here (a worker's start, resume_stale_jobs) removes it."""
    study = loaded_verification_study
    jobs = {name: ExportJob.objects.create(study=study, file_format="csv") for name in ("here", "there", "done")}
    registered("worker-here")
    registered("worker-there", host="another-host", pid=1)
    held_by(jobs["here"], "worker-here")
    held_by(jobs["there"], "worker-there")  # re-queued after a kill here and now run elsewhere
    ExportJob.objects.filter(pk=jobs["done"].pk).update(status="succeeded")
    scratch = scratch_dir("exports")
    for name, job in jobs.items():
        (scratch / f"{job.pk}-{name}-verif-annotations.csv.partial").write_text("rows")
    assert call_command_output("resume_stale_jobs").endswith("0 stale job(s) handled\n")
    assert sorted(path.name for path in scratch.iterdir()) == [f"{jobs['here'].pk}-here-verif-annotations.csv.partial"]


def call_command_output(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_a_worker_started_before_migrate_waits_for_the_tables(monkeypatch, var):
    """A worker started beside the web server may start before `migrate` ends: it waits, it does not exit."""
    from django.db import ProgrammingError

    calls: list[int] = []

    def register() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ProgrammingError('relation "annotation_workerheartbeat" does not exist')
        return "registered"

    assert job_recovery._when_schema_ready(register, what="registering") == "registered"
    assert len(calls) == 3 and var == [1.0, 1.0]

    def broken() -> None:
        raise ProgrammingError('column "pid" is of type integer but expression is of type text')

    with pytest.raises(ProgrammingError, match="is of type integer"):  # other errors are not waited out
        job_recovery._when_schema_ready(broken, what="registering")
    monkeypatch.setattr(job_recovery, "WORKER_SCHEMA_WAIT_SECONDS", 0)
    calls.clear()
    with pytest.raises(ProgrammingError, match="does not exist"):  # nor a schema that never comes
        job_recovery._when_schema_ready(register, what="registering")
    assert len(calls) == 1


def test_an_export_whose_database_goes_away_mid_read_is_written_again_whole(
    loaded_verification_study, monkeypatch, var
):
    """A database restart while the export reads: the export starts again on a new connection and
    stores one whole file (the half-written `.partial` of the first try is gone)."""
    real = export_runner.write_export
    calls = {"n": 0}

    def cut_once(study, fmt, path):
        calls["n"] += 1
        if calls["n"] == 1:
            path.with_name(path.name + ".partial").write_text("half a file")
            raise OperationalError("disk I/O error")
        return real(study, fmt, path)

    monkeypatch.setattr(export_runner, "write_export", cut_once)
    job = ExportJob.objects.create(study=loaded_verification_study, file_format="csv")
    export_runner.run_export_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.attempts, calls["n"], len(var)) == ("succeeded", 1, 2, 1), job.error
    assert stored_names("exports") == [job.file_path]
    with files().open(job.file_path, "rb") as stored:
        assert len(stored.read().decode().splitlines()) == job.rows + 1
