"""Label Studio JSON exports (real samples, tests/data/formats/labelstudio) and our export to Label Studio."""

from __future__ import annotations

import copy
import json

import pytest
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Annotation, Item, StudyMember
from annotation.studies.services import create_study
from metaeval.reporting.build import build_report
from metaeval.reporting.options import ReportOptions
from tests.annotation.transfer.adapters.conftest import refused, run, sample, stored, write

HISTORY = sample("labelstudio", "labelstudio_export_choices_csv_test_history.json")
TEST2 = sample("labelstudio", "labelstudio_export_choices_csv_test2.json")
SENTIMENT = ["Positive", "Negative", "Neutral"]


@pytest.fixture
def sentiment(db):
    return create_study(slug="ls", name="Sentiment", kind="verification", labels=SENTIMENT, annotators_per_item=3)


def project_export() -> list[dict]:
    """A choices project with three annotators per task, built from the real task of the sample.

    Each task is the sample's task with its id and text changed; annotations are the sample's
    annotation with another annotator (an integer id, as Label Studio also writes, or the user
    object) and choice; one is cancelled, as Label Studio exports cancelled annotations too.
    """
    (real,) = json.loads(HISTORY.read_text())
    choices = [
        ("Positive", "Positive", "Positive"),
        ("Negative", "Negative", "Positive"),
        ("Neutral", "Neutral", "Neutral"),
        ("Positive", "Negative", "Neutral"),
    ]
    tasks = []
    for number, picked in enumerate(choices, start=1):
        task = copy.deepcopy(real)
        task["id"] = 6140 + number
        task["data"] = {"text": f"{real['data']['text']} ({number})"}
        annotations = []
        for annotator, choice in enumerate(picked, start=1):
            annotation = copy.deepcopy(real["annotations"][0])
            annotation["completed_by"] = annotator if annotator != 1 else real["annotations"][0]["completed_by"]
            annotation["result"][0]["value"]["choices"] = [choice]
            annotations.append(annotation)
        cancelled = copy.deepcopy(real["annotations"][0])
        cancelled.update(was_cancelled=True, completed_by=9, result=[])
        annotations.append(cancelled)
        task["annotations"] = annotations
        tasks.append(task)
    return tasks


def test_the_real_samples_import_with_both_completed_by_shapes(sentiment, tmp_path):
    out = run("import_items", "ls", str(HISTORY), "--from", "labelstudio", "--source-labels", "annotator")
    assert "Imported 1 new and 0 updated item(s)" in out
    assert "1 new and 0 updated annotation(s) from the same file" in out
    item = Item.objects.get(study=sentiment, external_id="6141")
    assert item.payload["claim"].startswith("Calif. wildfires signal")
    annotation = Annotation.objects.get(assignment__item=item)
    assert (annotation.label, annotation.active_ms) == ("Positive", 1849)
    member = StudyMember.objects.get(study=sentiment, user=annotation.assignment.annotator)
    assert (member.pseudonym, member.is_external) == ("sergei@heartex.e2e", True)


def test_a_choice_outside_the_study_names_the_task(db):
    study = create_study(slug="yn", name="Yes/no", kind="verification", labels=["Yes", "No"])
    message = refused("import_items", "yn", str(TEST2), "--from", "labelstudio")
    assert "task 1 (id 4), annotation 1 by test@heartex.com: " in message
    assert "is not one of the study's labels (Yes, No)" in message
    assert stored(study) == (0, 0, 0)


def test_a_choices_project_becomes_a_study_whose_report_shows_agreement(sentiment, tmp_path):
    path = write(tmp_path / "project-3-at-2024.json", json.dumps(project_export()))
    out = run("import_items", "ls", str(path), "--from", "labelstudio", "--source-labels", "annotator")
    assert "Imported 4 new" in out and "12 new and 0 updated annotation(s)" in out
    assert "skipped 4 cancelled annotation(s)" in out
    report = build_report(sentiment, ReportOptions(n_resamples=50))
    assert report["n_annotators"] == 3 and report["n_annotations"] == 12
    agreement = report["agreement"]
    # 1 of 4 tasks unanimous, 2 with two of three agreeing, 1 split: percent agreement (pairs) = (3+1+3+0)/12.
    assert agreement["percent_agreement"]["value"] == pytest.approx(7 / 12)
    assert agreement["fleiss_kappa"]["value"] is not None


