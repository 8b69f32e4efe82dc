"""Hand verifier runs whose worker died (stale heartbeat) to the workers again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from metaeval.verifiers.services import resume_stale_runs
from metaeval.verifiers.services.runs import stale_after


class Command(BaseCommand):
    help = (
        "Resume verifier runs whose heartbeat is older than --stale-after seconds (default: "
        "CLAIMLAB_VERIFIER_STALE_SECONDS or 120); safe to run at any time, e.g. before starting a worker."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stale-after", type=float, help="seconds without a heartbeat")

    def handle(self, *args: Any, **options: Any) -> None:
        seconds = options["stale_after"]
        threshold = timedelta(seconds=seconds) if seconds is not None else stale_after()
        runs = resume_stale_runs(older_than=threshold)
        for run in runs:
            self.stdout.write(f"resumed run {run.pk} of {run.verifier.name!r} ({run.done} of {run.total} done)")
        self.stdout.write(self.style.SUCCESS(f"{len(runs)} stale run(s) resumed"))
