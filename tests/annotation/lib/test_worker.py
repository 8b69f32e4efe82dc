"""`manage.py worker` outlasts a locked database (issue 10, §2).

django-tasks-db's own worker records a task's outcome with three quick tries;
when another write holds SQLite's lock longer, the error leaves its loop and
the process exits, and every later job stays queued. These tests drive the
real task records through both workers.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from annotation.lib import job_runs as job_recovery
from annotation.lib import worker as worker_module
from annotation.lib.worker import LockTolerantWorker
from annotation.models import ImportJob, Item
from annotation.tasks import run_import_job
from tests.annotation.transfer.test_job_recovery import queued_import

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_waiting(settings, tmp_path, monkeypatch):
    settings.VAR_DIR = tmp_path / "var"
    settings.JOB_LOCK_RETRIES = 4
    slept: list[float] = []
    monkeypatch.setattr(job_recovery, "sleep", slept.append)
    monkeypatch.setattr("django_tasks_db.utils.time.sleep", lambda seconds: None)
    return slept


def make_worker(cls: type[Worker]) -> Worker:
    return cls(
        queue_names=["default"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="test-worker",
        excluded_queue_names=[],
    )


def locked_outcome_saves(monkeypatch, times: int) -> list[str]:
    """Saving a task's outcome fails with "database is locked" `times` times."""
    real_save = DBTaskResult.save
    failures: list[str] = []

    def save(self, *args, **kwargs):
        if "finished_at" in (kwargs.get("update_fields") or []) and len(failures) < times:
            failures.append(self.status)
            raise OperationalError("database is locked")
        return real_save(self, *args, **kwargs)

    monkeypatch.setattr(DBTaskResult, "save", save)
    return failures


def enqueued_import(study) -> DBTaskResult:
    job = queued_import(study)
    run_import_job.enqueue(job.pk)
    return DBTaskResult.objects.get(args_kwargs__args=[job.pk])


def test_the_stock_worker_dies_when_the_outcome_cannot_be_saved(verification_study, monkeypatch):
    """What happened before: three lock errors in a row end the process."""
    task = enqueued_import(verification_study)
    locked_outcome_saves(monkeypatch, times=6)
    with pytest.raises(OperationalError):
        make_worker(Worker).run_task(task)


def test_the_worker_saves_the_outcome_once_the_lock_is_released(verification_study, monkeypatch, no_waiting):
    task = enqueued_import(verification_study)
    failures = locked_outcome_saves(monkeypatch, times=4)
    make_worker(LockTolerantWorker).run_task(task)
    task.refresh_from_db()
    assert task.status == "SUCCESSFUL"
    assert len(failures) == 4 and no_waiting  # backed off between tries
    assert ImportJob.objects.get().status == ImportJob.Status.SUCCEEDED
    assert Item.objects.filter(study=verification_study).count() == 3


@pytest.mark.django_db(transaction=True)  # the worker closes and reopens connections, as in production
@pytest.mark.parametrize(
    "fault",
    [
        OperationalError("database is locked"),
        # a database restart as psycopg reports it, once Django has wrapped it
        OperationalError("consuming input failed: server closed the connection unexpectedly"),
        OperationalError("unable to open database file"),  # SQLite's file away for a moment
    ],
    ids=["locked", "connection-lost", "file-away"],
)
def test_the_worker_loop_goes_on_after_a_passing_database_fault_and_runs_the_next_task(
    verification_study, monkeypatch, fault
):
    """A lock error, or a connection lost to a database restart, that escapes one turn of the loop
    pauses the worker (it used to exit, its supervisor restarting it); it then runs what is queued."""
    task = enqueued_import(verification_study)
    real_work = LockTolerantWorker._work
    turns = {"n": 0}
    if "consuming input" in str(fault):
        fault.__cause__ = psycopg.OperationalError(str(fault))

    def flaky_work(self, wakeup):
        turns["n"] += 1
        if turns["n"] == 1:
            raise fault
        return real_work(self, wakeup)

    monkeypatch.setattr(LockTolerantWorker, "_work", flaky_work)
    make_worker(LockTolerantWorker).run()  # batch mode: returns once nothing is left
    task.refresh_from_db()
    assert turns["n"] == 2 and task.status == "SUCCESSFUL"
    assert ImportJob.objects.get().status == ImportJob.Status.SUCCEEDED


def test_other_errors_still_stop_the_worker(monkeypatch):
    def broken(self, wakeup):
        raise OperationalError("no such table: django_tasks_database_dbtaskresult")

    monkeypatch.setattr(LockTolerantWorker, "_work", broken)
    with pytest.raises(OperationalError, match="no such table"):
        make_worker(LockTolerantWorker).run()
    assert worker_module.LOCKED_PAUSE_SECONDS > 0