def test_by_default_a_projects_labels_become_gold_where_its_annotators_agree(sentiment, tmp_path):
    """Issue 29, finding 3: no slot goes to the project's annotators; an item whose labels differ gets no gold."""
    path = write(tmp_path / "project-3-at-2024.json", json.dumps(project_export()))
    out = run("import_items", "ls", str(path), "--from", "labelstudio")
    assert "12 label(s) by ls-2, ls-3, sergei@heartex.e2e are gold / reference only, not annotations" in out
    assert "2 item(s) got their gold label from them" in out
    assert "2 item(s) whose labels in the file disagree got no gold label" in out
    assert dict(Item.objects.filter(study=sentiment).values_list("external_id", "gold_label")) == {
        "6141": "Positive",
        "6142": "",
        "6143": "Neutral",
        "6144": "",
    }
    assert not Annotation.objects.filter(assignment__study=sentiment).exists()
    assert not StudyMember.objects.filter(study=sentiment, is_external=True).exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[{"id": 1, "data": {"text": "x"}, "annotations": [', "line 1: invalid JSON: Expecting value at column 51"),
        ('{"tasks": 3}', "task 1 (id 1): holds no text to judge"),
        ("42", "file: expected a Label Studio export, a JSON array of tasks; found number"),
        (
            '[{"id": 1, "data": {"text": "x"}, "annotations": [{"completed_by": null, "result": []}]}]',
            "file, field 'annotations[0].completed_by': task 1 (id 1): must be a user id or an object with an 'id'",
        ),
        (
            '[{"id": 1, "data": {"text": "x"}, "annotations": [{"completed_by": 1, "result": [{"type": "labels", "value": {}}]}]}]',
            "has no 'choices' result (found labels); only choices projects can be imported",
        ),
        (
            '[{"id": 1, "data": {"text": "x"}, "annotations": [{"completed_by": 1, "result": [{"type": "choices", "value": {"choices": ["Positive", "Negative"]}}]}]}]',
            "must hold exactly one chosen label",
        ),
        (
            '[{"id": 1, "data": {"text": "x"}}, {"id": 1, "data": {"text": "y"}}]',
            "file, field 'id': task 2 (id 1): the same id as task 1",
        ),
        ("[" * 70 + "]" * 70, "invalid JSON: nested deeper than the limit of 64 levels"),
    ],
)
def test_malformed_exports(sentiment, tmp_path, text, expected):
    path = write(tmp_path / "export.json", text)
    assert expected in refused("import_items", "ls", str(path), "--from", "labelstudio")
    assert stored(sentiment) == (0, 0, 0)


def test_a_file_over_the_upload_limit_is_refused_before_parsing(sentiment, tmp_path, settings):
    settings.IMPORT_UPLOAD_MAX_BYTES = 100
    path = write(tmp_path / "export.json", json.dumps(project_export()))
    assert "file: the file is larger than the limit of 100 bytes for a whole-JSON file" in refused(
        "import_items", "ls", str(path), "--from", "labelstudio"
    )
    assert stored(sentiment) == (0, 0, 0)


def test_a_study_exported_to_label_studio_reads_back(sentiment, tmp_path):
    path = write(tmp_path / "export.json", json.dumps(project_export()))
    run("import_items", "ls", str(path), "--from", "labelstudio", "--source-labels", "annotator")
    out_path = tmp_path / "ls-tasks.json"
    run("export_annotations", "ls", "--format", "labelstudio", "--output", str(out_path))
    tasks = json.loads(out_path.read_text())
    assert [task["id"] for task in tasks] == ["6141", "6142", "6143", "6144"]
    first = tasks[1]
    assert first["data"]["claim"].endswith("(2)")
    assert [a["result"][0]["value"]["choices"][0] for a in first["annotations"]] == ["Negative", "Negative", "Positive"]
    assert all(isinstance(a["completed_by"], dict) and a["completed_by"]["email"] for a in first["annotations"])
    again = create_study(slug="back", name="Back", kind="verification", labels=SENTIMENT)
    run("import_items", "back", str(out_path), "--from", "labelstudio", "--source-labels", "annotator")
    assert sorted(Annotation.objects.filter(assignment__study=again).values_list("label", flat=True)) == sorted(
        Annotation.objects.filter(assignment__study=sentiment).values_list("label", flat=True)
    )


def test_the_page_and_the_api_download_the_label_studio_export(client, researcher, sentiment, tmp_path):
    add_members(study=sentiment, usernames=[researcher.username], role="researcher")
    run(
        "import_items",
        "ls",
        str(write(tmp_path / "export.json", json.dumps(project_export()))),
        "--from",
        "labelstudio",
        "--source-labels",
        "annotator",
    )
    client.force_login(researcher)
    page = client.get(reverse("annotation:study_export_labelstudio", args=["ls"]))
    assert page["Content-Disposition"] == 'attachment; filename="ls-labelstudio.json"'
    tasks = json.loads(b"".join(page.streaming_content))
    assert len(tasks) == 4 and sum(len(task["annotations"]) for task in tasks) == 12
    api = client.get(reverse("api-annotation-export", args=["ls"]), {"format": "labelstudio"})
    assert json.loads(b"".join(api.streaming_content)) == tasks
