"""/healthz and /readyz for load balancers (issue 16, §3): unauthenticated, plain HTTP, any Host, nothing revealed."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import redis
from django.db import OperationalError

from config import health
from tests.support.redis_server import redis_server

pytestmark = pytest.mark.django_db


@pytest.fixture
def production_like(settings, tmp_path):
    """What a probe meets in production: HTTPS redirects on and a host list without the probe's address."""
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["claimlab.example.org"]
    settings.VAR_DIR = tmp_path


def test_healthz_answers_over_http_with_an_internal_host_and_no_login(client, production_like):
    response = client.get("/healthz", HTTP_HOST="10.0.3.7:8000")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"
    # the same request to a page is redirected to HTTPS (the probe path is the exception)
    assert client.get("/accounts/login/", HTTP_HOST="claimlab.example.org").status_code == 301


def test_readyz_lists_its_checks_when_ready(client, production_like):
    response = client.get("/readyz", HTTP_HOST="10.0.3.7")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ready",
        "checks": {"database": "ok", "migrations": "ok", "queue": "ok", "storage": "ok"},
    }


def test_readyz_is_503_naming_only_the_failed_check(client, production_like, monkeypatch, caplog):
    def unreachable() -> bool:
        raise OperationalError("could not connect to server at 10.0.0.5:5432 password=hunter2")

    monkeypatch.setitem(health.CHECKS, "database", unreachable)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "failed", "migrations": "ok", "queue": "ok", "storage": "ok"}
    assert b"10.0.0.5" not in response.content and b"hunter2" not in response.content
    assert "readiness check database failed" in caplog.text  # the reason is in the log


def test_readyz_is_503_while_migrations_are_pending(client, production_like, monkeypatch):
    class Pending:
        def __init__(self, connection) -> None:
            self.loader = type("Loader", (), {"graph": type("Graph", (), {"leaf_nodes": lambda self: []})()})()

        def migration_plan(self, targets):
            return [("annotation", "9999_not_yet")]

    monkeypatch.setattr(health, "_migrations_applied", False)
    monkeypatch.setattr(health, "MigrationExecutor", Pending)
    response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["checks"]["migrations"] == "failed"


def test_readyz_is_503_when_files_cannot_be_stored(client, production_like, settings, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    settings.VAR_DIR = tmp_path / "a-file" / "var"
    response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["checks"]["storage"] == "failed"


def test_other_methods_and_paths_pass_through(client, production_like):
    assert client.post("/healthz", HTTP_HOST="claimlab.example.org", secure=True).status_code != 200
    assert client.get("/healthz/", HTTP_HOST="claimlab.example.org", secure=True).status_code == 404


@pytest.mark.slow
def test_readyz_pings_the_redis_of_an_rq_task_queue(client, production_like, settings, monkeypatch, tmp_path):
    """With an RQ backend the queue check is a PING on each queue's Redis (django-rq's connection, stubbed
    here to this test's redis-server)."""
    (tmp_path / "redis").mkdir()
    settings.TASKS = {"default": {"BACKEND": "django_tasks_rq.RQBackend", "QUEUES": ["default"]}}
    with redis_server(tmp_path / "redis") as url:
        monkeypatch.setitem(
            sys.modules, "django_rq", SimpleNamespace(get_connection=lambda name: redis.Redis.from_url(url))
        )
        assert client.get("/readyz").json()["checks"]["queue"] == "ok"
    response = client.get("/readyz")  # the Redis server is gone
    assert response.status_code == 503 and response.json()["checks"]["queue"] == "failed"
