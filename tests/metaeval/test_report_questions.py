"""The report's extra-questions section (issue 32), checked against the krippendorff package and hand counts
on answers stored through the API, under the study frame's one rule (a left-out gold item's answers are out)."""

from __future__ import annotations

import random
from collections import Counter

import krippendorff
import numpy as np
import pytest
from django.urls import reverse

from annotation.models import Annotation, Item
from metaeval.reporting import build_report
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db

QUESTIONS = [
    {"key": "confidence", "type": "likert", "prompt": "How sure are you?"},
    {"key": "verifiable", "type": "check", "prompt": "Verifiable", "target": "claim"},
    {"key": "note", "type": "text", "prompt": "Anything else?", "required": False},
]


@pytest.fixture
def answered(client):
    """A preference study of 6 items, 3 annotators each, every question answered at random (seeded)."""
    study, users = make_study(kind="preference", items=6, n=3, annotators=3, questions=QUESTIONS)
    rng = random.Random(7)
    for user in users:
        client.force_login(user)
        while (response := client.post(reverse("api-assignment-next", args=[study.slug]))).status_code == 200:
            assignment = response.json()["assignment"]
            answer = {
                "choice": rng.choice(["left_strong", "tie", "right_slight"]),
                "questions": {
                    "confidence": rng.randint(1, 5),
                    "verifiable": {"list_1": [rng.random() < 0.7], "list_2": [rng.random() < 0.4]},
                    "note": rng.choice(["", "fine"]),
                },
            }
            done = client.post(
                reverse("api-assignment-submit", args=[assignment["id"]]), answer, content_type="application/json"
            )
            assert done.status_code == 200, done.content
    return study


def _stored(study):
    """The study's answers (other studies' may share the database: the module fixtures of tests/metaeval)."""
    rows = Annotation.objects.filter(study=study).select_related("assignment__item")
    return list(rows.order_by("assignment__item__position", "pk"))


def test_distribution_agreement_and_per_claim_shares_match_independent_computations(answered):
    report = build_report(answered)
    blocks = {block["key"]: block for block in report["questions"]["questions"]}
    stored = _stored(answered)
    confidence = Counter(annotation.question_answers["confidence"] for annotation in stored)
    counts = blocks["confidence"]["distribution"]["overall"]["counts"]
    assert {int(point): count for point, count in counts.items()} == {point: confidence[point] for point in range(1, 6)}

    # Ordinal alpha on the stored answers: items as units, annotators as coders (krippendorff package).
    coders = sorted({annotation.assignment.annotator_id for annotation in stored})
    items = sorted({annotation.assignment.item_id for annotation in stored})
    matrix = np.full((len(coders), len(items)), np.nan)
    for annotation in stored:
        matrix[coders.index(annotation.assignment.annotator_id), items.index(annotation.assignment.item_id)] = (
            annotation.question_answers["confidence"]
        )
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5])
    assert blocks["confidence"]["agreement"]["alpha"]["value"] == pytest.approx(expected, abs=1e-9)

    # Per claim: every judgement counts, per system (stored per system, whatever side it was shown on).
    per_system: dict[str, list[bool]] = {}
    for annotation in stored:
        for system, claims in annotation.question_answers["verifiable"].items():
            per_system.setdefault(system, []).extend(claims)
    scores = blocks["verifiable"]["per_claim"]["systems"]
    for system, judged in per_system.items():
        assert (scores[system]["each_judgement"]["k"], scores[system]["each_judgement"]["n"]) == (
            sum(judged),
            len(judged),
        )
    assert "agreement" not in blocks["note"]  # free text: counts only


def test_the_report_page_shows_the_questions(client, answered):
    client.force_login(answered.created_by or _researcher(answered))
    page = client.get(reverse("metaeval:report", args=[answered.slug])).content.decode()
    assert 'id="questions"' in page and "How sure are you?" in page and "Claims judged True" in page


def _researcher(study):
    from annotation.members.services import add_members

    add_members(study=study, usernames=["boss"], role="researcher")
    return study.members.get(user__username="boss").user


def test_a_gold_item_left_out_of_agreement_leaves_its_answers_out_too(answered):
    """One rule: the questions count the answers of the labels agreement counts."""
    full = build_report(answered)["questions"]["questions"][0]["n_answers"]
    gold = Item.objects.filter(study=answered).order_by("position").first()
    Item.objects.filter(pk=gold.pk).update(gold_label="tie")
    answered.gold_in_agreement = False
    answered.save(update_fields=["gold_in_agreement"])
    report = build_report(answered)
    assert report["questions"]["questions"][0]["n_answers"] == full - 3
    assert report["n_annotations_in_agreement"] == report["n_annotations"] - 3


def test_the_latex_tables_carry_the_questions(answered):
    from metaeval.reporting.latex_format import report_tables, table_tex

    tables = report_tables(build_report(answered))
    agreement = table_tex(tables["questions"])
    assert "confidence" in agreement and "Krippendorff's alpha (ordinal)" in agreement and "\\toprule" in agreement
    per_claim = table_tex(tables["questions_per_claim"])
    assert "verifiable" in per_claim and "every judgement" in per_claim
