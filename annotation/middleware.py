"""Database faults that pass answer 503 with Retry-After, never a 500.

A long write (a big CLI import on SQLite) can hold the write lock past the busy timeout;
a PostgreSQL failover or ``pg_terminate_backend`` cuts a request's connection
(AdminShutdown); a serialisation failure, a deadlock that exhausted its retries or a
read-only replica refuses a write. Nothing was saved (the transaction rolled back), so the
honest answer is "try again shortly", which clients and the annotate page's script act on
(`annotation.lib.dblocks.fault_response`: the API's error shape under /api/, a plain page
elsewhere; a lost connection is closed so the next request reconnects). Faults raised
outside a view (in a middleware) reach handler500, which answers the same
(`annotation.lib.api_errors.server_error`).

An annotator's claim and answer are not left at that: they are repeat-safe, so they are run again
whole for a while first (`RepeatAfterDatabaseFaultMiddleware`), and the annotator gets an answer.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve

from annotation.lib.dblocks import BUSY, CONFLICT, UNAVAILABLE, fault_response, is_repeat_safe

logger = logging.getLogger(__name__)

#: The faults worth waiting out inside the request: a lock, a lost connection, a collision. A
#: read-only server or an absent file store does not come back in seconds.
REPEATED_FAULTS = (BUSY, UNAVAILABLE, CONFLICT)
#: Pause between two runs of a request (a lost connection fails fast while the server restarts).
REPEAT_PAUSE_SECONDS = 0.25


class RepeatAfterDatabaseFaultMiddleware:
    """Run a repeat-safe request (dblocks.repeat_safe: an annotator's claim and answer) again whole after a
    passing database fault, for up to settings.DB_FAULT_RETRY_SECONDS, before answering the 503.

    Why whole, and here: a database restart or a lock held past the busy timeout can meet the
    request anywhere, in its session or token lookup, its access check or its service, and the
    services retry only their own transaction (workbench.services._reconnecting). Every step of
    these requests is repeat-safe, so running it again from the top gives the annotator an answer
    instead of a 503 to send again (issue 31's fault matrix: 0 x 5xx while PostgreSQL restarts or
    SQLite's write lock is held 30 s). It sits outside the session and authentication middleware,
    whose faults reach it as handler500's 503 (api_errors.server_error), marked like a view's
    (`passing_fault`). Other requests, and uploads, are never run twice.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        budget = float(settings.DB_FAULT_RETRY_SECONDS)
        if budget <= 0 or not _is_repeat_safe(request) or not _body_kept(request):
            return self.get_response(request)
        started = time.monotonic()
        attempt = 1
        while True:
            response = self.get_response(request)
            fault = getattr(response, "passing_fault", None)
            if fault not in REPEATED_FAULTS or time.monotonic() - started >= budget:
                return response
            logger.warning("%s %s met %s (run %d); running it again", request.method, request.path, fault, attempt)
            time.sleep(REPEAT_PAUSE_SECONDS)
            _rewind(request)
            attempt += 1


def _is_repeat_safe(request: HttpRequest) -> bool:
    try:
        return is_repeat_safe(resolve(request.path_info).func)
    except Resolver404:
        return False


def _body_kept(request: HttpRequest) -> bool:
    """Read the body once into memory (HttpRequest.body keeps it), so a second run parses the same bytes;
    False when it cannot be kept (too large for DATA_UPLOAD_MAX_MEMORY_SIZE: let the view refuse it)."""
    try:
        request.body  # noqa: B018  (read for its side effect: request._body)
    except Exception:
        return False
    return True


def _rewind(request: HttpRequest) -> None:
    """Let the next run read the body from its start. HttpRequest.body replaced the stream by a BytesIO of
    the body; the run before read it to the end (a parsed form stays cached in request._post)."""
    request._stream = io.BytesIO(request.body)
    request._read_started = False  # type: ignore[attr-defined]


class DatabaseBusyMiddleware:
    """Turn a passing database fault raised by a view into 503 + Retry-After (`dblocks.database_fault`)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        response = fault_response(request, exception)
        if response is not None:
            logger.warning("database fault on %s %s: %r", request.method, request.path, exception)
        return response
