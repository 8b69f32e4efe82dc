"""`manage.py worker` on RQ starts RQ's loop again after it quits on a Redis fault (annotation/lib/worker.py).

The outage test (test_rq_redis_outage.py) stops a real Redis, but where the outage meets RQ's loop
is up to timing: inside its dequeue RQ retries on its own, elsewhere its loop quits and ours takes
over. These tests drive our restart loop through both ways RQ's loop can end on a fault, with a
stand-in for RQ's worker, so that path is tested on every run.
"""

from __future__ import annotations

import logging
from typing import Any

import django_rq
import django_rq.utils
import pytest
import redis

from annotation.lib import worker as worker_lib
from annotation.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db


class StandInWorker:
    """What run_rq_worker uses of RQ's worker; `work` ends the way `outcome` says."""

    def __init__(self, name: str, outcome: str, events: list[str]) -> None:
        self.name, self.outcome, self.events = name, outcome, events
        self.horse_pid = 0
        self._stop_requested = False

    def work(self, **kwargs: Any) -> bool:
        self.events.append(f"work {self.outcome}")
        if self.outcome == "teardown fault":  # the loop quit, and its teardown met Redis gone
            raise redis.exceptions.ConnectionError("Connection refused")
        if self.outcome == "stop":
            self._stop_requested = True
        return False  # "quit": the loop broke out on an error it logged

    def wait_for_redis(self) -> None:
        self.events.append("wait for redis")


def _run(monkeypatch, outcomes: list[str], **options: Any) -> tuple[list[str], list[str]]:
    """run_rq_worker with RQ's worker standing in, one outcome per run of its loop: (events, workers' names)."""
    events: list[str] = []
    names: list[str] = []

    def get_worker(*queues: str, name: str, **kwargs: Any) -> StandInWorker:
        names.append(name)
        assert WorkerHeartbeat.objects.filter(pk=name).exists(), "each run is registered under its own name"
        return StandInWorker(name, outcomes[len(names) - 1], events)

    monkeypatch.setattr(django_rq, "get_worker", get_worker)
    # It closes this process's connections before RQ forks; here that would close the test's own.
    monkeypatch.setattr(django_rq.utils, "reset_db_connections", lambda: None)
    backend = type("Backend", (), {"queues": ["default"]})()
    settings = {"queue_names": ["default"], "burst": False, "max_jobs": None, "name": "restart", "verbosity": 0}
    worker_lib.run_rq_worker(backend, **{**settings, **options})
    return events, names


def test_a_loop_that_quits_on_a_redis_fault_waits_for_redis_and_runs_again_under_a_new_name(monkeypatch, caplog):
    with caplog.at_level(logging.WARNING, logger=worker_lib.logger.name):
        events, names = _run(monkeypatch, ["teardown fault", "quit", "stop"])
    assert events == [
        "work teardown fault",
        "wait for redis",
        "work quit",
        "wait for redis",
        "work stop",
    ]
    assert len(set(names)) == 3 and all(name.startswith("restart") for name in names)
    assert "Redis is away" in caplog.text and "starting it again" in caplog.text
    assert not WorkerHeartbeat.objects.filter(pk__in=names).exists(), "every run leaves the registry"


@pytest.mark.parametrize("options", [{"burst": True}, {"max_jobs": 3}])
def test_a_loop_that_ends_on_its_own_in_burst_or_after_max_jobs_is_not_started_again(monkeypatch, options):
    events, names = _run(monkeypatch, ["quit", "quit"], **options)
    assert events == ["work quit"] and len(names) == 1
