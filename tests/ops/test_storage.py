"""Shared file storage (issue 16 §1): uploads and exports in an S3-compatible bucket reach every host.

Unit tests use moto inside this process (`mock_aws`); the end-to-end test runs a real
`manage.py worker` with its own, empty local folder against a moto server on loopback, so the
only way a file can get from the web request to the worker, and back to the download, is the bucket.
"""

from __future__ import annotations

import io
import json
import urllib.request
from datetime import timedelta
from pathlib import Path
from unittest.mock import patch
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from moto import mock_aws
from moto.server import ThreadedMotoServer

from annotation.lib import storage
from annotation.lib.storage import files, scratch_dir, stored_names
from annotation.members.services import add_members
from annotation.models import ExportJob, ImportJob, Item
from annotation.studies.services import create_study
from annotation.transfer.services.export_jobs import request_export
from annotation.transfer.services.export_runner import run_export_job
from annotation.transfer.services.import_jobs import submit_import
from annotation.transfer.services.import_runner import run_import_job
from annotation.transfer.services.recovery import resume_stale_jobs
from tests.conftest import verification_item
from tests.support.s3 import BUCKET, free_port, keys, moto_server, s3_client, s3_environment, s3_storages
from tests.support.worker import start_db_worker, stop, wait_for

ITEMS = 40


def items_file(name: str = "items.jsonl") -> SimpleUploadedFile:
    body = "".join(json.dumps(verification_item(f"s3-{n}")) + "\n" for n in range(ITEMS)).encode()
    return SimpleUploadedFile(name, body, content_type="application/x-ndjson")


def local_files(folder: Path) -> list[Path]:
    """Every file under a host's own folder (the settings' dev key and the SQLite file are not there in tests)."""
    return sorted(path for path in folder.rglob("*") if path.is_file()) if folder.exists() else []


@pytest.fixture
def bucket(settings, tmp_path):
    """The file storage is a (moto) bucket; this process's VAR_DIR is the web host's own, empty folder."""
    with mock_aws():
        client = s3_client()
        client.create_bucket(Bucket=BUCKET)
        settings.VAR_DIR = tmp_path / "web-host"
        settings.STORAGES = s3_storages(s3_environment(), tmp_path / "settings")
        yield client


@pytest.fixture
def big(settings, loaded_verification_study):
    settings.EXPORT_INLINE_MAX_ROWS = 2
    settings.IMPORT_INLINE_MAX_BYTES = 100
    return loaded_verification_study


@pytest.mark.django_db
def test_the_settings_make_an_s3_storage_from_the_environment_and_a_var_dir_folder_without_it(tmp_path):
    env = {**s3_environment(endpoint_url="http://minio.internal:9000"), "CLAIMLAB_S3_URL_EXPIRY_SECONDS": "120"}
    s3 = s3_storages(env, tmp_path)["claimlab_files"]
    assert s3["BACKEND"] == "storages.backends.s3.S3Storage"
    options = s3["OPTIONS"]
    assert (options["bucket_name"], options["endpoint_url"], options["region_name"]) == (
        BUCKET,
        "http://minio.internal:9000",
        "us-east-1",
    )
    assert options["querystring_expire"] == 120 and options["default_acl"] is None
    assert options["client_config"].s3 == {"addressing_style": "path"}
    assert s3_storages({}, tmp_path)["claimlab_files"] == {"BACKEND": "annotation.lib.storage.VarDirStorage"}


@pytest.mark.django_db
def test_a_big_upload_goes_to_the_bucket_and_the_worker_imports_it_from_there(
    client, researcher, big, bucket, tmp_path
):
    client.force_login(researcher)
    response = client.post(reverse("api-item-import", args=[big.slug]), {"file": items_file()})
    assert response.status_code == 202, response.content
    job = ImportJob.objects.get(pk=response.json()["id"])
    assert keys(bucket) == [job.file_path] and job.file_path.startswith(f"uploads/{job.pk}-")
    assert local_files(tmp_path / "web-host") == []  # the web host kept nothing

    run_import_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.created, job.file_path) == ("succeeded", ITEMS, ""), job.errors
    assert Item.objects.filter(study=big, external_id__startswith="s3-").count() == ITEMS
    assert keys(bucket) == []  # the upload is removed once imported
    assert local_files(tmp_path / "web-host") == []  # the downloaded copy was removed too


