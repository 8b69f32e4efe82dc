"""Extra questions end to end (issue 32): defined through the API, the settings page and `create_study
--questions`; asked on the annotate page, the crowd page and the preview; answered through the API
and the page; kept with revisions; exported; and without changing exact N or counterbalancing."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Annotation, AnnotationRevision, Assignment, Study
from annotation.transfer.exports import export_chunks
from tests.support.assignment_study import make_study

QUESTIONS = [
    {"key": "confidence", "type": "likert", "prompt": "How sure are you?", "anchors": {"1": "guess", "5": "sure"}},
    {
        "key": "complete",
        "type": "single",
        "prompt": "Is the list complete?",
        "target": "list",
        "options": ["yes", "no"],
    },
    {"key": "verifiable", "type": "check", "prompt": "Verifiable", "target": "claim"},
]

pytestmark = pytest.mark.django_db


def preference_study(**options):
    study, users = make_study(kind="preference", items=4, n=2, questions=QUESTIONS, **options)
    return study, users


def claim(client, study) -> dict:
    response = client.post(reverse("api-assignment-next", args=[study.slug]))
    assert response.status_code == 200, response.content
    return response.json()["assignment"]


def test_api_answers_are_stored_per_system_and_exported(client):
    study, (a1, *_) = preference_study()
    client.force_login(a1)
    assignment = claim(client, study)
    left = Assignment.objects.get(pk=assignment["id"]).left_system
    right = next(system for system in study.systems if system != left)
    answer = {
        "choice": "left_slight",
        "questions": {
            "confidence": 4,
            "complete": {"list_1": "yes", "list_2": "no"},
            "verifiable": {"list_1": [True], "list_2": [False]},
        },
    }
    response = client.post(
        reverse("api-assignment-submit", args=[assignment["id"]]), answer, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    stored = Annotation.objects.get(assignment_id=assignment["id"]).question_answers
    assert stored == {
        "confidence": 4,
        "complete": {left: "yes", right: "no"},
        "verifiable": {left: [True], right: [False]},
    }

    rows = [json.loads(line) for line in "".join(export_chunks(study, "jsonl")).splitlines()]
    assert rows[0]["q_confidence"] == 4 and rows[0]["q_complete"] == {left: "yes", right: "no"}
    table = list(csv.DictReader(io.StringIO("".join(export_chunks(study, "csv")))))
    assert table[0]["q_confidence"] == "4" and json.loads(table[0]["q_verifiable"]) == {left: [True], right: [False]}


def test_a_bad_or_missing_answer_is_a_400_naming_the_question_and_nothing_is_stored(client):
    study, (a1, *_) = preference_study()
    client.force_login(a1)
    assignment = claim(client, study)
    url = reverse("api-assignment-submit", args=[assignment["id"]])
    missing = client.post(url, {"choice": "tie"}, content_type="application/json")
    assert missing.status_code == 400 and "question confidence: an answer is required" in missing.json()["detail"]
    wrong = client.post(
        url,
        {"choice": "tie", "questions": {"confidence": 9, "complete": {"list_1": "yes", "list_2": "yes"}}},
        content_type="application/json",
    )
    assert wrong.status_code == 400 and "from 1 to 5, got 9" in wrong.json()["detail"]
    assert not Annotation.objects.filter(study=study).exists()
    assert Assignment.objects.get(pk=assignment["id"]).status == "active"


def page_answer(**extra) -> dict:
    return {
        "choice": "tie",
        "justification": "",
        "active_ms": "900",
        "q.confidence": "2",
        "q.complete.list_1": "no",
        "q.complete.list_2": "yes",
        "q.verifiable.list_2.0": "on",
        **extra,
    }


def test_the_annotate_page_asks_every_question_and_a_revision_keeps_the_old_answers(client):
    study, (a1, *_) = preference_study()
    client.force_login(a1)
    page = client.get(reverse("annotation:annotate", args=[study.slug])).content.decode()
    for name in (
        "q.confidence",
        "q.complete.list_1",
        "q.complete.list_2",
        "q.verifiable.list_1.0",
        "q.verifiable.list_2.0",
    ):
        assert f'name="{name}"' in page
    assert 'data-qkey="5"' in page and "sure" in page  # Likert keys and anchors
    assignment = Assignment.objects.get(annotator=a1, status="active")
    left = assignment.left_system
    right = next(system for system in study.systems if system != left)
    submit = client.post(reverse("annotation:annotate_submit", args=[study.slug, assignment.pk]), page_answer())
    assert submit.status_code == 302
    annotation = Annotation.objects.get(assignment=assignment)
    assert annotation.question_answers == {
        "confidence": 2,
        "complete": {left: "no", right: "yes"},
        "verifiable": {left: [False], right: [True]},
    }
    # Back: the stored answers come back on screen, and a change is a revision with both versions.
    revise = reverse("annotation:annotate_revise", args=[study.slug, assignment.pk])
    shown = client.get(revise).content.decode()
    assert 'name="q.confidence" value="2" data-qkey="2" required checked' in shown
    client.post(revise, page_answer(**{"q.confidence": "5"}))
    revision = AnnotationRevision.objects.get(annotation=annotation)
    assert revision.old_value["question_answers"]["confidence"] == 2
    assert revision.new_value["question_answers"]["confidence"] == 5


def test_a_page_answer_missing_a_question_comes_back_with_the_hint(client):
    study, (a1, *_) = preference_study()
    client.force_login(a1)
    client.get(reverse("annotation:annotate", args=[study.slug]))
    assignment = Assignment.objects.get(annotator=a1, status="active")
    answer = page_answer()
    del answer["q.confidence"]
    response = client.post(reverse("annotation:annotate_submit", args=[study.slug, assignment.pk]), answer)
    assert response.status_code == 400
    assert "question confidence: an answer is required" in response.content.decode()
    assert 'name="q.complete.list_1" value="no" data-qkey="2" required checked' in response.content.decode()


def test_questions_change_neither_exact_n_nor_counterbalancing(client):
    """Every item gets exactly N answers, and each item's two slots show the lists on opposite sides,
    with questions asked (the claim questions' path is the step-by-step submit on every database)."""
    study, users = make_study(kind="preference", items=4, n=2, annotators=3, questions=QUESTIONS)
    for user in users:
        client.force_login(user)
        while (response := client.post(reverse("api-assignment-next", args=[study.slug]))).status_code == 200:
            assignment = response.json()["assignment"]
            answer = {
                "choice": "tie",
                "questions": {
                    "confidence": 3,
                    "complete": {"list_1": "yes", "list_2": "no"},
                    "verifiable": {"list_1": [True], "list_2": [True]},
                },
            }
            done = client.post(
                reverse("api-assignment-submit", args=[assignment["id"]]), answer, content_type="application/json"
            )
            assert done.status_code == 200, done.content
    per_item = {}
    for assignment in Assignment.objects.filter(study=study, status="submitted"):
        per_item.setdefault(assignment.item_id, []).append(assignment.left_system)
    assert len(per_item) == 4 and all(len(sides) == 2 for sides in per_item.values())
    assert all(len(set(sides)) == 2 for sides in per_item.values())  # counterbalanced within each item
    assert Annotation.objects.filter(study=study).exclude(question_answers={}).count() == 8


def test_questions_through_the_api_the_command_line_and_the_settings_page(client, tmp_path, make_user):
    researcher = make_user("res", is_staff=False)
    from annotation.studies.services import create_study

    made = create_study(slug="made", name="made", kind="preference", questions=QUESTIONS, created_by=researcher)
    client.force_login(researcher)
    detail = client.get(reverse("api-study-detail", args=["made"])).json()
    assert [question["key"] for question in detail["questions"]] == ["confidence", "complete", "verifiable"]
    refused = client.patch(
        reverse("api-study-detail", args=["made"]),
        {"questions": [{"key": "x", "type": "slider", "prompt": "p"}]},
        content_type="application/json",
    )
    assert refused.status_code == 400 and "question 1 (x): type must be one of" in refused.json()["detail"]
    assert Study.objects.get(slug="made").questions == made.questions  # nothing half-written
    path = tmp_path / "questions.yaml"
    path.write_text("- key: sure\n  type: likert\n  prompt: How sure?\n  scale: [0, 10]\n", encoding="utf-8")
    call_command("create_study", "cli", "--name", "cli", "--kind", "verification", "--questions", str(path))
    assert Study.objects.get(slug="cli").questions[0]["scale"] == [0, 10]
    bad = tmp_path / "bad.json"
    bad.write_text('[{"key": "sure", "type": "slider", "prompt": "?"}]', encoding="utf-8")
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="question 1 \\(sure\\): type must be one of"):
        call_command("create_study", "cli2", "--name", "cli2", "--kind", "verification", "--questions", str(bad))
    settings_page = client.get(reverse("annotation:study_settings", args=["made"])).content.decode()
    assert "key: confidence" in settings_page and 'id="questions-preview"' in settings_page
    assert made.questions[1]["target"] == "list"


