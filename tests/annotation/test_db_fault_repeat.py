"""An annotator's claim or answer that meets a passing database fault is run again whole (issue 31's fault matrix).

A PostgreSQL restart can cut a request anywhere (its token or session lookup, its access check,
its service), and SQLite's write lock can be held past the busy timeout; the workbench's services
retry only their own transaction. The claim and the answer are repeat-safe, so the middleware
(annotation.middleware.RepeatAfterDatabaseFaultMiddleware) runs them again from the top while
settings.DB_FAULT_RETRY_SECONDS lasts: the annotator gets a 200, the label is stored once with the
answer that was sent, and what is not repeat-safe (a skip) still answers the 503 at once. The faults
are raised at the database layer (Django's execute wrapper), so they hit the request's first query
whichever it is; and for real: SQLite's write lock held by another connection, a PostgreSQL backend
terminated before the request.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import psycopg.errors
import pytest
from django.db import OperationalError, connection
from django.test import Client
from django.urls import reverse

from annotation import middleware
from annotation.models import Annotation, Assignment
from tests.annotation.test_db_faults import terminate_own_backend, wrapped
from tests.annotation.workbench.test_workbench_pages import pref_answer
from tests.support.assignment_study import make_study

FAULTS = {
    "lock": OperationalError("database is locked"),
    "admin_shutdown": wrapped(
        OperationalError, psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    ),
    "serialization_failure": wrapped(
        OperationalError, psycopg.errors.SerializationFailure("could not serialize access")
    ),
}


class FirstQueriesFail:
    """An execute wrapper: the next `times` queries raise `exc` (one per run of the request: its first query)."""

    def __init__(self, exc: Exception, times: int) -> None:
        self.exc, self.left, self.raised = exc, times, 0

    def __call__(self, execute, sql, params, many, context):
        if self.left > 0:
            self.left -= 1
            self.raised += 1
            raise self.exc
        return execute(sql, params, many, context)


@pytest.fixture
def pauses(monkeypatch):
    """The middleware's pauses, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr(middleware.time, "sleep", slept.append)
    return slept


@pytest.fixture(autouse=True)
def repeat_for(settings):
    settings.DB_FAULT_RETRY_SECONDS = 25
    settings.DB_BUSY_RETRY_AFTER_SECONDS = 7


def _claimed(client, study) -> int:
    response = client.post(reverse("api-assignment-next", args=[study.slug]))
    assert response.status_code == 200, response.content
    return response.json()["assignment"]["id"]


@pytest.mark.django_db
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("route", ["api-next", "api-submit", "page", "page-submit"])
def test_a_claim_or_answer_that_meets_a_fault_anywhere_is_run_again_whole(client, pauses, fault, route):
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    if route == "api-next":
        send = lambda: client.post(reverse("api-assignment-next", args=[study.slug]))  # noqa: E731
    elif route == "api-submit":
        assignment_id = _claimed(client, study)
        url = reverse("api-assignment-submit", args=[assignment_id])
        # The body is read again on the second run: the stored answer is the one sent.
        send = lambda: client.post(url, {"choice": "right_slight"}, content_type="application/json")  # noqa: E731
    elif route == "page":
        send = lambda: client.get(reverse("annotation:annotate", args=[study.slug]))  # noqa: E731
    else:
        assignment_id = _claimed(client, study)
        url = reverse("annotation:annotate_submit", args=[study.slug, assignment_id])
        send = lambda: client.post(url, pref_answer(choice="right_slight"))  # noqa: E731
    failing = FirstQueriesFail(FAULTS[fault], times=2)
    with connection.execute_wrapper(failing):
        response = send()
    assert response.status_code in (200, 302), response.content
    assert failing.raised == 2 and len(pauses) == 2  # two runs met the fault, the third answered
    assert Assignment.objects.filter(annotator=a1, status="active").count() <= 1
    if route.endswith("submit"):
        answers = Annotation.objects.filter(assignment_id=assignment_id)
        assert answers.count() == 1
        assert answers.get().choice == "right_slight"
        assert Assignment.objects.get(pk=assignment_id).status == "submitted"
    else:
        assert Assignment.objects.filter(annotator=a1).count() == 1


