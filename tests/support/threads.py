"""Run jobs in real threads that start at the same moment (concurrency tests of assignments and invites)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import connections

from annotation.workbench.services import ClaimContention

T = TypeVar("T")


def run_in_threads(jobs: list[Callable[[], object]]) -> list[object]:
    """Start every job at the same moment in its own thread; return results, re-raise the first error."""
    barrier = threading.Barrier(len(jobs))
    results: list[object] = [None] * len(jobs)
    errors: list[BaseException] = []

    def run(index: int, job: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = job()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()  # this thread's own connections

    threads = [threading.Thread(target=run, args=(index, job)) for index, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


#: Consecutive "try again" answers a simulated client takes before a test calls it a failure.
CLIENT_RETRIES = 20


def as_a_client(
    call: Callable[..., T], /, *args: Any, on_contention: Callable[[], None] | None = None, **kwargs: Any
) -> T:
    """`call(*args, **kwargs)` (a claim or an answer) as a client makes it: a ClaimContention (the API's 503 with
    Retry-After, "send it again") is asked again after a short pause, as the workbench does.

    Why: with many threads on a slow, loaded machine a claim can lose CLAIM_ATTEMPTS races in a row;
    the service then says so rather than wait, and that answer is part of its contract, not a failure.
    `on_contention` is called on each one (for tests that count them)."""
    for _ in range(CLIENT_RETRIES):
        try:
            return call(*args, **kwargs)
        except ClaimContention:
            if on_contention is not None:
                on_contention()
            time.sleep(random.uniform(0.005, 0.02))
    raise AssertionError(f"told to try again {CLIENT_RETRIES} times in a row")
