"""Questionnaires (issue 32): a pre-study questionnaire and a comprehension quiz before any item, a
post-study questionnaire after the last; the quiz's attempts limited, its failures recorded; answers
exported per person by pseudonym; on the annotate page, the API and the crowd link."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Assignment, Participant, QuestionnaireResponse
from annotation.questions.questionnaires import parse_questionnaires
from annotation.studies.services import update_study
from tests.annotation.crowd_support import at_items, crowd_study, gold_only_as_checks, step_url
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db

QUESTIONNAIRES = {
    "pre": [{"key": "age", "type": "number", "prompt": "Your age", "min": 18, "max": 120, "integer": True}],
    "quiz": {
        "attempts": 2,
        "questions": [
            {
                "key": "contra",
                "type": "single",
                "prompt": "The evidence says the opposite of the claim. The label?",
                "options": ["supported", "contradicted", "inconclusive"],
                "correct": "contradicted",
                "feedback": "Contradicted: the evidence says the claim is false.",
            }
        ],
    },
    "post": [{"key": "clear", "type": "likert", "prompt": "The instructions were clear"}],
}


def test_questionnaires_are_checked_with_their_correct_answers():
    checked = parse_questionnaires(QUESTIONNAIRES)
    assert checked["quiz"]["attempts"] == 2 and checked["quiz"]["questions"][0]["correct"] == "contradicted"
    assert checked["pre"][0]["integer"] is True and checked["post"][0]["scale"] == [1, 5]
    for bad, message in (
        ({"quiz": {"questions": [{"key": "a", "type": "check", "prompt": "p"}]}}, "give its correct answer"),
        (
            {
                "quiz": {
                    "questions": [{"key": "a", "type": "single", "prompt": "p", "options": ["x", "y"], "correct": "z"}]
                }
            },
            "its correct answer does not fit",
        ),
        (
            {"quiz": {"attempts": 0, "questions": [{"key": "a", "type": "check", "prompt": "p", "correct": True}]}},
            "attempts",
        ),
        ({"pre": [{"key": "a", "type": "check", "prompt": "p", "target": "list"}]}, "the pre-study questionnaire"),
        ({"during": []}, "an object with any of pre, quiz, post"),
    ):
        with pytest.raises(ServiceError, match=message):
            parse_questionnaires(bad)


def with_questionnaires(**options):
    study, users = make_study(items=2, n=1, annotators=2, **options)
    update_study(study=study, changes={"questionnaires": QUESTIONNAIRES})
    study.refresh_from_db()
    return study, users


def test_the_annotate_page_asks_pre_then_the_quiz_then_items_then_post(client):
    study, (a1, _) = with_questionnaires()
    client.force_login(a1)
    annotate = reverse("annotation:annotate", args=[study.slug])
    pre = reverse("annotation:questionnaire", kwargs={"slug": study.slug, "kind": "pre"})
    quiz = reverse("annotation:questionnaire", kwargs={"slug": study.slug, "kind": "quiz"})
    assert client.get(annotate)["Location"] == pre
    assert client.post(pre, {"q.age": "17"}).status_code == 400  # out of range: named, nothing kept
    assert client.post(pre, {"q.age": "34"})["Location"] == annotate
    assert client.get(annotate)["Location"] == quiz
    failed = client.post(quiz, {"q.contra": "supported"}).content.decode()
    assert "the evidence says the claim is false" in failed and "1 attempt left" in failed
    assert client.post(quiz, {"q.contra": "contradicted"})["Location"] == annotate
    attempts = QuestionnaireResponse.objects.filter(respondent=a1, kind="quiz").order_by("attempt")
    assert [(r.attempt, r.passed) for r in attempts] == [(1, False), (2, True)]  # the failure recorded
    for _ in range(2):
        client.get(annotate)
        held = Assignment.objects.get(annotator=a1, status="active")
        client.post(reverse("annotation:annotate_submit", args=[study.slug, held.pk]), {"label": "supported"})
    post = reverse("annotation:questionnaire", kwargs={"slug": study.slug, "kind": "post"})
    assert client.get(annotate)["Location"] == post
    assert client.post(post, {"q.clear": "4"})["Location"] == annotate
    assert client.get(annotate).status_code == 200  # the finish page
    assert QuestionnaireResponse.objects.get(respondent=a1, kind="post").answers == {"clear": 4}


def test_the_quiz_failed_within_its_attempts_hands_out_no_item_on_the_page_or_the_api(client):
    study, (_, a2) = with_questionnaires()
    client.force_login(a2)
    next_url = reverse("api-assignment-next", args=[study.slug])
    first = client.post(next_url)
    assert first.status_code == 409 and "questionnaires/pre" in first.json()["detail"]
    url = reverse("api-questionnaire-pre", args=[study.slug])
    assert client.post(url, {"answers": {"age": 40}}, content_type="application/json").status_code == 200
    quiz = reverse("api-questionnaire-quiz", args=[study.slug])
    shown = client.get(quiz).json()
    assert shown["due"] is True and "correct" not in shown["questions"][0]  # the answer is not given away
    for attempt in (1, 2):
        outcome = client.post(quiz, {"answers": {"contra": "inconclusive"}}, content_type="application/json").json()
        assert outcome["passed"] is False and outcome["attempts_left"] == 2 - attempt
        assert outcome["wrong"] == [
            {"key": "contra", "feedback": "Contradicted: the evidence says the claim is false."}
        ]
    refused = client.post(next_url)
    assert refused.status_code == 409 and "not passed within its attempts" in refused.json()["detail"]
    assert client.get(reverse("annotation:annotate", args=[study.slug])).status_code == 403
    assert not Assignment.objects.filter(annotator=a2).exists()


def test_a_crowd_participant_meets_them_in_order_and_one_who_fails_the_quiz_is_screened_out(client):
    study, link = crowd_study("cq", items=2, gold=0, items_per_participant=1)
    gold_only_as_checks(study)
    update_study(
        study=study, changes={"questionnaires": {**QUESTIONNAIRES, "quiz": {**QUESTIONNAIRES["quiz"], "attempts": 1}}}
    )
    at_items(client, link, "P1")
    page = client.get(step_url(study)).content.decode()
    assert "Before you start" in page and 'name="q.age"' in page
    client.post(step_url(study), {"action": "questionnaire", "kind": "pre", "q.age": "30"})
    assert "A short quiz" in client.get(step_url(study)).content.decode()
    client.post(step_url(study), {"action": "questionnaire", "kind": "quiz", "q.contra": "contradicted"})
    item_page = client.get(step_url(study)).content.decode()
    assert 'name="assignment"' in item_page  # on to the items
    held = Assignment.objects.get(study=study, status="active")
    client.post(step_url(study), {"action": "answer", "assignment": held.pk, "label": "supported"})
    assert "Before you go" in client.get(step_url(study)).content.decode()
    client.post(step_url(study), {"action": "questionnaire", "kind": "post", "q.clear": "5"})
    end = client.get(step_url(study)).content.decode()
    assert "DONE123" in end, end[end.find("<main") :][:2000]

    other = client.__class__()
    at_items(other, link, "P2")
    other.post(step_url(study), {"action": "questionnaire", "kind": "pre", "q.age": "50"})
    other.post(step_url(study), {"action": "questionnaire", "kind": "quiz", "q.contra": "supported"})
    other.get(step_url(study))
    assert Participant.objects.get(study=study, panel_id="P2").status == "screened_out"
    assert QuestionnaireResponse.objects.filter(study=study, kind="quiz", passed=False).count() == 1


def test_the_researcher_downloads_every_response_by_pseudonym(client, make_user):
    from annotation.members.services import add_members

    study, (a1, a2) = with_questionnaires()
    for user, age in ((a1, 30), (a2, 41)):
        client.force_login(user)
        client.post(
            reverse("annotation:questionnaire", kwargs={"slug": study.slug, "kind": "pre"}), {"q.age": str(age)}
        )
        client.post(
            reverse("annotation:questionnaire", kwargs={"slug": study.slug, "kind": "quiz"}), {"q.contra": "supported"}
        )
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(study.members.get(user__username="boss").user)
    text = client.get(reverse("annotation:questionnaire_export", args=[study.slug])).content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert sorted(row["q_age"] for row in rows if row["kind"] == "pre") == ["30", "41"]
    assert {row["passed"] for row in rows if row["kind"] == "quiz"} == {"False"}
    assert a1.username not in text and a2.username not in text  # pseudonyms only
    client.force_login(a1)
    assert client.get(reverse("annotation:questionnaire_export", args=[study.slug])).status_code == 403


def test_the_report_summarises_the_questionnaires_and_the_quiz(client):
    from annotation.members.services import add_members
    from metaeval.reporting import build_report

    study, (a1, a2) = with_questionnaires()
    for user, age, tries in ((a1, 30, ["contradicted"]), (a2, 41, ["supported", "contradicted"])):
        client.force_login(user)
        client.post(
            reverse("annotation:questionnaire", kwargs={"slug": study.slug, "kind": "pre"}), {"q.age": str(age)}
        )
        for answer in tries:
            client.post(
                reverse("annotation:questionnaire", kwargs={"slug": study.slug, "kind": "quiz"}), {"q.contra": answer}
            )
    section = build_report(study)["questionnaires"]
    assert section["quiz"] == {
        "n_people": 2,
        "n_passed": 2,
        "share_passed": 1.0,
        "n_failed_attempts": 1,
        "attempts_allowed": 2,
        "n_passed_first_time": 1,
    }
    ages = section["pre"]["questions"][0]["distribution"]["overall"]
    assert (ages["n_answers"], ages["mean"]) == (2, 35.5)
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(study.members.get(user__username="boss").user)
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'id="questionnaires"' in page and "<strong>2 of 2</strong> people passed" in page
