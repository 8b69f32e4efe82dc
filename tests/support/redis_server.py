"""A throwaway redis-server on a free loopback port (Debian's `redis-server` package), for the cache tests."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from .s3 import free_port

REDIS_SERVER = "/usr/bin/redis-server"


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """Start redis-server without persistence; its URL. Stopped (and waited for) on leaving."""
    port = free_port()
    process = subprocess.Popen(
        [
            REDIS_SERVER,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if redis.Redis.from_url(url).ping():
                    break
            except redis.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(15)
