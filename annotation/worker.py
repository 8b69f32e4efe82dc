"""django-tasks-db's worker, made to survive a database locked by another long write.

Why not the stock `db_worker`: when SQLite's write lock outlasts the busy
timeout while the worker records a task's outcome (`set_successful` /
`set_failed` retry three times, 0.1 s apart, then raise), the exception leaves
its loop and the process exits; every later job then stays queued. Here the
outcome is saved with the jobs' own backoff (job_recovery.retry_on_lock), and
a lock error that still escapes one turn of the loop is logged and the loop
goes on after a pause. Any other error still stops the worker, as before.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.db import close_old_connections
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from .dblocks import is_lock_error
from .services import job_recovery

logger = logging.getLogger(__name__)

#: Pause after a lock error escaped a turn of the loop, before the next turn.
LOCKED_PAUSE_SECONDS = 1.0


class LockTolerantWorker(Worker):
    """A Worker whose loop and outcome saves outlast lock contention."""

    def run(self) -> None:
        while self.running:
            try:
                super().run()
                return  # the loop ended on its own (batch done, max tasks, or shut down)
            except Exception as exc:
                if not is_lock_error(exc):
                    raise
                logger.warning("worker %s: database locked (%s); going on shortly", self.worker_id, exc)
                close_old_connections()
                job_recovery.sleep(LOCKED_PAUSE_SECONDS)

    def run_task(self, db_task_result: DBTaskResult) -> None:
        set_successful, set_failed = db_task_result.set_successful, db_task_result.set_failed

        def save_success(value: Any) -> None:
            job_recovery.retry_on_lock(
                partial(set_successful, value), what=f"recording task {db_task_result.id} as done"
            )

        def save_failure(exc: BaseException) -> None:
            job_recovery.retry_on_lock(partial(set_failed, exc), what=f"recording task {db_task_result.id} as failed")

        db_task_result.set_successful = save_success
        db_task_result.set_failed = save_failure
        super().run_task(db_task_result)
