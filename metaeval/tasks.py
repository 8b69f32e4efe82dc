"""Background tasks of the report (django-tasks API, any backend)."""

from __future__ import annotations

from typing import Any

from django_tasks import task

from annotation.lib.job_runs import register_preload, register_recovery

from .reporting import cache
from .verifiers.limiter import release_slots_of
from .verifiers.services.runs import recover_lost_runs


@task()
def refresh_report(study_id: int, options: dict[str, Any]) -> dict[str, Any]:
    """Build and cache a study's report after its data changed, so the page need not (issue 15 §3)."""
    return cache.refresh_report(study_id, options)


def _queue_refresh(study_id: int, options: dict[str, Any]) -> Any:
    """Queue ``refresh_report`` (looked up when called, so a test's stand-in for it is used)."""
    return refresh_report.enqueue(study_id, options)


cache.register_refresh_task(_queue_refresh)

# What every worker does at start and every few seconds while idle: queue again the verifier runs
# and report builds whose worker is gone (annotation.lib.job_runs.recover_lost_work).
register_recovery(release_slots_of)  # a gone worker's endpoint slots, free before its run is queued again
register_recovery(recover_lost_runs)
register_recovery(cache.recover_lost_refreshes)
# The verifier runner, imported lazily by its task (the web processes never need it): an RQ worker
# imports it once, before it forks, instead of once per chunk in every work horse.
register_preload("metaeval.verifiers.runner.orchestration")
