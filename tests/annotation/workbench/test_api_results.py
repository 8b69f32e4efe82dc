"""The annotating API's plain-dict answers (annotation/workbench/results.py) equal what the serializers that
document them (annotation/serializers.py) give for the same objects, on both kinds of study; and the
plain check of a submitted answer (serializers._plain_answer) gives what SubmitAnswerSerializer gives."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer

from annotation.models import Annotation
from annotation.workbench import services as assignments
from annotation.workbench.results import answer_result, next_in_result, next_result
from annotation.workbench.selectors import annotator_progress, display_payload
from annotation.workbench.serializers import (
    AnswerResultSerializer,
    NextAssignmentSerializer,
    SubmitAnswerSerializer,
    SubmitResultSerializer,
    _plain_answer,
)
from annotation.workbench.services import SubmittedAnswer, claim_next, flag, skip, submit
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db

ANSWERS = {"verification": SubmittedAnswer(label="supported"), "preference": SubmittedAnswer(choice="left_strong")}


def same(ours: dict, serialized: dict) -> None:
    """Equal as Python values and as the JSON the API sends (key order included)."""
    assert ours == serialized
    assert JSONRenderer().render(ours) == JSONRenderer().render(serialized)


@pytest.mark.parametrize("kind", ["verification", "preference"])
def test_the_answers_equal_the_serializers_output(kind):
    study, (a1, a2, _) = make_study(kind=kind, items=4, slug=f"res-{kind[:4]}")
    current = claim_next(user=a1, study=study)
    progress = annotator_progress(a1, study)
    item = display_payload(current)
    assert current.lease_expires_at is not None  # an active one: its lease is rendered
    same(
        next_result(current, item, progress),
        NextAssignmentSerializer({"assignment": current, "item": item, "progress": progress}).data,
    )

    flagged = flag(user=a1, study=study, assignment_id=current.pk, reason="broken")
    same(answer_result(flagged, progress), AnswerResultSerializer({"assignment": flagged, "progress": progress}).data)

    done = submit(user=a1, study=study, assignment_id=current.pk, answer=ANSWERS[kind])
    progress = annotator_progress(a1, study)
    following = claim_next(user=a1, study=study)
    # Without `next` (the claim after the answer lost its races): the answer alone, `next` left out, as
    # the API documents and clients test (`"next" in body`); SubmitResultSerializer would say null there.
    same(answer_result(done, progress), AnswerResultSerializer({"assignment": done, "progress": progress}).data)
    for extra in (
        {"next": None},
        {"next": next_in_result(following, display_payload(following))},
        {"next": next_in_result(following, display_payload(following)), "holding_lost": True},
    ):
        ours = {**answer_result(done, progress), **extra}
        given = dict(extra)
        if given.get("next"):
            given["next"] = {"assignment": following, "item": display_payload(following)}
        theirs = SubmitResultSerializer({"assignment": done, "progress": progress, **given}).data
        same(ours, theirs)

    skipped = skip(user=a2, study=study, assignment_id=claim_next(user=a2, study=study).pk)
    progress = annotator_progress(a2, study)
    same(answer_result(skipped, progress), AnswerResultSerializer({"assignment": skipped, "progress": progress}).data)
    assert json.loads(JSONRenderer().render(answer_result(skipped, progress)))["assignment"]["status"] == "skipped"


def test_a_submit_whose_claim_lost_its_races_leaves_next_out(client, monkeypatch):
    """The answer is stored; no `next` key (null would tell the client that nothing is left)."""
    study, (a1, *_) = make_study(items=3, slug="res-busy")
    current = claim_next(user=a1, study=study)
    url = reverse("api-assignment-submit", args=[current.pk])  # loads every view before the patch below

    def busy(*args, **kwargs):
        raise assignments.ClaimContention("too many annotators are claiming at this moment; try again in a second")

    monkeypatch.setattr(assignments, "next_after_submit", busy)
    client.force_login(a1)
    reply = client.post(
        url,
        {"label": "supported", "next": True},
        content_type="application/json",
    )
    assert reply.status_code == 200
    body = reply.json()
    assert "next" not in body and body["assignment"]["status"] == "submitted"
    assert Annotation.objects.filter(assignment_id=current.pk).exists()


PLAIN_ANSWERS = [
    {"label": "supported"},
    {"label": "  supported ", "next": True},
    {"label": "supported", "next": False, "active_ms": 1234, "rationale": "the passage says so"},
    {"label": "supported", "next": True, "holding": 7, "active_ms": None},
    {"label": "", "justification": " why "},
    {"choice": "left_strong", "justification": "clearer", "next": True},
    {"choice": "tie", "rationale": "same", "justification": "same"},
]
#: Answers the plain check leaves to the serializer: accepted with coercion, or refused with its message.
SERIALIZER_ANSWERS = [
    {"label": "supported", "next": "true"},
    {"label": "supported", "active_ms": "12"},
    {"label": "supported", "active_ms": True},
    {"label": 5},
    {"label": "soutenu \u00e9vident"},
    {"label": "a\x00b"},
    {"label": "supported", "evidence": [{"index": 0, "judgement": "supports"}]},
    {"label": "supported", "unknown": 1},
    {"choice": "sideways"},
    {"choice": ""},
    {"label": "supported", "active_ms": -1},
    {"label": "supported", "holding": 3},
    {"label": "supported", "next": True, "holding": 0},
    {"label": "supported", "next": True, "holding": True},
    {"rationale": "one", "justification": "another"},
    [{"label": "supported"}],
    "supported",
]


@pytest.mark.parametrize("data", PLAIN_ANSWERS)
def test_a_plain_answer_is_validated_as_the_serializer_does(data):
    serializer = SubmitAnswerSerializer(data=data)
    assert serializer.is_valid(), serializer.errors
    assert _plain_answer(data) == dict(serializer.validated_data)
    assert SubmitAnswerSerializer.answer(_plain_answer(data)) == SubmitAnswerSerializer.answer(
        serializer.validated_data
    )


@pytest.mark.parametrize("data", SERIALIZER_ANSWERS)
def test_anything_else_is_left_to_the_serializer(data):
    assert _plain_answer(data) is None
    serializer = SubmitAnswerSerializer(data=data)
    if serializer.is_valid():
        assert SubmitAnswerSerializer.validated(data) == serializer.validated_data
    else:
        with pytest.raises(ValidationError) as refused:
            SubmitAnswerSerializer.validated(data)
        assert refused.value.detail == serializer.errors
