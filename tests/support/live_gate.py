"""A gate in front of the live test server, so no request of a finished browser test touches the next one's database.

Why: a browser context that closes sends what its pages send on the way out (the
workbench gives its item fetched ahead back with a beacon on ``pagehide``), and
Playwright's routes do not see those requests. One that reaches the live server
while the test's database is flushed deadlocks PostgreSQL's TRUNCATE (and on SQLite
it writes into the next test). The browser fixtures close the gate once their contexts
are closed and wait for the requests still inside to end; requests arriving later get
a 503 without reaching a view or the database. The next browser context opens it again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

_lock = threading.Condition()
_inside = 0
_closed = False


class LiveServerGate:
    """Middleware (first in the test settings): counts the requests inside; refuses them while closed."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        global _inside
        with _lock:
            if _closed:
                return HttpResponse("the test that sent this request is over", status=503)
            _inside += 1
        try:
            return self.get_response(request)
        finally:
            with _lock:
                _inside -= 1
                _lock.notify_all()


def open_gate() -> None:
    """Let requests in (a browser context of a new test is about to be made)."""
    global _closed
    with _lock:
        _closed = False


def close_and_drain(timeout: float = 10.0) -> int:
    """Refuse new requests and wait (up to `timeout` s) for those inside to end; returns how many are still inside."""
    global _closed
    deadline = time.monotonic() + timeout
    with _lock:
        _closed = True
        while _inside and time.monotonic() < deadline:
            _lock.wait(deadline - time.monotonic())
        return _inside
