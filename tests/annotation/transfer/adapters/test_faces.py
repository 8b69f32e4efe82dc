"""The `from` choice on the import pages and the `from` field of the API import routes."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import ImportJob, Item
from annotation.studies.services import create_study
from metaeval.models import Prediction
from tests.annotation.transfer.adapters.conftest import sample, stored

EARLY = sample("veriscore", "veriscore_claims_early_7067724.jsonl")
BASELINE = sample("veriscore", "claims_sentence_baseline.jsonl")
EXCERPT = sample("veriscore", "veriscore_verification_excerpt.json")
LABELSTUDIO = sample("labelstudio", "labelstudio_export_choices_csv_test_history.json")


def upload(path, name: str | None = None) -> SimpleUploadedFile:
    return SimpleUploadedFile(name or path.name, path.read_bytes())


def verification_jsonl() -> bytes:
    return (json.dumps(json.loads(EXCERPT.read_text())) + "\n").encode()


@pytest.fixture
def preference(db, researcher):
    study = create_study(slug="pref", name="Extractors", kind="preference")
    add_members(study=study, usernames=[researcher.username], role="researcher")
    return study


def test_two_extractors_become_a_preference_study_in_one_page_upload(client, researcher, preference):
    client.force_login(researcher)
    response = client.post(
        reverse("annotation:study_import", args=["pref"]),
        {
            "what": "items",
            "source": "veriscore",
            "file": upload(EARLY),
            "pair": upload(BASELINE),
            "systems": "veriscore, sentences",
        },
        follow=True,
    )
    html = response.content.decode()
    assert "Imported 2 new and updated 0 existing items." in html
    preference.refresh_from_db()
    assert preference.systems == ["veriscore", "sentences"]
    job = ImportJob.objects.get(study=preference)
    assert (job.status, job.file_name, job.created) == ("succeeded", EARLY.name, 2)


def test_a_page_upload_with_problems_lists_the_source_lines(client, researcher, preference):
    client.force_login(researcher)
    bad = SimpleUploadedFile("claims_bad.jsonl", EARLY.read_bytes().rstrip(b"\n") + b'\n{"response": 3}\n')
    response = client.post(
        reverse("annotation:study_import", args=["pref"]),
        {"what": "items", "source": "veriscore", "file": bad, "pair": upload(BASELINE)},
        follow=True,
    )
    html = response.content.decode()
    assert "Nothing was imported" in html
    assert '<td class="num">3</td><td>response</td><td>must be a string, got number</td>' in html
    assert stored(preference) == (0, 0, 0)


def test_the_api_takes_from_and_answers_with_the_job(client, researcher, verification_study):
    client.force_login(researcher)
    url = reverse("api-item-import", args=["verif"])
    response = client.post(
        url, {"file": SimpleUploadedFile("verification_x_3.jsonl", verification_jsonl()), "from": "veriscore"}
    )
    assert response.status_code == 201, response.content
    assert response.json()["created"] == 25 and response.json()["notes"] == []
    response = client.post(
        reverse("api-prediction-import", args=["verif"]),
        {
            "file": SimpleUploadedFile("verification_x_3.jsonl", verification_jsonl()),
            "from": "veriscore",
            "verifier": "gpt-4",
        },
    )
    assert response.status_code == 200, response.content
    assert response.json()["created"] == 3
    assert set(Prediction.objects.values_list("verifier__name", flat=True)) == {"gpt-4"}


def test_the_api_reports_source_places_and_stores_nothing(client, researcher, verification_study):
    client.force_login(researcher)
    response = client.post(
        reverse("api-item-import", args=["verif"]),
        {"file": SimpleUploadedFile("export.json", b'[{"id": 1, "data": {}}]'), "from": "labelstudio"},
    )
    assert response.status_code == 400
    body = response.json()
    assert body["status"] == "failed"
    assert body["errors"] == [
        {
            "line": None,
            "field": "data",
            "message": "task 1 (id 1): holds no text to judge: expected one of claim, text, sentence, statement",
        }
    ]
    assert not Item.objects.filter(study=verification_study).exists()


def test_an_upload_over_the_from_limit_is_refused(client, researcher, verification_study, settings):
    settings.IMPORT_FROM_UPLOAD_MAX_BYTES = 1000
    client.force_login(researcher)
    response = client.post(reverse("api-item-import", args=["verif"]), {"file": upload(EARLY), "from": "veriscore"})
    assert response.status_code == 400
    assert "a pipeline's file is imported here up to 1,000 bytes" in response.json()["detail"]
    assert not ImportJob.objects.exists()


def test_the_schema_documents_from(client, researcher):
    client.force_login(researcher)
    schema = client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    components = schema["components"]["schemas"]

    def choices(request: str) -> list[str]:
        ref = components[request]["properties"]["from"]["allOf"][0]["$ref"]
        return components[ref.rsplit("/", 1)[1]]["enum"]

    assert choices("ImportUploadRequest") == [
        "veriscore",
        "factscore",
        "safe",
        "ragas",
        "factcheckgpt",
        "wice",
        "labelstudio",
    ]
    assert choices("PredictionImportRequest") == ["veriscore", "factscore", "safe", "wice"]
    assert "docs/importing.md" in components["ImportUploadRequest"]["properties"]["from"]["description"]


def test_the_predictions_page_takes_a_pipelines_file(client, researcher, verification_study):
    client.force_login(researcher)
    client.post(
        reverse("api-item-import", args=["verif"]),
        {"file": SimpleUploadedFile("v_3.jsonl", verification_jsonl()), "from": "veriscore"},
    )
    response = client.post(
        reverse("verifiers:import_predictions", args=["verif"]),
        {"source": "veriscore", "file": SimpleUploadedFile("verification_x_2.jsonl", verification_jsonl())},
        follow=True,
    )
    assert "Imported 3 new and 0 updated prediction(s)." in response.content.decode()
    assert set(Prediction.objects.values_list("verifier__name", flat=True)) == {"veriscore-binary"}


def test_pair_without_from_is_refused(client, researcher, verification_study):
    client.force_login(researcher)
    response = client.post(
        reverse("api-item-import", args=["verif"]), {"file": upload(EARLY), "pair": upload(BASELINE)}
    )
    assert response.status_code == 400
    assert "'pair', 'systems' and 'source_labels' go with 'from'" in response.json()["detail"]
    assert not ImportJob.objects.exists()
