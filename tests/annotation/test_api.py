"""The API skeleton: schema, offline docs, token auth, items, import by upload, export."""

from __future__ import annotations

import json
import logging
import re

import pytest
from django.contrib.staticfiles import finders
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Annotation, ImportJob, Item
from annotation.transfer.services import import_runner
from tests.conftest import verification_item


def upload(name: str, *records: dict | str) -> SimpleUploadedFile:
    lines = [record if isinstance(record, str) else json.dumps(record) for record in records]
    return SimpleUploadedFile(name, ("\n".join(lines) + "\n").encode(), content_type="application/octet-stream")


@pytest.mark.django_db
def test_schema_is_openapi3_and_documents_the_routes(client, researcher):
    client.force_login(researcher)
    response = client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    paths = set(schema["paths"])
    assert {
        "/api/studies/",
        "/api/studies/{slug}/",
        "/api/studies/{slug}/items/",
        "/api/studies/{slug}/items/import",
        "/api/studies/{slug}/annotations/export",
    } <= paths
    assert (
        "multipart/form-data" in schema["paths"]["/api/studies/{slug}/items/import"]["post"]["requestBody"]["content"]
    )


@pytest.mark.django_db
def test_swagger_ui_is_served_offline(client, researcher):
    client.force_login(researcher)
    response = client.get(reverse("api-docs"))
    assert response.status_code == 200
    html = response.content.decode()
    urls = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert urls, "the docs page loads its assets"
    assert not [url for url in urls if url.startswith(("http:", "https:", "//"))], urls
    for url in urls:
        if url.startswith("/static/"):
            assert finders.find(url.removeprefix("/static/")), f"{url} is not a local static file"
    assert "Content-Security-Policy" in response.headers


@pytest.mark.django_db
def test_token_auth(client, researcher, verification_study):
    response = client.post(reverse("api-token"), {"username": "rita", "password": "pw-rita"})
    assert response.status_code == 201
    token = response.json()["token"]
    response = client.get(reverse("api-study-list"), HTTP_AUTHORIZATION=f"Token {token}")
    assert response.status_code == 200
    assert [study["slug"] for study in response.json()["results"]] == ["verif"]
    assert client.get(reverse("api-study-list"), HTTP_AUTHORIZATION="Token wrong").status_code == 401