def test_the_live_preview_renders_the_questions_or_names_the_problem(client, make_user):
    client.force_login(make_user("someone"))
    url = reverse("annotation:questions_preview")
    shown = client.post(url, {"text": json.dumps(QUESTIONS), "kind": "preference"})
    assert shown.status_code == 200
    text = shown.content.decode()
    assert 'name="q.confidence"' in text and 'name="q.verifiable.list_1.1"' in text
    refused = client.post(url, {"text": "- {key: x, type: slider, prompt: p}", "kind": "verification"})
    assert refused.status_code == 400 and "question 1 (x): type must be one of" in refused.content.decode()


def test_the_adjudication_page_shows_each_answers_questions_under_the_blinded_list_names(client, make_user):
    from annotation.members.services import add_members

    study, (a1, *_) = preference_study()
    client.force_login(a1)
    assignment = claim(client, study)
    left = Assignment.objects.get(pk=assignment["id"]).left_system
    answer = {
        "choice": "tie",
        "questions": {
            "confidence": 5,
            "complete": {"list_1": "yes", "list_2": "no"},
            "verifiable": {"list_1": [True], "list_2": [False]},
        },
    }
    client.post(reverse("api-assignment-submit", args=[assignment["id"]]), answer, content_type="application/json")
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(study.members.get(user__username="boss").user)
    item_id = Assignment.objects.get(pk=assignment["id"]).item.external_id
    page = client.get(reverse("annotation:adjudicate_item", args=[study.slug, item_id])).content.decode()
    name = {system: f"List {n}" for n, system in enumerate(study.systems, start=1)}  # A/B order, never screen sides
    right = next(system for system in study.systems if system != left)
    assert "<dt>How sure are you?</dt><dd>5</dd>" in page
    assert f"{name[left]}: yes" in page and f"{name[right]}: no" in page
    assert f"{name[left]}: 1=yes" in page and f"{name[right]}: 1=no" in page
    assert left not in page.split('id="adj-answers"')[1].split("</ul>")[0]  # system names stay hidden
