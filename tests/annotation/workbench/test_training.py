"""The training phase (issue 32): gold items met first with feedback, answers kept apart (no slot, no label of
the study, never handed out as items), reported per annotator; on the page, the API and the crowd link."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Annotation, Assignment, Item, TrainingAnswer
from annotation.studies.services import create_study, update_study
from metaeval.reporting import build_report
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db

TRAINING = [
    {"item": "i-0", "explanation": "The evidence says **so** in its first sentence."},
    {"item": "i-1", "explanation": "Nothing in the passages is about this."},
]


def training_study(**options):
    study, users = make_study(items=6, n=2, annotators=2, **options)
    Item.objects.filter(study=study, external_id="i-0").update(gold_label="supported")
    Item.objects.filter(study=study, external_id="i-1").update(gold_label="inconclusive")
    update_study(study=study, changes={"training": TRAINING})
    study.refresh_from_db()
    return study, users


def test_training_items_must_be_gold_items_of_the_study_and_are_never_handed_out():
    study, _ = make_study(slug="bare", items=3, n=1, annotators=1)
    with pytest.raises(ServiceError, match=r"training items need a gold label.*i-0"):
        update_study(study=study, changes={"training": [{"item": "i-0", "explanation": ""}]})
    with pytest.raises(ServiceError, match="not found: nope"):
        update_study(study=study, changes={"training": [{"item": "nope"}]})
    with pytest.raises(ServiceError, match="set them in its settings once its items are in"):
        create_study(slug="t2", name="t2", kind="verification", training=TRAINING)
    study, _ = training_study()
    assert set(Item.objects.filter(study=study, is_check=True).values_list("external_id", flat=True)) == {"i-0", "i-1"}


def test_the_page_shows_training_first_then_feedback_then_the_studys_items(client):
    study, (a1, _) = training_study()
    client.force_login(a1)
    start = client.get(reverse("annotation:annotate", args=[study.slug]))
    assert start.status_code == 302 and start["Location"].endswith("/annotate/training/")
    page = client.get(start["Location"]).content.decode()
    assert "training" in page.lower() and "item 1 of 2" in page
    first = Item.objects.get(study=study, external_id="i-0")
    feedback = client.post(start["Location"], {"item": first.pk, "label": "contradicted", "active_ms": "500"})
    text = feedback.content.decode()
    assert "Not quite" in text and "<strong>contradicted</strong>" in text and "<strong>supported</strong>" in text
    assert "<strong>so</strong> in its first sentence" in text  # the explanation, as Markdown
    second = Item.objects.get(study=study, external_id="i-1")
    right = client.post(start["Location"], {"item": second.pk, "label": "inconclusive"}).content.decode()
    assert "Right" in right and "the study's items come next" in right
    # Now the study's own items, never a training item, and no training answer became a label.
    client.get(reverse("annotation:annotate", args=[study.slug]))
    held = Assignment.objects.get(annotator=a1, status="active")
    assert held.item.external_id not in ("i-0", "i-1")
    assert not Annotation.objects.filter(study=study).exists()
    assert list(TrainingAnswer.objects.filter(annotator=a1).order_by("pk").values_list("correct", flat=True)) == [
        False,
        True,
    ]


def test_the_api_asks_for_training_first_and_scores_it(client):
    study, (_, a2) = training_study()
    client.force_login(a2)
    refused = client.post(reverse("api-assignment-next", args=[study.slug]))
    assert refused.status_code == 409 and refused.json()["code"] == "training_first"
    for position, (external_id, label, correct) in enumerate((("i-0", "supported", True), ("i-1", "supported", False))):
        shown = client.get(reverse("api-training-next", args=[study.slug])).json()
        assert (
            shown["item"] == external_id and shown["position"] == position + 1 and "gold" not in str(shown["display"])
        )
        wrong_item = client.post(
            reverse("api-training-answer", args=[study.slug]),
            {"item": "i-5", "label": label},
            content_type="application/json",
        )
        assert wrong_item.status_code == 400
        answered = client.post(
            reverse("api-training-answer", args=[study.slug]),
            {"item": external_id, "label": label},
            content_type="application/json",
        ).json()
        assert answered["correct"] is correct and answered["remaining"] == 1 - position
    assert client.get(reverse("api-training-next", args=[study.slug])).status_code == 204
    assert client.post(reverse("api-assignment-next", args=[study.slug])).status_code == 200


def test_the_report_gives_each_annotators_training_accuracy_and_keeps_training_out_of_the_labels(client):
    study, (a1, a2) = training_study()
    for user, labels in ((a1, ("supported", "inconclusive")), (a2, ("contradicted", "inconclusive"))):
        client.force_login(user)
        for external_id, label in zip(("i-0", "i-1"), labels, strict=True):
            client.post(
                reverse("api-training-answer", args=[study.slug]),
                {"item": external_id, "label": label},
                content_type="application/json",
            )
    report = build_report(study)
    accuracy = {row["annotator"]: (row["correct"], row["n"]) for row in report["training"]["annotators"]}
    assert sorted(accuracy.values()) == [(1, 2), (2, 2)]
    assert report["n_annotations"] == 0
