"""A database locked past the busy timeout answers 503 with Retry-After on the annotate paths, never a 500.

The lock error is simulated where it happens in production: inside the
assignment service, as SQLite raises it once the busy timeout has run out.
"""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.urls import reverse

from annotation.lib.dblocks import is_lock_error
from annotation.models import Assignment
from annotation.workbench import services as assignments
from annotation.workbench import views  # imported before any test patches the services it imports names from
from tests.annotation.workbench.test_workbench_pages import pref_answer
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db


def locked(**kwargs):
    raise OperationalError("database is locked")


@pytest.fixture
def annotating(client):
    study, (a1, *_) = make_study(kind="preference", items=3, n=1)
    client.force_login(a1)
    return study


def assert_busy(response) -> None:
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "7"
    assert b"busy" in response.content and b"nothing was saved" in response.content


@pytest.fixture(autouse=True)
def retry_after(settings):
    settings.DB_BUSY_RETRY_AFTER_SECONDS = 7
    # The 503 a request answers once it is not run again (test_db_fault_repeat.py: the runs before it).
    settings.DB_FAULT_RETRY_SECONDS = 0


def test_api_next_answers_503_when_the_database_is_locked(client, annotating, monkeypatch):
    monkeypatch.setattr(assignments, "claim_next", locked)
    response = client.post(reverse("api-assignment-next", args=[annotating.slug]))
    assert_busy(response)
    assert response.json()["code"] == "database_busy"


def test_api_submit_answers_503_when_the_database_is_locked(client, annotating, monkeypatch):
    assignment_id = client.post(reverse("api-assignment-next", args=[annotating.slug])).json()["assignment"]["id"]
    monkeypatch.setattr(assignments, "submit_with_progress", locked)
    response = client.post(
        reverse("api-assignment-submit", args=[assignment_id]), {"choice": "tie"}, content_type="application/json"
    )
    assert_busy(response)


def test_annotate_page_answers_503_when_the_database_is_locked(client, annotating, monkeypatch):
    monkeypatch.setattr(views, "claim_next", locked)
    assert_busy(client.get(reverse("annotation:annotate", args=[annotating.slug])))


def test_annotate_page_submit_answers_503_when_the_database_is_locked(client, annotating, monkeypatch):
    client.get(reverse("annotation:annotate", args=[annotating.slug]))
    assignment = Assignment.objects.get()
    monkeypatch.setattr(views, "submit", locked)
    response = client.post(reverse("annotation:annotate_submit", args=[annotating.slug, assignment.pk]), pref_answer())
    assert_busy(response)


def test_other_database_errors_are_not_disguised(client, annotating, monkeypatch):
    def broken(**kwargs):
        raise OperationalError("no such table: annotation_item")

    monkeypatch.setattr(assignments, "claim_next", broken)
    with pytest.raises(OperationalError):
        client.post(reverse("api-assignment-next", args=[annotating.slug]))


def test_lock_errors_are_recognised_on_both_databases():
    class PgLockTimeout(Exception):
        sqlstate = "55P03"

    pg = OperationalError("canceling statement due to lock timeout")
    pg.__cause__ = PgLockTimeout()
    assert is_lock_error(OperationalError("database is locked")) and is_lock_error(pg)
    assert not is_lock_error(OperationalError("disk I/O error")) and not is_lock_error(RuntimeError("locked"))
