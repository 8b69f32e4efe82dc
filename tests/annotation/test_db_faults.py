"""Every passing database fault answers 503 with Retry-After, never a 500 (issue 31, finding 3).

Lost connections, an administrator's shutdown of the backend (a failover, ``pg_terminate_backend``:
psycopg's AdminShutdown), serialisation failures, deadlocks that exhausted their retries and a
read-only replica: on the annotating API (`next`, `submit`) in the API's error shape, and on the
pages as a plain 503 page; the request after it succeeds. The faults are raised where production
meets them (inside the assignment service, as Django wraps psycopg's errors), and on PostgreSQL
for real: the test's own backend is terminated from a second connection.
"""

from __future__ import annotations

import psycopg
import psycopg.errors
import pytest
from django.db import InterfaceError, InternalError, OperationalError, ProgrammingError, connection
from django.test import Client
from django.urls import reverse

from annotation.lib.dblocks import database_fault
from annotation.models import Annotation, Assignment
from annotation.workbench import services as assignments
from annotation.workbench import views  # imported before any test patches the services it imports names from
from tests.annotation.workbench.test_workbench_pages import pref_answer
from tests.support.assignment_study import make_study


def wrapped(django_error: type[Exception], cause: Exception) -> Exception:
    """A psycopg error as Django raises it: its own class, the driver's error as the cause."""
    error = django_error(str(cause))
    error.__cause__ = cause
    return error


FAULTS = {
    "admin_shutdown": (
        wrapped(OperationalError, psycopg.errors.AdminShutdown("terminating connection due to administrator command")),
        "database_unavailable",
    ),
    "connection_lost": (
        wrapped(OperationalError, psycopg.OperationalError("consuming input failed: server closed the connection")),
        "database_unavailable",
    ),
    "connection_closed": (InterfaceError("connection already closed"), "database_unavailable"),
    "serialization_failure": (
        wrapped(OperationalError, psycopg.errors.SerializationFailure("could not serialize access")),
        "database_conflict",
    ),
    "deadlock": (wrapped(OperationalError, psycopg.errors.DeadlockDetected("deadlock detected")), "database_busy"),
    "read_only": (
        wrapped(
            InternalError, psycopg.errors.ReadOnlySqlTransaction("cannot execute UPDATE in a read-only transaction")
        ),
        "database_read_only",
    ),
    "sqlite_read_only": (OperationalError("attempt to write a readonly database"), "database_read_only"),
}


def raising(exc: Exception):
    def fail(*args, **kwargs):
        raise exc

    return fail


@pytest.fixture(autouse=True)
def retry_after(settings):
    settings.DB_BUSY_RETRY_AFTER_SECONDS = 7
    # The 503 a request answers once it is not run again (test_db_fault_repeat.py: the runs before it).
    settings.DB_FAULT_RETRY_SECONDS = 0


def assert_503(response, code: str | None = None) -> None:
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "7"
    if code is not None:
        body = response.json()
        assert body["code"] == code and "nothing was saved" in body["detail"]


@pytest.mark.django_db
@pytest.mark.parametrize("fault", FAULTS)
def test_api_next_and_submit_answer_503_and_the_next_request_succeeds(client, monkeypatch, fault):
    exc, code = FAULTS[fault]
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    next_url = reverse("api-assignment-next", args=[study.slug])
    monkeypatch.setattr(assignments, "claim_next", raising(exc))
    assert_503(client.post(next_url), code)
    monkeypatch.undo()
    claimed = client.post(next_url)
    assert claimed.status_code == 200
    submit_url = reverse("api-assignment-submit", args=[claimed.json()["assignment"]["id"]])
    monkeypatch.setattr(assignments, "submit_with_progress", raising(exc))
    assert_503(client.post(submit_url, {"choice": "tie"}, content_type="application/json"), code)
    monkeypatch.undo()
    assert client.post(submit_url, {"choice": "tie"}, content_type="application/json").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("fault", FAULTS)
def test_pages_answer_a_503_page_and_the_next_request_succeeds(client, monkeypatch, fault):
    exc, _ = FAULTS[fault]
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    page = reverse("annotation:annotate", args=[study.slug])
    monkeypatch.setattr(views, "claim_next", raising(exc))
    response = client.get(page)
    assert_503(response)
    assert response["Content-Type"].startswith("text/html") and b"nothing was saved" in response.content
    monkeypatch.undo()
    assert client.get(page).status_code == 200
    assignment = Assignment.objects.get()
    monkeypatch.setattr(views, "submit", raising(exc))
    assert_503(client.post(reverse("annotation:annotate_submit", args=[study.slug, assignment.pk]), pref_answer()))


