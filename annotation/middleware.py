"""Lock contention answers 503 with Retry-After, never a 500.

A long write (a big CLI import on SQLite) can hold the write lock past the
busy timeout; an annotator's `next` or `submit` that waited for it then fails
with "database is locked". Nothing was saved (the transaction rolled back), so
the honest answer is "busy, try again shortly", which clients and the annotate
page's script can act on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from annotation.lib.dblocks import is_lock_error

logger = logging.getLogger(__name__)

MESSAGE = "The database is busy with another write (for example a large import); nothing was saved. Try again shortly."


class DatabaseBusyMiddleware:
    """Turn a lock-contention OperationalError raised by a view into 503 + Retry-After."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_lock_error(exception):
            return None
        logger.warning("database busy on %s %s: %s", request.method, request.path, exception)
        retry_after = str(settings.DB_BUSY_RETRY_AFTER_SECONDS)
        response: HttpResponse
        if request.path.startswith("/api/") or "json" in request.headers.get("Accept", ""):
            response = JsonResponse({"detail": MESSAGE, "code": "database_busy"}, status=503)
        else:
            response = HttpResponse(MESSAGE, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = retry_after
        return response
