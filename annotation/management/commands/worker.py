"""`manage.py worker`: the worker for the configured task backend, with django-tasks-db's `db_worker` options.

Database backend: `db_worker`, surviving lock contention. RQ backend: an RQ worker
on the same queues (--batch: burst mode; --max-tasks and --worker-id as they are;
--interval, --reload and the startup delay do not apply to RQ). Idle, it looks at the
queue every --interval seconds, and on PostgreSQL a queued task wakes it at once
(annotation.lib.task_wakeup). At start and every few seconds while idle it re-queues the
jobs, verifier runs and report builds of workers that are gone (annotation.lib.job_runs).
"""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError
from typing import Any

from django.conf import settings
from django_tasks import task_backends
from django_tasks.exceptions import InvalidTaskBackendError
from django_tasks_db.management.commands import db_worker

from annotation.lib.background_priority import lower_priority
from annotation.lib.task_wakeup import POLL_SECONDS, default_interval
from annotation.lib.worker import LockTolerantWorker, is_rq, run_rq_worker
from annotation.transfer.services import recovery  # noqa: F401  (registers the import/export jobs' recovery)


class Command(db_worker.Command):
    help = (
        "Run background tasks (verifier runs, big imports and exports) like django-tasks-db's db_worker, "
        "but riding out a database locked by another long write instead of exiting; with the RQ backend "
        "(TASKS_BACKEND=django_tasks_rq.RQBackend), an RQ worker on the same queues."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        super().add_arguments(parser)
        # db_worker's --backend accepts database backends only; this command serves the RQ backend too.
        for action in parser._actions:
            if action.dest == "backend_name":
                action.type = configured_backend
            if action.dest == "interval":  # a queued task wakes the worker where the database can tell it
                action.default = default_interval()
                action.help = (
                    "Seconds between looks at the queue when idle (default: 1 on PostgreSQL, where a queued "
                    f"task also wakes the worker at once; {POLL_SECONDS} elsewhere)"
                )

    def handle(self, *args: Any, **options: Any) -> None:
        # Background work yields the CPU to annotators' pages (RQ's work horses, forked from here, inherit it).
        lower_priority(settings.BACKGROUND_NICE)
        backend = task_backends[options["backend_name"]]
        if is_rq(backend):
            run_rq_worker(
                backend,
                queue_names=options["queue_name"].split(","),
                burst=options["batch"],
                max_jobs=options["max_tasks"],
                name=options["worker_id"],
                verbosity=options["verbosity"],
            )
            return
        # db_worker.Command.handle builds its worker from the module's `Worker`; swap in ours
        # for this call only (same options, same signals and reloader handling).
        original = db_worker.Worker
        db_worker.Worker = LockTolerantWorker  # type: ignore[misc]
        try:
            super().handle(*args, **options)
        finally:
            db_worker.Worker = original  # type: ignore[misc]


def configured_backend(name: str) -> str:
    """`name` when settings.TASKS defines a backend by that name (database or RQ)."""
    try:
        task_backends[name]
    except InvalidTaskBackendError:
        raise ArgumentTypeError(f"no task backend {name!r} in the TASKS setting") from None
    return name
