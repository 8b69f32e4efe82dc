"""Background tasks of the report (django-tasks API, any backend)."""

from __future__ import annotations

from typing import Any

from django_tasks import task

from .reporting import cache


@task()
def refresh_report(study_id: int, options: dict[str, Any]) -> dict[str, Any]:
    """Build and cache a study's report after its data changed, so the page need not (issue 15 §3)."""
    return cache.refresh_report(study_id, options)


def _queue_refresh(study_id: int, options: dict[str, Any]) -> Any:
    """Queue ``refresh_report`` (looked up when called, so a test's stand-in for it is used)."""
    return refresh_report.enqueue(study_id, options)


cache.register_refresh_task(_queue_refresh)
