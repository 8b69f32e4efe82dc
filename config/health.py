"""Probes for load balancers and orchestrators: `/healthz` (the process answers) and `/readyz` (it can serve).

Answered by the first middleware, before SecurityMiddleware and host
validation: a load balancer probes over plain HTTP with an internal address
in the Host header, and must get the probe's answer, not an HTTPS redirect
or a 400. Unauthenticated, so they reveal nothing but the names of the
checks and whether each passed; the reason a check failed goes to the log.
"""

from __future__ import annotations

import importlib
import logging
import uuid
from collections.abc import Callable

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger(__name__)

_migrations_applied = False  # once true it stays true for the life of the process


def database() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone() == (1,)


def migrations() -> bool:
    """Every migration of the code is applied (a host started before `migrate` ran is not ready)."""
    global _migrations_applied
    if not _migrations_applied:
        executor = MigrationExecutor(connection)
        _migrations_applied = not executor.migration_plan(executor.loader.graph.leaf_nodes())
    return _migrations_applied


def queue() -> bool:
    """The task queue answers: the database backend's table is readable; an RQ backend's Redis answers
    a PING on each queue's connection (django-rq's RQ_QUEUES); other backends have nothing to reach."""
    backend = str(settings.TASKS["default"]["BACKEND"])
    if "django_tasks_db" in backend:
        from django_tasks_db.models import DBTaskResult

        DBTaskResult.objects.only("pk").first()
        return True
    if "rq" in backend.lower():
        django_rq = importlib.import_module("django_rq")  # installed with the RQ backend only
        queues = settings.TASKS["default"].get("QUEUES") or ["default"]
        return all(django_rq.get_connection(name).ping() for name in queues)
    return True


def storage() -> bool:
    """Uploads and exports can be stored: a tiny probe file is written to the file storage and deleted
    (annotation/lib/storage.py: this host's VAR_DIR, or the shared bucket: reachable, credentials good)."""
    from annotation.lib.storage import files

    store = files()
    name = store.save(f"probes/readyz-{uuid.uuid4().hex}", ContentFile(b"ok"))
    store.delete(name)
    return True


CHECKS: dict[str, Callable[[], bool]] = {
    "database": database,
    "migrations": migrations,
    "queue": queue,
    "storage": storage,
}


def _passes(name: str, check: Callable[[], bool]) -> bool:
    try:
        return bool(check())
    except Exception:  # a probe reports, it never raises
        logger.warning("readiness check %s failed", name, exc_info=True)
        return False


def healthz() -> HttpResponse:
    return JsonResponse({"status": "ok"})


def readyz() -> HttpResponse:
    results = {name: _passes(name, check) for name, check in CHECKS.items()}
    ready = all(results.values())
    body = {
        "status": "ready" if ready else "not ready",
        "checks": {n: "ok" if ok else "failed" for n, ok in results.items()},
    }
    return JsonResponse(body, status=200 if ready else 503)


PROBES: dict[str, Callable[[], HttpResponse]] = {"/healthz": healthz, "/readyz": readyz}


class HealthProbeMiddleware:
    """Answers GET/HEAD /healthz and /readyz itself; every other request goes on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = PROBES.get(request.path_info)
        if probe is None or request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        response = probe()
        response["Cache-Control"] = "no-store"
        return response