@pytest.mark.django_db
def test_a_deadlock_on_every_retry_is_a_503(client, monkeypatch):
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    deadlock = FAULTS["deadlock"][0]
    monkeypatch.setattr(assignments, "_claim_alone", lambda *args: None)
    monkeypatch.setattr(assignments, "_claim", raising(deadlock))
    monkeypatch.setattr(assignments.time, "sleep", lambda seconds: None)
    response = client.post(reverse("api-assignment-next", args=[study.slug]))
    assert response.status_code == 503 and response["Retry-After"] and response.json()["detail"]


@pytest.mark.django_db
def test_programming_errors_stay_500(client, monkeypatch):
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    monkeypatch.setattr(assignments, "claim_next", raising(OperationalError("no such table: annotation_item")))
    with pytest.raises(OperationalError):
        client.post(reverse("api-assignment-next", args=[study.slug]))
    assert database_fault(wrapped(ProgrammingError, psycopg.errors.UndefinedTable("no such table"))) is None
    assert database_fault(RuntimeError("database is locked")) is None


def terminate_own_backend() -> None:
    """Terminate this test's PostgreSQL backend from a second connection, as a failover or an operator would."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    settings_dict = connection.settings_dict
    params = {"dbname": settings_dict["NAME"], "user": settings_dict["USER"], "host": settings_dict["HOST"]}
    params |= {"port": settings_dict["PORT"], "password": settings_dict["PASSWORD"]}
    with psycopg.connect(**{k: v for k, v in params.items() if v}, autocommit=True) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("route", ["next", "submit", "page"])
def test_a_terminated_postgresql_backend_is_a_503_and_the_next_request_reconnects(route):
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's")
    client = Client(raise_request_exception=False)  # a fault outside the view must answer 503 too
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    next_url = reverse("api-assignment-next", args=[study.slug])
    if route == "next":
        request = lambda: client.post(next_url)  # noqa: E731
    elif route == "submit":
        submit_url = reverse("api-assignment-submit", args=[client.post(next_url).json()["assignment"]["id"]])
        request = lambda: client.post(submit_url, {"choice": "tie"}, content_type="application/json")  # noqa: E731
    else:
        page = reverse("annotation:annotate", args=[study.slug])
        request = lambda: client.get(page)  # noqa: E731
    terminate_own_backend()
    failed = request()
    assert_503(failed, None if route == "page" else "database_unavailable")
    assert request().status_code == 200


def _cut_once(real):
    """`real`, but its first call loses the connection as a database restart would: on PostgreSQL the
    backend is really terminated mid-transaction; on SQLite its file is away for a moment."""
    calls = {"n": 0}

    def cut(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            if connection.vendor == "postgresql":
                terminate_own_backend()
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1")  # the cut connection fails here
            raise OperationalError("unable to open database file")
        return real(*args, **kwargs)

    return cut, calls


@pytest.mark.django_db(transaction=True)  # the connection is really cut: no test transaction around it
@pytest.mark.parametrize("route", ["next", "submit"])
def test_a_claim_or_answer_cut_off_by_a_database_restart_is_run_again_and_answers_200(route, monkeypatch):
    """The fault matrix's postgres row: the requests in flight when the server restarts were 503s. The
    claim and the answer are repeat-safe, so the service runs them again on a new connection: 200, the
    label stored once."""
    client = Client(raise_request_exception=False)
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    next_url = reverse("api-assignment-next", args=[study.slug])
    if route == "next":
        first_claim = "_claim_alone" if connection.vendor == "postgresql" else "_claim"  # PostgreSQL's fast path
        cut, calls = _cut_once(getattr(assignments, first_claim))
        monkeypatch.setattr(assignments, first_claim, cut)
        response = client.post(next_url)
        assert response.status_code == 200, response.content
        assert Assignment.objects.filter(annotator=a1, status="active").count() == 1
    else:
        assignment_id = client.post(next_url).json()["assignment"]["id"]
        cut, calls = _cut_once(assignments._submit_once)
        monkeypatch.setattr(assignments, "_submit_in_one_statement", lambda given, with_progress: None)
        monkeypatch.setattr(assignments, "_submit_once", cut)
        response = client.post(
            reverse("api-assignment-submit", args=[assignment_id]), {"choice": "tie"}, content_type="application/json"
        )
        assert response.status_code == 200, response.content
        assert Assignment.objects.get(pk=assignment_id).status == "submitted"
        assert Annotation.objects.filter(assignment_id=assignment_id).count() == 1
    assert calls["n"] == 2
