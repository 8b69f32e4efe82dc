"""Run jobs in real threads that start at the same moment (concurrency tests of assignments and invites)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connections


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