@pytest.mark.django_db
def test_an_export_is_stored_in_the_bucket_and_downloaded_through_a_short_lived_presigned_url(
    client, researcher, big, bucket, tmp_path, settings
):
    settings.CLAIMLAB_S3_URL_EXPIRY_SECONDS = 90
    client.force_login(researcher)
    response = client.post(
        reverse("api-export-create", args=[big.slug]), {"format": "csv"}, content_type="application/json"
    )
    job = ExportJob.objects.get(pk=response.json()["id"])
    run_export_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "succeeded" and keys(bucket) == [job.file_path] and job.file_path.startswith("exports/")
    assert local_files(tmp_path / "web-host" / "scratch") == []  # written locally, moved to the bucket, gone here

    for url in (
        reverse("annotation:export_job_download", args=[big.slug, job.pk]),
        reverse("api-export-download", args=[big.slug, job.pk]),
    ):
        download = client.get(url)
        assert download.status_code == 302 and download["Cache-Control"] == "no-store"
        location = urlsplit(download["Location"])
        query = parse_qs(location.query)
        assert location.path == f"/{BUCKET}/{job.file_path}"
        assert query["X-Amz-Expires"] == ["90"] and "X-Amz-Signature" in query
        assert query["response-content-disposition"] == ['attachment; filename="verif-annotations.csv"']
        assert query["response-content-type"] == ["text/csv; charset=utf-8"]
    stored = bucket.get_object(Bucket=BUCKET, Key=job.file_path)["Body"].read()
    target = tmp_path / "cli.csv"
    call_command("export_annotations", big.slug, "--format", "csv", "--output", str(target))
    assert stored == target.read_bytes()


@pytest.mark.django_db
def test_only_the_studys_researcher_gets_the_presigned_url(client, big, bucket, make_user, annotator):
    job = ExportJob.objects.create(study=big, file_format="csv")
    run_export_job(job_id=job.pk)
    other_researcher = make_user("otto")
    other = create_study(slug="other", name="Other", kind="verification", annotators_per_item=1)
    add_members(study=other, usernames=[other_researcher.username], role="researcher")
    urls = (
        reverse("annotation:export_job_download", args=[big.slug, job.pk]),
        reverse("api-export-download", args=[big.slug, job.pk]),
    )
    for user, refused in ((other_researcher, 404), (annotator, 403)):
        client.force_login(user)
        for url in urls:
            response = client.get(url)
            assert response.status_code == refused
            assert "Location" not in response and b"X-Amz-Signature" not in response.content
    client.logout()
    assert all(client.get(url).status_code in (302, 401, 403) for url in urls)  # the login page, never the file
    assert all("X-Amz-Signature" not in client.get(url).get("Location", "") for url in urls)


@pytest.mark.django_db
def test_a_newer_export_deletes_the_older_object_and_recovery_removes_an_unrecorded_one(big, bucket):
    first, second = (ExportJob.objects.create(study=big, file_format="csv") for _ in range(2))
    run_export_job(job_id=first.pk)
    first.refresh_from_db()
    old_name = first.file_path
    run_export_job(job_id=second.pk)
    second.refresh_from_db()
    assert keys(bucket) == [second.file_path] and old_name != second.file_path
    dead = ExportJob.objects.create(study=big, file_format="jsonl", status="running", attempts=1)
    orphan = files().save(f"exports/{dead.pk}-abc-verif-annotations.jsonl", ContentFile(b"{}\n"))
    resume_stale_jobs(older_than=timedelta(0))
    assert orphan not in keys(bucket) and second.file_path in keys(bucket)
    assert stored_names("exports") == [second.file_path]


