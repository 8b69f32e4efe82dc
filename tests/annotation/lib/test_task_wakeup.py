"""An idle worker starts a queued task at once instead of at its next look (annotation.lib.task_wakeup, issue 15).

On PostgreSQL queueing a task notifies the workers when its transaction commits, and a
worker waiting out its interval wakes; on SQLite, which has no such signal, the worker
looks at the queue every `POLL_SECONDS` instead of the stock worker's second.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection, transaction
from django_tasks_db.models import DBTaskResult

from annotation.lib.task_wakeup import NOTIFIED_POLL_SECONDS, POLL_SECONDS, Wakeup, default_interval
from metaeval.tasks import refresh_report
from tests.support.worker import start_db_worker, stop, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ON_POSTGRES = connection.vendor == "postgresql"
NO_STUDY = 10**9  # the task returns at once for a study that does not exist: nothing else is touched


def queue_a_task() -> str:
    return str(refresh_report.enqueue(NO_STUDY, {}).id)


def finished(task_id: str) -> bool:
    return DBTaskResult.objects.filter(pk=task_id, status="SUCCESSFUL").exists()


def test_a_queued_task_wakes_a_waiting_worker_once_its_transaction_commits():
    wakeup = Wakeup()
    try:
        with transaction.atomic():
            queue_a_task()
            woken_before_commit = wakeup.wait(0.2)  # the task's row is not visible yet: nothing to wake for
        woken_after_commit = wakeup.wait(10 if ON_POSTGRES else 0.01)
        woken_again = wakeup.wait(0.2)  # one wake for what was queued; nothing more
    finally:
        wakeup.close()
    assert not woken_before_commit
    assert woken_after_commit is ON_POSTGRES  # SQLite: no signal, the worker looks every POLL_SECONDS
    assert not woken_again


def test_the_worker_looks_at_the_queue_often_where_nothing_wakes_it():
    assert default_interval() == (NOTIFIED_POLL_SECONDS if ON_POSTGRES else POLL_SECONDS)
    assert POLL_SECONDS < 1  # the stock worker's default


@pytest.mark.slow
def test_an_idle_worker_runs_a_task_queued_during_its_wait(tmp_path):
    """On PostgreSQL the worker waits 60 s between looks here, so only the notification can start the task in time."""
    log = tmp_path / "worker.log"
    worker = start_db_worker(log, {}, interval="60" if ON_POSTGRES else None)
    try:
        first = queue_a_task()
        wait_for(lambda: finished(first), "the first task", worker, log, timeout=60)
        time.sleep(0.5)  # the worker has looked at the queue again, found nothing and waits
        second = queue_a_task()
        wait_for(lambda: finished(second), "the task queued while the worker waited", worker, log, timeout=30)
    finally:
        stop(worker)
