"""Request ids (issue 16 §3): one id per request, on its response, in every log line it causes,
and in the log lines of the background tasks it queued.

The id comes from the load balancer's ``X-Request-ID`` when that is a sane token (else one is
made here), so one id follows a request from the proxy's log to the app's and the worker's.
It lives in a context variable: ``RequestIdFilter`` (on the log handler, config/settings.py)
copies it onto every record, so the JSON formatter writes a ``request_id`` field; ``enqueue``
passes it to a task as its ``request_id`` argument, and the task runs inside ``task_context``,
which sets it again in the worker.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django_tasks.base import Task, TaskResult

HEADER = "X-Request-ID"
# What a proxy may hand us: letters, digits and a few separators, at most 128 characters. Anything
# else (newlines that would forge log lines, kilobytes of junk) is replaced by an id of our own.
SANE = re.compile(r"[A-Za-z0-9._:+/=-]{1,128}")

_current: ContextVar[str | None] = ContextVar("claimlab_request_id", default=None)
access_log = logging.getLogger("claimlab.access")
task_log = logging.getLogger("claimlab.tasks")


def current() -> str | None:
    """The id of the request (or task) this code runs for; None outside both."""
    return _current.get()


def new_id() -> str:
    return uuid.uuid4().hex


def accepted(header: str | None) -> str:
    """The proxy's id when it is a sane token, else a new one."""
    return header if header is not None and SANE.fullmatch(header) else new_id()


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to every record made while a request or task runs (never refuses a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = _current.get()
        if request_id is not None and not hasattr(record, "request_id"):
            record.request_id = request_id
        return True


@contextmanager
def bound(request_id: str) -> Iterator[str]:
    """Run the body with `request_id` as the current id."""
    token = _current.set(request_id)
    try:
        yield request_id
    finally:
        _current.reset(token)


class RequestIdMiddleware:
    """Gives each request an id (header in, header out) and writes one access log line for it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        request_id = accepted(request.headers.get(HEADER))
        started = time.monotonic()
        with bound(request_id):
            response = self.get_response(request)
            response[HEADER] = request_id
            ms = round((time.monotonic() - started) * 1000, 1)
            user = getattr(request, "user", None)
            user_id = user.pk if user is not None and user.is_authenticated else None
            path = loggable_path(request)
            access_log.info(
                "%s %s %s %.0f ms",
                request.method,
                path,
                response.status_code,
                ms,
                extra={
                    "method": request.method,
                    "path": path,
                    "status": response.status_code,
                    "ms": ms,
                    "user_id": user_id,
                },
            )
        return response


def loggable_path(request: HttpRequest) -> str:
    """The path with bearer secrets in it (invite and participant links: a `token` URL argument) masked."""
    path = request.path
    match = request.resolver_match
    for name, value in match.kwargs.items() if match is not None else ():
        if "token" in name and isinstance(value, str) and value:
            path = path.replace(value, "[token]")
    return path


def enqueue(task: Task[..., Any], *args: Any) -> TaskResult[Any]:
    """Queue `task(*args)` carrying the current request id (its `request_id` argument)."""
    return task.enqueue(*args, request_id=current() or "")


@contextmanager
def task_context(name: str, request_id: str) -> Iterator[str]:
    """Run a task's body under the id of the request that queued it (or a new one when it came from a
    command), with a log line when it starts and ends, so the worker's log joins the request's."""
    with bound(request_id if SANE.fullmatch(request_id or "") else new_id()) as bound_id:
        task_log.info("task %s started", name, extra={"task": name})
        started = time.monotonic()
        try:
            yield bound_id
        finally:
            seconds = round(time.monotonic() - started, 3)
            task_log.info("task %s ended after %.1f s", name, seconds, extra={"task": name, "seconds": seconds})
