"""Big exports run in the background (docs/architecture.md, Mechanisms) and download the same file the command writes."""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.lib.storage import scratch_dir, stored_names
from annotation.members.services import add_members
from annotation.models import ExportJob
from annotation.studies.services import create_study
from annotation.transfer import exports
from annotation.transfer.services.export_jobs import request_export
from annotation.transfer.services.export_runner import run_export_job


@pytest.fixture
def big(settings, tmp_path, loaded_verification_study):
    """The six-annotation study, with the inline limit set below its size."""
    settings.EXPORT_INLINE_MAX_ROWS = 2
    settings.VAR_DIR = tmp_path / "var"
    return loaded_verification_study


def command_export(study, fmt: str, tmp_path: Path) -> bytes:
    target = tmp_path / f"cli.{fmt}"
    call_command("export_annotations", study.slug, "--format", fmt, "--output", str(target))
    return target.read_bytes()


def downloaded(response) -> bytes:
    return b"".join(response.streaming_content)


@pytest.mark.django_db
def test_a_big_study_is_exported_in_the_background_from_the_study_page(client, researcher, big, tmp_path, caplog):
    client.force_login(researcher)
    response = client.get(reverse("annotation:study_export", args=[big.slug, "csv"]), follow=True)
    assert "more than 2 annotations" in response.content.decode()  # not streamed: told to prepare it
    page = client.get(reverse("annotation:study_detail", args=[big.slug])).content.decode()
    assert 'id="export-request"' in page and "Download CSV</a>" not in page

    response = client.post(reverse("annotation:study_export_request", args=[big.slug]), {"format": "csv"})
    job = ExportJob.objects.get()
    assert response.url == reverse("annotation:export_job", args=[big.slug, job.pk])
    waiting = client.get(response.url).content.decode()
    assert "Queued" in waiting and 'http-equiv="refresh"' in waiting

    with caplog.at_level(logging.INFO, logger="annotation.transfer.services.export_runner"):
        run_export_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.rows, job.error) == ("succeeded", 6, "")
    started, finished = (record.getMessage() for record in caplog.records if record.name.startswith("annotation."))
    assert started == f"export job {job.pk} started: csv of study {big.slug}"
    assert finished.startswith(f"export job {job.pk} finished in ") and finished.endswith(": 6 annotations")
    ready = client.get(response.url).content.decode()
    assert 'id="export-download"' in ready and "refresh" not in ready
    file = client.get(reverse("annotation:export_job_download", args=[big.slug, job.pk]))
    assert file["Content-Disposition"] == 'attachment; filename="verif-annotations.csv"'
    assert file["Content-Type"] == exports.CONTENT_TYPES["csv"]
    assert downloaded(file) == command_export(big, "csv", tmp_path)


@pytest.mark.django_db
def test_the_api_points_big_studies_to_background_exports(client, researcher, big, tmp_path):
    client.force_login(researcher)
    refused = client.get(reverse("api-annotation-export", args=[big.slug]), {"format": "jsonl"})
    assert refused.status_code == 400
    assert "POST /api/studies/verif/exports" in refused.json()["detail"]

    response = client.post(
        reverse("api-export-create", args=[big.slug]), {"format": "jsonl"}, content_type="application/json"
    )
    assert response.status_code == 202
    job = response.json()
    assert (job["status"], job["format"], job["download_url"]) == ("queued", "jsonl", None)
    assert response["Location"] == reverse("api-export-job", args=[big.slug, job["id"]])
    not_yet = client.get(reverse("api-export-download", args=[big.slug, job["id"]]))
    assert not_yet.status_code == 404 and "queued" in not_yet.json()["detail"]

    run_export_job(job_id=job["id"])
    done = client.get(response["Location"]).json()
    assert (done["status"], done["rows"]) == ("succeeded", 6)
    file = client.get(done["download_url"])
    assert file.status_code == 200
    assert downloaded(file) == command_export(big, "jsonl", tmp_path)


@pytest.mark.django_db
def test_small_studies_still_stream_at_once(client, researcher, loaded_verification_study, tmp_path):
    client.force_login(researcher)
    response = client.get(reverse("api-annotation-export", args=[loaded_verification_study.slug]), {"format": "csv"})
    assert response.status_code == 200
    assert downloaded(response) == command_export(loaded_verification_study, "csv", tmp_path)
    assert not ExportJob.objects.exists()


@pytest.mark.django_db
def test_a_newer_export_replaces_the_older_file(client, researcher, big):
    client.force_login(researcher)
    first, second = (request_export(study=big, file_format="csv") for _ in range(2))
    other_format = request_export(study=big, file_format="jsonl")
    for job in (first, other_format, second):
        run_export_job(job_id=job.pk)
    first.refresh_from_db()
    assert first.file_path == "" and len(stored_names("exports")) == 2  # the newer csv and the jsonl
    response = client.get(reverse("api-export-download", args=[big.slug, first.pk]))
    assert response.status_code == 404 and "replaced by a newer one" in response.json()["detail"]
    assert (
        "replaced by a newer export"
        in client.get(reverse("annotation:export_job", args=[big.slug, first.pk])).content.decode()
    )
    assert client.get(reverse("api-export-job", args=[big.slug, second.pk])).json()["download_url"]


