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
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from annotation.lib.dblocks import fault_response

logger = logging.getLogger(__name__)


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
