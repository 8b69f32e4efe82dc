"""`manage.py worker`: django-tasks-db's `db_worker` with the same options, surviving lock contention."""

from __future__ import annotations

from typing import Any

from django_tasks_db.management.commands import db_worker

from annotation.worker import LockTolerantWorker


class Command(db_worker.Command):
    help = (
        "Run background tasks (verifier runs, big imports and exports) like django-tasks-db's db_worker, "
        "but riding out a database locked by another long write instead of exiting."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        # db_worker.Command.handle builds its worker from the module's `Worker`; swap in ours
        # for this call only (same options, same signals and reloader handling).
        original = db_worker.Worker
        db_worker.Worker = LockTolerantWorker  # type: ignore[misc]
        try:
            super().handle(*args, **options)
        finally:
            db_worker.Worker = original  # type: ignore[misc]