@pytest.mark.django_db
def test_study_detail_and_items_for_researcher(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    detail = client.get(reverse("api-study-detail", args=["verif"])).json()
    assert detail["role"] == "researcher"
    assert detail["counts"]["items"] == 3 and detail["counts"]["annotations"] == 6
    assert detail["domains"] == [{"domain": "longfact", "items": 3, "gold": 0, "annotations": 6}]
    items = client.get(reverse("api-item-list", args=["verif"])).json()
    assert items["count"] == 3
    assert [item["id"] for item in items["results"]] == ["c-1", "c-2", "c-3"]
    assert items["results"][0]["n_annotations"] == 2
    one = client.get(reverse("api-item-detail", args=["verif", "c-2"])).json()
    assert one["payload"]["claim"] == "Claim c-2 is true."
    assert client.get(reverse("api-item-detail", args=["verif", "nope"])).status_code == 404


@pytest.mark.django_db
def test_annotator_sees_study_without_researcher_fields(client, annotator, verification_study):
    client.force_login(annotator)
    detail = client.get(reverse("api-study-detail", args=["verif"])).json()
    assert detail["role"] == "annotator"
    assert "counts" not in detail and "seed" not in detail


@pytest.mark.django_db
def test_item_import_by_upload(client, researcher, verification_study):
    client.force_login(researcher)
    url = reverse("api-item-import", args=["verif"])
    response = client.post(url, {"file": upload("items.jsonl", verification_item("a"), verification_item("b"))})
    assert response.status_code == 201, response.content
    assert response.json()["created"] == 2 and response.json()["status"] == "succeeded"
    response = client.post(url, {"file": upload("items.jsonl", verification_item("c"), {"id": "d", "claim": 7})})
    assert response.status_code == 400
    body = response.json()
    assert body["status"] == "failed"
    assert body["errors"] == [{"line": 2, "field": "claim", "message": "must be a string, got number"}]
    assert Item.objects.filter(study=verification_study).count() == 2
    response = client.post(url, {"file": upload("items.txt", verification_item("e"))})
    assert response.status_code == 400 and "cannot tell the format" in response.json()["detail"]


@pytest.mark.django_db
def test_import_jobs_log_their_start_and_outcome(client, researcher, verification_study, caplog):
    client.force_login(researcher)
    url = reverse("api-item-import", args=["verif"])
    with caplog.at_level(logging.INFO, logger="annotation.transfer.services.import_runner"):
        client.post(url, {"file": upload("items.jsonl", verification_item("a"), verification_item("b"))})
        client.post(url, {"file": upload("items.jsonl", {"id": "c", "claim": 7})})
    good, bad = ImportJob.objects.order_by("pk")
    records = [record for record in caplog.records if record.name == "annotation.transfer.services.import_runner"]
    messages = [record.getMessage() for record in records]
    assert (
        len(messages) == 4 and messages[0] == f"import job {good.pk} started: items into study verif from items.jsonl"
    )
    assert messages[1].startswith(f"import job {good.pk} finished in ")
    assert messages[1].endswith(": 2 created, 0 updated from 2 records") and records[1].n_created == 2
    assert messages[2].startswith(f"import job {bad.pk} started")
    assert messages[3].startswith(f"import job {bad.pk} refused the file ") and messages[3].endswith(": 1 problem(s)")


@pytest.mark.django_db
def test_an_import_that_breaks_fails_its_job_and_logs_the_traceback(
    client, researcher, verification_study, monkeypatch, caplog
):
    def broken(**kwargs):
        raise RuntimeError("the disk is on fire")

    monkeypatch.setitem(import_runner.IMPORTERS, ImportJob.What.ITEMS, broken)
    client.force_login(researcher)
    with caplog.at_level(logging.INFO, logger="annotation.transfer.services.import_runner"):
        response = client.post(
            reverse("api-item-import", args=["verif"]), {"file": upload("items.jsonl", verification_item("a"))}
        )
    body = response.json()
    assert response.status_code == 400 and body["status"] == "failed" and body["error_count"] == 1
    assert "unexpected error (RuntimeError: the disk is on fire); nothing was changed" in body["errors"][0]["message"]
    [failure] = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert failure.exc_info is not None and failure.exc_info[0] is RuntimeError
    assert "Traceback (most recent call last)" in caplog.text and "the disk is on fire" in caplog.text
    assert ImportJob.objects.get().status == "failed"  # not left running or queued


@pytest.mark.django_db
def test_annotation_import_and_export(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    response = client.post(
        reverse("api-annotation-import", args=["verif"]),
        {"file": upload("labels.jsonl", {"item": "c-1", "annotator": "w3", "label": "Inconclusive"})},
    )
    assert response.status_code == 201, response.content
    assert Annotation.objects.filter(assignment__study=loaded_verification_study).count() == 7
    response = client.get(reverse("api-annotation-export", args=["verif"]), {"format": "jsonl"})
    assert response.status_code == 200 and response["Content-Type"].startswith("application/x-ndjson")
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert len(rows) == 7
    assert {"item": "c-1", "annotator": "w3", "label": "inconclusive", "raw_label": "Inconclusive"}.items() <= rows[
        2
    ].items()
    assert client.get(reverse("api-annotation-export", args=["verif"]), {"format": "xml"}).status_code == 400


@pytest.mark.django_db(transaction=True)
def test_big_upload_is_imported_by_the_background_worker(client, researcher, verification_study, settings):
    settings.IMPORT_INLINE_MAX_BYTES = 100
    client.force_login(researcher)
    response = client.post(
        reverse("api-item-import", args=["verif"]),
        {"file": upload("items.jsonl", *(verification_item(f"big-{n}") for n in range(50)))},
    )
    assert response.status_code == 202, response.content
    job_id = response.json()["id"]
    assert response.json()["status"] == "queued"
    assert Item.objects.filter(study=verification_study).count() == 0
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    job = client.get(reverse("api-import-job", args=["verif", job_id])).json()
    assert job["status"] == "succeeded" and job["created"] == 50
    assert Item.objects.filter(study=verification_study).count() == 50
    assert (
        not ImportJob.objects.get(pk=job_id).file_path
        or not __import__("pathlib").Path(ImportJob.objects.get(pk=job_id).file_path).exists()
    )
