"""A private Redis for the tests of the RQ backend and the shared limiter.

Each test process starts its own `redis-server` (no disk, a free port on
127.0.0.1): suites run side by side (pytest-xdist, other checkouts) never share
a queue, and CI needs no Redis service of its own, only Debian's redis-server
package. ``rq_backend`` switches this process's settings to the RQ backend on it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

QUEUE_TIMEOUT = 180  # RQ's per-task timeout in these tests: a big import takes seconds; a hung horse fails in minutes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def redis_server(folder: Path | None = None, port: int | None = None) -> Iterator[str]:
    """A fresh redis-server for the block (on `port` if given); yields its URL.

    With `folder` it works there and keeps its data in an append-only file: a server started
    again on the same folder and port is the same Redis back from a restart."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (Debian: apt-get install redis-server); the RQ tests need it")
    port = free_port() if port is None else port
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        + (["--dir", str(folder), "--appendonly", "yes"] if folder is not None else ["--appendonly", "no"]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"redis-server on port {port} did not start (exit code {process.poll()})")
                time.sleep(0.02)
        client.close()
        yield url
    finally:
        process.terminate()
        process.wait(15)


def rq_backend(settings: Any, url: str) -> None:
    """Point this process's task backend (pytest-django's `settings`) at RQ on `url`, as the environment would."""
    settings.REDIS_URL = url
    settings.RQ_QUEUES = {name: {"URL": url, "DEFAULT_TIMEOUT": QUEUE_TIMEOUT} for name in ("default",)}
    settings.TASKS = {"default": {"BACKEND": "django_tasks_rq.RQBackend", "QUEUES": ["default"]}}


def rq_environment(url: str) -> dict[str, str]:
    """The environment that makes a `manage.py` process use the RQ backend on `url`."""
    return {"TASKS_BACKEND": "django_tasks_rq.RQBackend", "REDIS_URL": url, "RQ_JOB_TIMEOUT": str(QUEUE_TIMEOUT)}
