"""Hand import and export jobs whose worker died (stale heartbeat) to the workers again, or fail them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotation.lib.job_runs import stale_after
from annotation.models import ImportJob
from annotation.transfer.services.recovery import resume_stale_jobs


class Command(BaseCommand):
    help = (
        "Re-queue running import/export jobs whose heartbeat is older than --stale-after seconds (default: "
        "CLAIMLAB_JOB_STALE_SECONDS or 120), or fail them with the reason after CLAIMLAB_JOB_MAX_ATTEMPTS; "
        "removes the files they leave. Safe to run at any time, e.g. before starting a worker."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stale-after", type=float, help="seconds without a heartbeat")

    def handle(self, *args: Any, **options: Any) -> None:
        seconds = options["stale_after"]
        threshold = timedelta(seconds=seconds) if seconds is not None else stale_after()
        jobs = resume_stale_jobs(older_than=threshold)
        for job in jobs:
            kind = "import" if isinstance(job, ImportJob) else "export"
            outcome = "queued again" if job.status == job.Status.QUEUED else "failed"
            self.stdout.write(f"{kind} job {job.pk} of study {job.study.slug}: {outcome} (attempt {job.attempts})")
        self.stdout.write(self.style.SUCCESS(f"{len(jobs)} stale job(s) handled"))
