"""Benchmark labels are the researcher's choice (issue 29, finding 3): the labels a pipeline's file carries
beside its items become the items' gold labels by default (every slot stays with the study's annotators), or
an imported annotator's labels when asked; a wrong choice is refused naming the allowed ones; the report says."""

from __future__ import annotations

from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.members.services import add_members
from annotation.models import Annotation, ImportJob, Item, Study
from annotation.studies.services import create_study, set_study_status
from annotation.transfer.adapters import import_from
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from metaeval.reporting import ReportOptions, build_report
from tests.annotation.transfer.adapters.conftest import refused, run, sample, stored

SUBTASK3 = sample("factcheckgpt", "factcheckgpt_subtask3_claim_evidence_stance_first3.jsonl")
FRESH = ["fresh-1", "fresh-2", "fresh-3"]


@pytest.fixture
def rerun(db, researcher) -> Study:
    """A rerun of Factcheck-GPT's subtask 3 with three fresh annotators per item."""
    study = create_study(slug="rerun", name="Rerun", kind="verification", annotators_per_item=3)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    add_members(study=study, usernames=FRESH, role="annotator")
    return study


def _label_everything(study: Study) -> Counter[str]:
    """Each fresh annotator labels until nothing is left for them; items labelled per annotator."""
    set_study_status(study=study, status="open")
    done: Counter[str] = Counter()
    for user in get_user_model().objects.filter(username__in=FRESH):
        while (assignment := claim_next(user=user, study=study)) is not None:
            submit(user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported"))
            done[user.username] += 1
    return done


def test_by_default_the_benchmarks_labels_are_gold_and_three_fresh_annotators_get_all_three_slots(rerun):
    out = run("import_items", "rerun", str(SUBTASK3), "--from", "factcheckgpt")
    assert "3 label(s) by factcheck-bench are gold / reference only, not annotations" in out
    assert "3 item(s) keep the gold label the file gives them" in out  # subtask 3's items carry it already
    assert "the evidence judgements of 3 label(s) are not kept" in out
    assert not Annotation.objects.filter(assignment__study=rerun).exists()
    assert set(Item.objects.filter(study=rerun).values_list("slots_taken", flat=True)) == {0}
    assert all(Item.objects.filter(study=rerun).values_list("gold_label", flat=True))
    assert _label_everything(rerun) == Counter(dict.fromkeys(FRESH, 3))  # every item, by each of the three
    per_item = Counter(Annotation.objects.filter(assignment__study=rerun).values_list("assignment__item", flat=True))
    assert set(per_item.values()) == {3}
    rerun.refresh_from_db()
    assert rerun.source_labels == [{"from": "factcheckgpt", "as": "gold", "annotators": ["factcheck-bench"]}]
    report = build_report(rerun, ReportOptions(n_resamples=20))
    assert report["source_labels_rule"] == (
        "the labels that came with the items imported from factcheckgpt (factcheck-bench) are the items' gold "
        "labels only, not annotations: they take none of the N slots"
    )
    assert report["n_annotators"] == 3


def test_as_an_annotators_labels_the_benchmark_keeps_a_slot_as_before(rerun):
    run("import_items", "rerun", str(SUBTASK3), "--from", "factcheckgpt", "--source-labels", "annotator")
    bench = Annotation.objects.filter(assignment__study=rerun)
    assert bench.count() == 3 and set(bench.values_list("assignment__annotator__username", flat=True)) != set(FRESH)
    assert all(annotation.evidence_judgements for annotation in bench)
    done = _label_everything(rerun)
    assert sum(done.values()) == 6  # two slots per item are left for the three fresh annotators
    rerun.refresh_from_db()
    assert rerun.source_labels == [{"from": "factcheckgpt", "as": "annotator", "annotators": ["factcheck-bench"]}]
    rule = build_report(rerun, ReportOptions(n_resamples=20))["source_labels_rule"]
    assert "kept as annotators' labels (factcheck-bench): each takes one of the N slots" in rule


def test_a_file_without_labels_records_nothing(db):
    study = create_study(slug="plain", name="Plain", kind="verification")
    run(
        "import_items",
        "plain",
        str(sample("factcheckgpt", "factbench_lines1_51_235_329_330.jsonl")),
        "--from",
        "factcheckgpt",
    )
    study.refresh_from_db()
    assert (
        study.source_labels == [] and build_report(study, ReportOptions(n_resamples=20))["source_labels_rule"] is None
    )


def test_a_wrong_choice_is_refused_naming_the_allowed_ones_and_nothing_is_stored(client, researcher, rerun):
    with pytest.raises(ServiceError, match=r"source_labels must be one of gold, annotator, got 'reference'"):
        import_from(
            source="factcheckgpt", target="items", study=rerun, stream=SUBTASK3.open("rb"), source_labels="reference"
        )
    message = refused("import_items", "rerun", str(SUBTASK3), "--from", "factcheckgpt", "--source-labels", "both")
    assert "invalid choice: 'both' (choose from 'gold', 'annotator')" in message
    client.force_login(researcher)
    api = client.post(
        reverse("api-item-import", args=["rerun"]),
        {
            "file": SimpleUploadedFile(SUBTASK3.name, SUBTASK3.read_bytes()),
            "from": "factcheckgpt",
            "source_labels": "x",
        },
    )
    assert api.status_code == 400 and "source_labels must be one of gold, annotator, got 'x'" in api.json()["detail"]
    page = client.post(
        reverse("annotation:study_import", args=["rerun"]),
        {
            "what": "items",
            "source": "factcheckgpt",
            "file": SimpleUploadedFile(SUBTASK3.name, SUBTASK3.read_bytes()),
            "source_labels": "x",
        },
        follow=True,
    )
    assert "choose one of gold, annotator; x is not one" in page.content.decode()
    gold_annotations = client.post(
        reverse("api-annotation-import", args=["rerun"]),
        {
            "file": SimpleUploadedFile(SUBTASK3.name, SUBTASK3.read_bytes()),
            "from": "factcheckgpt",
            "source_labels": "gold",
        },
    )
    assert (
        gold_annotations.status_code == 400
        and "source_labels=gold is for an items import" in gold_annotations.json()["detail"]
    )
    assert stored(rerun) == (0, 0, 0) and not ImportJob.objects.filter(study=rerun).exists()
    rerun.refresh_from_db()
    assert rerun.source_labels == []


def test_the_page_and_the_api_offer_the_choice(client, researcher, rerun):
    client.force_login(researcher)
    form = client.get(reverse("annotation:study_detail", args=["rerun"])).content.decode()
    assert 'name="source_labels"' in form and "annotator: an annotator&#x27;s labels (a slot each)" in form
    page = client.post(
        reverse("annotation:study_import", args=["rerun"]),
        {
            "what": "items",
            "source": "factcheckgpt",
            "file": SimpleUploadedFile(SUBTASK3.name, SUBTASK3.read_bytes()),
            "source_labels": "annotator",
        },
        follow=True,
    )
    assert page.status_code == 200 and Annotation.objects.filter(assignment__study=rerun).count() == 3
    other = create_study(slug="rerun-api", name="Rerun API", kind="verification", annotators_per_item=3)
    add_members(study=other, usernames=[researcher.username], role="researcher")
    api = client.post(
        reverse("api-item-import", args=["rerun-api"]),
        {"file": SimpleUploadedFile(SUBTASK3.name, SUBTASK3.read_bytes()), "from": "factcheckgpt"},
    )
    assert api.status_code == 201, api.content
    assert any("are gold / reference only, not annotations" in note for note in api.json()["notes"])
    assert not Annotation.objects.filter(assignment__study=other).exists()
    html = client.get(reverse("metaeval:report", args=["rerun-api"])).content.decode()
    assert 'id="source-labels-rule"' in html and "gold labels only, not annotations" in html