@pytest.mark.django_db
def test_what_is_not_repeat_safe_answers_the_503_at_once(client, pauses):
    """A skip run twice would be refused the second time (the slot is gone): it is never run again."""
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    assignment_id = _claimed(client, study)
    failing = FirstQueriesFail(FAULTS["admin_shutdown"], times=1)
    with connection.execute_wrapper(failing):
        response = client.post(reverse("api-assignment-skip", args=[assignment_id]))
    assert response.status_code == 503 and response["Retry-After"] == "7"
    assert response.json()["code"] == "database_unavailable"
    assert failing.raised == 1 and pauses == []
    assert Assignment.objects.get(pk=assignment_id).status == "active"


@pytest.mark.django_db
def test_a_fault_that_outlasts_the_budget_answers_the_503(monkeypatch, settings):
    """Runs stop once the request is DB_FAULT_RETRY_SECONDS old; the last 503 is the answer, nothing stored."""
    settings.DB_FAULT_RETRY_SECONDS = 25
    clock = {"now": 0.0, "pauses": 0}

    def pause(seconds: float) -> None:
        clock["now"] += 10
        clock["pauses"] += 1

    monkeypatch.setattr(middleware.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(middleware.time, "sleep", pause)
    client = Client(raise_request_exception=False)  # every query fails, the session's save too
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    assignment_id = _claimed(client, study)
    with connection.execute_wrapper(FirstQueriesFail(FAULTS["lock"], times=10_000)):
        response = client.post(
            reverse("api-assignment-submit", args=[assignment_id]), {"choice": "tie"}, content_type="application/json"
        )
    assert response.status_code == 503 and response.json()["code"] == "database_busy"
    assert response["Retry-After"] == "7"
    assert clock["pauses"] == 3  # runs at 0, 10, 20 and 30 s: the one at 30 s is past the 25 s, and answers
    assert not Annotation.objects.filter(assignment_id=assignment_id).exists()


@pytest.mark.django_db
def test_no_run_again_when_it_is_turned_off(client, pauses, settings):
    settings.DB_FAULT_RETRY_SECONDS = 0
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    failing = FirstQueriesFail(FAULTS["lock"], times=1)
    with connection.execute_wrapper(failing):
        response = client.post(reverse("api-assignment-next", args=[study.slug]))
    assert response.status_code == 503 and failing.raised == 1 and pauses == []


@pytest.mark.django_db(transaction=True)  # another connection takes SQLite's write lock: no test transaction
def test_sqlite_write_lock_held_past_the_busy_timeout_is_waited_out(monkeypatch):
    """The fault matrix's sqlite-lock row in small: the lock is held longer than the busy timeout (here
    0.3 s instead of 20); the claim and the answer wait it out and answer 200, not 503."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's write lock; PostgreSQL's restart is the next test")
    client = Client(raise_request_exception=False)
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    assignment_id = _claimed(client, study)
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout=300")
    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    releaser = threading.Timer(1.5, lambda: holder.execute("ROLLBACK"))
    started = time.monotonic()
    releaser.start()
    try:
        response = client.post(
            reverse("api-assignment-submit", args=[assignment_id]),
            {"choice": "left_strong", "next": True},
            content_type="application/json",
        )
    finally:
        releaser.join()
        holder.close()
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout=20000")
    assert response.status_code == 200, response.content
    assert time.monotonic() - started >= 1.4  # it did wait for the lock
    assert Annotation.objects.get(assignment_id=assignment_id).choice == "left_strong"
    assert response.json()["next"]["assignment"]["id"] != assignment_id


@pytest.mark.django_db(transaction=True)  # the connection is really cut: no test transaction around it
@pytest.mark.parametrize("route", ["next", "submit", "page"])
def test_a_postgresql_backend_terminated_before_the_request_still_gets_an_answer(route):
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's; SQLite's lock is the test before")
    client = Client(raise_request_exception=False)
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    if route == "next":
        request = lambda: client.post(reverse("api-assignment-next", args=[study.slug]))  # noqa: E731
    elif route == "submit":
        url = reverse("api-assignment-submit", args=[_claimed(client, study)])
        request = lambda: client.post(url, {"choice": "tie"}, content_type="application/json")  # noqa: E731
    else:
        request = lambda: client.get(reverse("annotation:annotate", args=[study.slug]))  # noqa: E731
    terminate_own_backend()
    response = request()
    assert response.status_code == 200, response.content
    if route == "submit":
        assert Annotation.objects.filter(assignment__annotator=a1).count() == 1
