"""A report build killed with its worker is built again by the next worker, with no page view and no cron.

A real ``manage.py worker`` builds a big study's report (20,000 items, three labels each, many
bootstrap resamples: several seconds) and gets SIGKILL mid-build. Before issue 31 the build was
asked again only by a page view after ``REPORT_REFRESH_RETRY_SECONDS`` (ten minutes); now a
second worker sees at its start that the build's worker is dead, queues the build again, marks
the dead worker's task row failed, and stores the report.
"""

from __future__ import annotations

import time

import pytest
from django_tasks.base import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from metaeval import selectors
from metaeval.models import ReportRefresh
from metaeval.reporting import ReportOptions, cache
from tests.support.job_kill import labelled_export_job
from tests.support.worker import kill, start_db_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

#: A generous bound on "built again within the recovery window" (the goal is 10 s).
RECOVERY_DEADLINE = 30.0
#: Enough resamples for the build to take seconds, so that the kill lands mid-build.
OPTIONS = ReportOptions(n_resamples=20_000)


def test_a_report_build_killed_with_its_worker_is_built_again_by_a_new_worker(verification_study, tmp_path):
    labelled_export_job(verification_study)
    fingerprint = selectors.report_fingerprint(verification_study)
    assert cache.request_refresh(verification_study, OPTIONS, fingerprint)
    refresh = ReportRefresh.objects.get(study=verification_study, options_key=cache.options_key(OPTIONS))

    first = start_db_worker(tmp_path / "worker1.log", {"CLAIMLAB_VAR_DIR": str(tmp_path)})
    try:
        wait_for(
            lambda: ReportRefresh.objects.get(pk=refresh.pk).worker != "",
            "the build to start",
            first,
            tmp_path / "worker1.log",
        )
        time.sleep(0.5)  # well inside the build
        kill(first)
    finally:
        stop(first)
    refresh.refresh_from_db()
    assert refresh.worker and refresh.attempts == 1, "the build ended before the kill: make it bigger"
    assert cache.cached_current(verification_study, OPTIONS, fingerprint) is None
    # the build in flight at the kill: nothing could mark its task row
    lost_task = DBTaskResult.objects.get(task_path__endswith="refresh_report", status=TaskResultStatus.RUNNING)

    started = time.monotonic()
    second = start_db_worker(tmp_path / "worker2.log", {"CLAIMLAB_VAR_DIR": str(tmp_path)})
    try:
        wait_for(
            lambda: ReportRefresh.objects.get(pk=refresh.pk).attempts == 2,
            "a new worker to build the report again by itself",
            second,
            tmp_path / "worker2.log",
            RECOVERY_DEADLINE,
        )
        print(f"report build running again {time.monotonic() - started:.2f} s after the new worker started")
        lost_task.refresh_from_db()
        assert lost_task.status == TaskResultStatus.FAILED and lost_task.exception_class_path.endswith("WorkerLost")
        wait_for(
            lambda: cache.cached_current(verification_study, OPTIONS, fingerprint) is not None,
            "the report to be stored",
            second,
            tmp_path / "worker2.log",
            300,
        )
        wait_for(
            lambda: ReportRefresh.objects.get(pk=refresh.pk).worker == "",
            "the build to end",
            second,
            tmp_path / "worker2.log",
        )
    finally:
        stop(second)
    refresh.refresh_from_db()
    assert (refresh.attempts, refresh.error) == (0, "")