@pytest.mark.django_db
def test_readyz_checks_the_bucket_and_fails_naming_storage_when_it_is_missing(client, settings, bucket):
    assert client.get("/readyz").json()["checks"]["storage"] == "ok"
    assert keys(bucket) == []  # the probe object was deleted again
    bucket.delete_bucket(Bucket=BUCKET)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "ok", "migrations": "ok", "queue": "ok", "storage": "failed"}


@pytest.mark.django_db
def test_readyz_fails_naming_storage_when_the_endpoint_does_not_answer(client, settings, tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.STORAGES = s3_storages(s3_environment(endpoint_url=closed), tmp_path)
    response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["checks"]["storage"] == "failed"
    assert closed.encode() not in response.content


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_disk_never_saw_the_upload_imports_it_and_its_export_downloads_from_the_bucket(
    client, researcher, big, settings, tmp_path
):
    with moto_server() as endpoint:
        client_s3 = s3_client(endpoint)
        client_s3.create_bucket(Bucket=BUCKET)
        env = s3_environment(endpoint_url=endpoint)
        web_var, worker_var = tmp_path / "web-host", tmp_path / "worker-host"
        settings.VAR_DIR = web_var
        settings.STORAGES = s3_storages(env, tmp_path / "settings")
        client.force_login(researcher)

        response = client.post(reverse("api-item-import", args=[big.slug]), {"file": items_file()})
        assert response.status_code == 202, response.content
        job_id = response.json()["id"]
        response = client.post(
            reverse("api-export-create", args=[big.slug]), {"format": "jsonl"}, content_type="application/json"
        )
        export_id = response.json()["id"]
        assert local_files(web_var) == []

        log = tmp_path / "worker.log"
        worker = start_db_worker(log, {**env, "CLAIMLAB_VAR_DIR": str(worker_var)})
        try:
            wait_for(
                lambda: (
                    ImportJob.objects.get(pk=job_id).status in ("succeeded", "failed")
                    and ExportJob.objects.get(pk=export_id).status in ("succeeded", "failed")
                ),
                "the import and the export to end",
                worker,
                log,
            )
        finally:
            stop(worker)
        job, export = ImportJob.objects.get(pk=job_id), ExportJob.objects.get(pk=export_id)
        assert (job.status, job.created) == ("succeeded", ITEMS), job.errors
        assert export.status == "succeeded", export.error
        assert keys(client_s3) == [export.file_path]  # the upload is gone, the export is there
        # Neither host's own disk holds an upload or an export: all of it went through the bucket.
        assert local_files(web_var) == [] and local_files(worker_var) == []

        download = client.get(reverse("api-export-download", args=[big.slug, export_id]))
        assert download.status_code == 302 and download["Location"].startswith(f"{endpoint}/{BUCKET}/exports/")
        with urllib.request.urlopen(download["Location"], timeout=30) as fetched:
            body = fetched.read()
            disposition = fetched.headers["Content-Disposition"]
        assert disposition == 'attachment; filename="verif-annotations.jsonl"'
        rows = [json.loads(line) for line in io.BytesIO(body)]
        assert len(rows) == export.rows == 6 and {row["item"] for row in rows} == {"c-1", "c-2", "c-3"}


@pytest.fixture
def store_on_loopback(settings, tmp_path):
    """The file storage is a moto S3 server on a loopback port that a test can stop and start again
    (its objects live in this process, so they outlast a restart); the server."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    url = f"http://127.0.0.1:{server._port}"
    # A bucket of its own: moto keeps objects per process, and other tests here count theirs.
    s3_client(url).create_bucket(Bucket=OUTAGE_BUCKET)
    settings.VAR_DIR = tmp_path / "worker-host"
    settings.STORAGES = s3_storages(s3_environment(endpoint_url=url, bucket=OUTAGE_BUCKET), tmp_path / "settings")
    yield server
    server.stop()
    server.start()  # a test may leave it stopped; empty and remove its bucket for the next one
    client = s3_client(url)
    for key in keys(client, OUTAGE_BUCKET):
        client.delete_object(Bucket=OUTAGE_BUCKET, Key=key)
    client.delete_bucket(Bucket=OUTAGE_BUCKET)
    server.stop()


OUTAGE_BUCKET = "claimlab-outage-test"


@pytest.mark.django_db
def test_an_export_waits_out_an_object_store_outage_and_is_stored_once(big, store_on_loopback, settings):
    """The bucket restarts while the export is being handed to it: the job waits (it does not fail
    for a passing outage, nor store twice) and succeeds once the store answers again."""
    job = request_export(study=big, file_format="csv")
    store_on_loopback.stop()
    waits: list[float] = []

    def store_back_after_two_waits(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:
            store_on_loopback.start()

    with patch.object(storage, "sleep", store_back_after_two_waits):
        run_export_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.SUCCEEDED, job.error
    assert len(waits) >= 2 and stored_names("exports") == [job.file_path]
    with files().open(job.file_path, "rb") as stored:
        assert len(stored.read().decode().splitlines()) == job.rows + 1


@pytest.mark.django_db
def test_an_export_fails_with_the_stores_error_when_the_outage_outlasts_the_limit(big, store_on_loopback, settings):
    settings.STORAGE_OUTAGE_SECONDS = 0
    job = request_export(study=big, file_format="csv")
    store_on_loopback.stop()
    run_export_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.FAILED and job.file_path == ""
    assert "EndpointConnectionError" in job.error or "Could not connect" in job.error, job.error
    assert list(scratch_dir("exports").iterdir()) == []  # nothing half-written left behind


@pytest.mark.django_db
def test_an_import_job_reads_its_upload_after_an_object_store_outage(big, store_on_loopback, settings):
    job = submit_import(study=big, what="items", upload=items_file())
    assert job.file_path.startswith("uploads/")
    store_on_loopback.stop()
    with patch.object(storage, "sleep", lambda seconds: store_on_loopback.start()):
        run_import_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.created, job.file_path) == (ImportJob.Status.SUCCEEDED, ITEMS, ""), job.errors
    assert stored_names("uploads") == []


@pytest.mark.django_db
def test_an_upload_while_the_store_is_away_answers_503_and_leaves_no_job(
    client, researcher, big, store_on_loopback, settings
):
    store_on_loopback.stop()
    client.force_login(researcher)
    before = ImportJob.objects.count()
    response = client.post(reverse("api-item-import", args=[big.slug]), {"file": items_file()})
    assert response.status_code == 503, response.content
    assert response.json()["code"] == "storage_unavailable" and response["Retry-After"]
    assert ImportJob.objects.count() == before  # no job queued without its file
    page = client.post(reverse("annotation:study_import", args=[big.slug]), {"what": "items", "file": items_file()})
    assert page.status_code == 503 and b"file store" in page.content


@pytest.mark.django_db
def test_a_cleanup_in_recovery_does_not_wait_for_the_store_but_a_jobs_own_cleanup_does(store_on_loopback, caplog):
    """Recovery deletes inside a transaction that holds row locks: it must not wait out an outage (the
    file is left, with a warning); a job's own cleanup, outside any transaction, waits for the store."""
    name = files().save("uploads/1-left.jsonl", ContentFile(b"{}\n"))
    store_on_loopback.stop()
    waits: list[float] = []
    with patch.object(storage, "sleep", waits.append):
        storage.delete_quietly(name)
    assert waits == [] and "was not removed: the file store does not answer" in caplog.text
    with patch.object(storage, "sleep", lambda seconds: (waits.append(seconds), store_on_loopback.start())):
        storage.delete_quietly(name, wait_for_store=True)
    assert len(waits) == 1 and stored_names("uploads") == []