@pytest.mark.django_db
def test_a_failed_export_says_why_and_leaves_no_file(client, researcher, big, monkeypatch, caplog):
    real = exports.export_rows

    def breaks_halfway(study):
        with contextlib.closing(real(study)) as rows:
            yield next(rows)
            raise OSError("No space left on device")

    monkeypatch.setattr(exports, "export_rows", breaks_halfway)
    job = request_export(study=big, file_format="csv")
    with caplog.at_level(logging.INFO, logger="annotation.transfer.services.export_runner"):
        run_export_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and job.error == "OSError: No space left on device" and job.file_path == ""
    # The researcher gets the text; the operator's log gets the traceback too.
    [failure] = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert failure.getMessage().startswith(f"export job {job.pk} failed after ") and failure.exc_info[0] is OSError
    assert "Traceback (most recent call last)" in caplog.text and "breaks_halfway" in caplog.text
    assert stored_names("exports") == [] and list(scratch_dir("exports").iterdir()) == []  # no file, no .partial
    client.force_login(researcher)
    assert (
        "No space left on device"
        in client.get(reverse("annotation:export_job", args=[big.slug, job.pk])).content.decode()
    )
    assert run_export_job(job_id=job.pk).status == "failed"  # running it again changes nothing


@pytest.mark.django_db
def test_export_jobs_are_for_the_studys_researchers_only(client, make_user, annotator, big):
    job = request_export(study=big, file_format="csv")
    run_export_job(job_id=job.pk)
    other = create_study(slug="other", name="Other", kind="verification")
    outsider = make_user("olga")
    add_members(study=other, usernames=[outsider.username], role="researcher")
    routes = [
        reverse("annotation:export_job", args=[big.slug, job.pk]),
        reverse("annotation:export_job_download", args=[big.slug, job.pk]),
        reverse("api-export-job", args=[big.slug, job.pk]),
        reverse("api-export-download", args=[big.slug, job.pk]),
        reverse("api-export-job", args=[other.slug, job.pk]),  # another study's slug: not found there
    ]
    client.force_login(outsider)
    assert [client.get(route).status_code for route in routes] == [404, 404, 404, 404, 404]
    client.force_login(annotator)
    assert [client.get(route).status_code for route in routes[:4]] == [403, 403, 403, 403]
    assert client.post(reverse("api-export-create", args=[big.slug]), {"format": "csv"}).status_code == 403
    assert ExportJob.objects.count() == 1


@pytest.mark.django_db
def test_an_unknown_format_is_refused(client, researcher, big):
    client.force_login(researcher)
    response = client.post(
        reverse("api-export-create", args=[big.slug]), {"format": "xlsx"}, content_type="application/json"
    )
    assert response.status_code == 400 and "format" in response.json()["fields"]
    response = client.post(reverse("annotation:study_export_request", args=[big.slug]), {"format": "xlsx"}, follow=True)
    assert (
        "No export started: format must be one of csv, jsonl, hf, predictions-csv, predictions-jsonl"
        in response.content.decode()
    )
    assert not ExportJob.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_background_worker_writes_the_export(client, researcher, big, tmp_path):
    """The real path: the request queues the task after commit, `db_worker` runs it."""
    client.force_login(researcher)
    response = client.post(
        reverse("api-export-create", args=[big.slug]), {"format": "csv"}, content_type="application/json"
    )
    assert response.status_code == 202
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    job = client.get(response["Location"]).json()
    assert (job["status"], job["rows"]) == ("succeeded", 6)
    assert downloaded(client.get(job["download_url"])) == command_export(big, "csv", tmp_path)


@pytest.mark.django_db
def test_an_export_nobody_runs_is_said_to_be_stuck(client, researcher, big):
    job = request_export(study=big, file_format="csv")
    client.force_login(researcher)
    page = client.get(reverse("annotation:export_job", args=[big.slug, job.pk])).content.decode()
    assert "export-stuck" not in page and 'http-equiv="refresh"' in page
    assert client.get(reverse("api-export-job", args=[big.slug, job.pk])).json()["stuck"] is False
    ExportJob.objects.filter(pk=job.pk).update(created_at=job.created_at - ExportJob.STUCK_AFTER - timedelta(seconds=1))
    page = client.get(reverse("annotation:export_job", args=[big.slug, job.pk])).content.decode()
    assert "export-stuck" in page and "manage.py worker" in page and 'http-equiv="refresh"' not in page
    assert client.get(reverse("api-export-job", args=[big.slug, job.pk])).json()["stuck"] is True
    run_export_job(job_id=job.pk)  # a worker that turns up late still finishes it
    assert client.get(reverse("api-export-job", args=[big.slug, job.pk])).json()["stuck"] is False
