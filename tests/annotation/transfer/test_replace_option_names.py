"""An import refused because an entry exists already says how to replace it the way its face does:
the import page's checkbox, the API's `update`, the command's `--update` (issue 34, smaller texts)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.errors import ImportFailed
from annotation.models import ImportJob
from annotation.transfer.services import item_import
from annotation.transfer.services.import_runner import run_import
from annotation.transfer.services.item_import import import_items
from metaeval.verifiers.services.prediction_import import import_predictions
from tests.conftest import jsonl, verification_item

PAGE_BOX = "'Replace entries whose id already exists' ticked"


def item_file(*ids: str) -> SimpleUploadedFile:
    body = "".join(json.dumps(verification_item(item_id)) + "\n" for item_id in ids)
    return SimpleUploadedFile("items.jsonl", body.encode())


@pytest.fixture
def study_with_item(verification_study):
    import_items(study=verification_study, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    return verification_study


def job_messages(study) -> str:
    job = ImportJob.objects.filter(study=study).latest("pk")
    assert job.status == ImportJob.Status.FAILED
    return " ".join(error["message"] for error in job.errors)


def test_the_import_page_names_its_checkbox_not_the_flag(client, researcher, study_with_item):
    client.force_login(researcher)
    response = client.post(
        reverse("annotation:study_import", args=[study_with_item.slug]),
        {"what": "items", "file": item_file("c-1")},
        follow=True,
    )
    text = job_messages(study_with_item)
    assert f"item 'c-1' already exists in this study; import the file again with {PAGE_BOX} to replace it" in text
    assert "--update" not in text and "--update" not in response.content.decode()
    assert "Replace entries whose id already exists" in response.content.decode()  # the job page shows it


def test_the_api_names_its_field(client, researcher, study_with_item):
    client.force_login(researcher)
    response = client.post(reverse("api-item-import", args=[study_with_item.slug]), {"file": item_file("c-1")})
    assert response.status_code == 400
    body = json.dumps(response.json())
    assert "import the file again with 'update': true to replace it" in body
    assert "--update" not in body


def test_an_annotation_import_through_the_api_names_its_field(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    row = json.dumps({"item": "c-1", "annotator": "w1", "label": "contradicted"}) + "\n"
    response = client.post(
        reverse("api-annotation-import", args=[loaded_verification_study.slug]),
        {"file": SimpleUploadedFile("labels.jsonl", row.encode())},
    )
    assert response.status_code == 400
    body = json.dumps(response.json())
    assert "already has a label on item 'c-1'; import the file again with 'update': true" in body
    assert "--update" not in body


def test_a_queued_job_names_both_the_pages_box_and_the_apis_field(study_with_item):
    """A job run by the worker does not know whether the page or the API made it."""
    job = ImportJob.objects.create(study=study_with_item, what="items", file_name="items.jsonl", file_format="jsonl")
    run_import(job, io.BytesIO(item_file("c-1").read()))
    text = job_messages(study_with_item)
    assert f"{PAGE_BOX} (the API's 'update': true) to replace it" in text and "--update" not in text


def test_the_command_keeps_its_flag(study_with_item, tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_bytes(item_file("c-1").read())
    with pytest.raises(CommandError, match="already exists in this study; use --update to replace it"):
        call_command("import_items", study_with_item.slug, str(path), stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("face", "expected"),
    [
        ("cli", "import the file again (with --update to replace it)"),
        ("page", f"import the file again (with {PAGE_BOX} to replace it)"),
        ("api", "import the file again (with 'update': true to replace it)"),
    ],
)
def test_an_id_taken_by_another_import_meanwhile_names_the_faces_option(
    verification_study, monkeypatch, face, expected
):
    """Between staging and the switch another import adds the same id: the line is named, with the face's way."""
    real_switch = item_import.switch_live

    def another_import_first(*args, **kwargs):
        monkeypatch.setattr(item_import, "switch_live", real_switch)
        import_items(study=verification_study, stream=jsonl(verification_item("c-9")), fmt="jsonl")
        return real_switch(*args, **kwargs)

    monkeypatch.setattr(item_import, "switch_live", another_import_first)
    with pytest.raises(ImportFailed) as failure:  # an update import: it stages on either database (item_copy.py)
        import_items(
            study=verification_study, stream=jsonl(verification_item("c-9")), fmt="jsonl", face=face, update=True
        )
    [error] = failure.value.errors
    assert error.message == (
        "item 'c-9' was added to the study by another import while this file was being read; " + expected
    )


def test_the_verifiers_page_names_its_own_checkbox(client, researcher, loaded_verification_study):
    study = loaded_verification_study
    rows = jsonl({"item": "c-1", "verifier": "v", "label": "supported"})
    import_predictions(study=study, stream=rows, fmt="jsonl")
    client.force_login(researcher)
    response = client.post(
        reverse("verifiers:import_predictions", args=[study.slug]),
        {"file": SimpleUploadedFile("p.jsonl", b'{"item": "c-1", "verifier": "v", "label": "contradicted"}\n')},
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "import the file again with &#x27;Replace predictions that exist&#x27; ticked to replace it" in html
    assert "--update" not in html
