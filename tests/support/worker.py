"""A real `manage.py worker` process against the test database, for the kill-and-resume tests.

Both background-work kinds (verifier runs, import jobs) are tested the same way,
on both task backends (database, RQ): start a worker, SIGKILL it mid-job,
recover, let another finish. The helpers live
here so those tests start, wait for and stop workers identically.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from annotation.models import WorkerHeartbeat, this_host

REPO = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """The URL of the database this test uses, for the worker processes."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    auth = settings["USER"] + (f":{settings['PASSWORD']}" if settings.get("PASSWORD") else "")
    return f"postgres://{auth}@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/{settings['NAME']}"


def start_db_worker(
    log: Path, env: dict[str, str], *, interval: str | None = "0.1", hold: str | None = None
) -> subprocess.Popen:
    """A `worker` on the test database in its own process group (so `stop` ends all of it);
    `env` adds to the test settings (var dir, chunk sizes, endpoints...); `interval` None: its default.
    `hold` ("import" or "export", tests/support/held_worker.py): the worker stops dead at that point
    of its job and writes `held_mark(log)`."""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": database_url(),
        **env,
    }
    entry = ["manage.py"]
    if hold is not None:
        from tests.support.held_worker import HOLD_ENV, MARK_ENV

        environment.update({HOLD_ENV: hold, MARK_ENV: str(held_mark(log))})
        entry = ["-m", "tests.support.held_worker"]
    return subprocess.Popen(
        [
            sys.executable,
            *entry,
            "worker",
            "--no-reload",
            "--no-startup-delay",
            *(["--interval", interval] if interval is not None else []),
        ],
        cwd=REPO,
        env=environment,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def start_rq_worker(log: Path, redis_url: str, env: dict[str, str], *, hold: str | None = None) -> subprocess.Popen:
    """The same `manage.py worker` with the RQ backend on `redis_url`: it runs an RQ worker."""
    from tests.support.redis_server import rq_environment

    return start_db_worker(log, {**rq_environment(redis_url), **env}, hold=hold)


def held_mark(log: Path) -> Path:
    """The file a held worker (start_db_worker's `hold`) writes when it has stopped at its point."""
    return log.with_suffix(".held")


def is_held(log: Path) -> bool:
    """Whether the worker logging to `log` has stopped at its hold point."""
    return held_mark(log).exists()


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped) on this host."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def registered(
    worker_id: str, *, host: str | None = None, pid: int | None = None, seen_ago: float = 0.0, **fields: Any
) -> WorkerHeartbeat:
    """A worker's registry row (this host and process unless told), last seen `seen_ago` seconds ago."""
    now = timezone.now()
    return WorkerHeartbeat.objects.create(
        pk=worker_id,
        host=this_host() if host is None else host,
        pid=os.getpid() if pid is None else pid,
        started_at=fields.get("started_at", now - timedelta(seconds=seen_ago)),
        last_seen=now - timedelta(seconds=seen_ago),
    )


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc), children first."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


def kill(worker: subprocess.Popen) -> None:
    """SIGKILL the worker and everything it started, as an OOM kill or a lost host would.

    Its process group is not enough for RQ: the work horse an RQ worker forks
    for each task starts a session of its own, and would finish the task.
    """
    for pid in descendants(worker.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(15)


def wait_for(
    condition: Callable[[], bool], what: str, worker: subprocess.Popen, log: Path, timeout: float = 90.0
) -> None:
    """Poll until ``condition()``; a generous deadline so a slow machine fails loudly, not flakily."""
    deadline = time.monotonic() + timeout
    while not condition():
        if worker.poll() is not None:
            pytest.fail(f"the worker exited ({worker.returncode}) before {what}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)


def stop(worker: subprocess.Popen) -> None:
    """End the worker's process group: SIGTERM, then SIGKILL if it does not go."""
    if worker.poll() is None:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(15)
