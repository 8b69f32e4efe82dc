"""Request ids (issue 16 §3): taken from the load balancer when sane, echoed, in every log line of the
request and of the tasks it queued; one access line per request."""

from __future__ import annotations

import json
import logging
import re

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.urls import reverse
from django_tasks_db.models import DBTaskResult
from pythonjsonlogger.json import JsonFormatter

from annotation.members.invites import create_invite
from annotation.models import ExportJob
from config.request_id import RequestIdFilter, enqueue

OWN_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def logs(caplog):
    """caplog with the request-id filter the console handler has in config/settings.py."""
    stamp = RequestIdFilter()
    caplog.handler.addFilter(stamp)
    caplog.set_level(logging.INFO)
    yield caplog
    caplog.handler.removeFilter(stamp)


def access_lines(caplog) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "claimlab.access"]


@pytest.mark.django_db
def test_a_sane_request_id_is_kept_echoed_and_on_the_access_line(client, logs):
    response = client.get("/accounts/login/", headers={"X-Request-ID": "lb-7f3a:2c.91/x+y="})
    assert response.status_code == 200 and response["X-Request-ID"] == "lb-7f3a:2c.91/x+y="
    [line] = access_lines(logs)
    assert (line.method, line.path, line.status, line.user_id) == ("GET", "/accounts/login/", 200, None)
    assert line.request_id == "lb-7f3a:2c.91/x+y=" and line.ms >= 0
    assert line.getMessage().startswith("GET /accounts/login/ 200 ")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "hostile",
    ["x" * 129, "abc\ndef", "abc\r\nX-Injected: 1", "id with spaces", "", '"quoted"', "naïve"],
    ids=["too-long", "newline", "crlf", "spaces", "empty", "quotes", "non-ascii"],
)
def test_a_hostile_request_id_is_replaced_by_one_of_our_own(client, logs, hostile):
    response = client.get("/accounts/login/", headers={"X-Request-ID": hostile})
    own = response["X-Request-ID"]
    assert OWN_ID.fullmatch(own) and own != hostile
    [line] = access_lines(logs)
    assert line.request_id == own
    assert all(hostile not in record.getMessage() for record in logs.records if hostile)


@pytest.mark.django_db
def test_without_a_header_each_request_gets_its_own_id_and_the_access_line_names_the_user(client, researcher, logs):
    client.force_login(researcher)
    first, second = client.get(reverse("annotation:my_studies")), client.get(reverse("annotation:my_studies"))
    assert OWN_ID.fullmatch(first["X-Request-ID"]) and first["X-Request-ID"] != second["X-Request-ID"]
    lines = access_lines(logs)
    assert [(line.status, line.user_id) for line in lines] == [(200, researcher.pk), (200, researcher.pk)]
    assert [line.request_id for line in lines] == [first["X-Request-ID"], second["X-Request-ID"]]


@pytest.mark.django_db
def test_invite_tokens_in_paths_are_masked_in_the_access_line(client, verification_study, researcher, logs):
    token = create_invite(study=verification_study, created_by=researcher).token
    client.get(reverse("annotation:invite", args=[token]))
    [line] = access_lines(logs)
    assert token not in line.path and line.path == "/invite/[token]/"


@pytest.mark.django_db
def test_records_of_the_request_carry_its_id_in_the_json_log(client, researcher, logs):
    client.force_login(researcher)
    client.get(reverse("annotation:my_studies"), headers={"X-Request-ID": "req-json-1"})
    options = {key: value for key, value in django_settings.LOGGING["formatters"]["json"].items() if key != "()"}
    [line] = access_lines(logs)
    emitted = json.loads(JsonFormatter(**options).format(line))
    assert emitted["request_id"] == "req-json-1" and emitted["logger"] == "claimlab.access"
    assert (emitted["status"], emitted["user_id"], emitted["path"]) == (200, researcher.pk, "/")
    assert "request_id" in django_settings.LOGGING["handlers"]["console"]["filters"]


@pytest.mark.django_db(transaction=True)
def test_a_task_queued_by_a_request_logs_under_that_requests_id_in_the_worker(
    client, researcher, loaded_verification_study, settings, tmp_path, logs
):
    settings.EXPORT_INLINE_MAX_ROWS = 2
    settings.VAR_DIR = tmp_path / "var"
    client.force_login(researcher)
    response = client.post(
        reverse("annotation:study_export_request", args=[loaded_verification_study.slug]),
        {"format": "csv"},
        headers={"X-Request-ID": "req-export-42"},
    )
    assert response.status_code == 302 and response["X-Request-ID"] == "req-export-42"
    job = ExportJob.objects.get()
    [queued] = DBTaskResult.objects.all()
    assert queued.args_kwargs == {"args": [job.pk], "kwargs": {"request_id": "req-export-42"}}

    logs.clear()
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)  # another process's job
    job.refresh_from_db()
    assert job.status == "succeeded"
    task_lines = [
        record
        for record in logs.records
        if record.name in ("claimlab.tasks", "annotation.transfer.services.export_runner")
    ]
    messages = [record.getMessage() for record in task_lines]
    assert messages[0] == "task run_export_job started" and messages[-1].startswith("task run_export_job ended after ")
    assert any(message.startswith(f"export job {job.pk} finished in ") for message in messages)
    assert {record.request_id for record in task_lines} == {"req-export-42"}


@pytest.mark.django_db(transaction=True)
def test_a_task_queued_outside_a_request_gets_an_id_of_its_own(loaded_verification_study, settings, tmp_path, logs):
    from annotation.tasks import run_export_job

    settings.VAR_DIR = tmp_path / "var"
    job = ExportJob.objects.create(study=loaded_verification_study, file_format="jsonl")
    enqueue(run_export_job, job.pk)
    assert DBTaskResult.objects.get().args_kwargs["kwargs"] == {"request_id": ""}
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    [started] = [record for record in logs.records if record.getMessage() == "task run_export_job started"]
    assert OWN_ID.fullmatch(started.request_id)
