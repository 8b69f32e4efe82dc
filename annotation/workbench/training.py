"""The training phase (issue 32): the study's training items first, each answer followed by feedback.

A researcher picks gold items as training items, each with an explanation (Study.training). Every
annotator or crowd participant meets them first, in the study's order, before any item of the
study; after each answer the page shows the expected answer, whether theirs was right, and the
explanation. Training answers are kept apart (TrainingAnswer): they take no slot, and training
items are marked like checks (Item.is_check), so they are never handed out as items and their
labels never reach agreement; the report gives each annotator's training accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.lib.pseudonyms import pseudonyms
from annotation.lib.randomisation import left_system_for
from annotation.models import Assignment, Item, Study, TrainingAnswer
from annotation.vocab import preference_as_seen
from annotation.workbench.services import SubmittedAnswer, _check_can_annotate, answer_values


@dataclass(frozen=True)
class Feedback:
    """What the page shows after a training answer."""

    item: Item
    given: str  # the answer's label as the annotator sees it (screen terms for preference)
    expected: str
    correct: bool
    explanation: str
    remaining: int  # training items still to do after this one


def training_ids(study: Study) -> list[str]:
    return [entry["item"] for entry in study.training]


def _explanation(study: Study, external_id: str) -> str:
    return next((entry.get("explanation", "") for entry in study.training if entry["item"] == external_id), "")


def training_assignment(study: Study, item: Item, user: User) -> Assignment:
    """An unsaved assignment showing the training item (sides drawn per person, as slots alternate them)."""
    left = left_system_for(study.seed, item.external_id, user.pk, list(study.systems))
    return Assignment(study=study, item=item, annotator=user, left_system=left)


def check_can_train(user: User, study: Study) -> None:
    """NotAllowed unless the study is open and the user one of its annotators (as for any item)."""
    _check_can_annotate(user, study)


def next_training_item(user: User, study: Study) -> Item | None:
    """The training item the user meets next; None when the study has none left for them."""
    if not study.training:
        return None
    done = set(TrainingAnswer.objects.filter(study=study, annotator=user).values_list("item__external_id", flat=True))
    pending = [external_id for external_id in training_ids(study) if external_id not in done]
    if not pending:
        return None
    # One read for all of them (an item whose gold label was removed since is passed over), in the study's order.
    found = {
        item.external_id: item
        for item in Item.objects.filter(study=study, external_id__in=pending).exclude(gold_label="")
    }
    return next((found[external_id] for external_id in pending if external_id in found), None)


def training_left(user: User, study: Study) -> int:
    """How many training items the user still has to do."""
    if not study.training:
        return 0
    done = TrainingAnswer.objects.filter(study=study, annotator=user).count()
    return max(0, len(training_ids(study)) - done)


def screen_label(study: Study, label: str, left_system: str) -> str:
    """A stored (system-space) label as the annotator saw the choice: "List 1 much better" for a preference."""
    if not study.is_preference:
        return label.replace("_", " ")
    return preference_as_seen(label, list(study.systems), left_system)


def answer_training(
    *, user: User, study: Study, item: Item, answer: SubmittedAnswer, now: datetime | None = None
) -> Feedback:
    """Check the answer as any answer of the study, score it against gold, keep it (once), and say how it went.

    A second answer to the same training item (a double click, a reload) keeps the first.
    """
    check_can_train(user, study)
    if item.external_id not in training_ids(study) or not item.gold_label:
        raise ServiceError("this item is not one of the study's training items")
    shown = training_assignment(study, item, user)
    values = answer_values(study, shown, answer)
    try:
        with transaction.atomic():
            TrainingAnswer.objects.create(
                study=study,
                annotator=user,
                item=item,
                label=values.label,
                answer=values.snapshot(),
                correct=values.label == item.gold_label,
                active_ms=values.active_ms,
                answered_at=now or timezone.now(),
            )
    except IntegrityError:
        pass  # answered already: the first answer stands
    kept = TrainingAnswer.objects.get(study=study, annotator=user, item=item)
    return Feedback(
        item=item,
        given=screen_label(study, kept.label, shown.left_system),
        expected=screen_label(study, item.gold_label, shown.left_system),
        correct=kept.correct,
        explanation=_explanation(study, item.external_id),
        remaining=training_left(user, study),
    )


def training_accuracy(study: Study) -> list[dict[str, Any]]:
    """Per annotator (by pseudonym): training items answered and answered right."""
    names = pseudonyms(study)
    rows: dict[int, dict[str, Any]] = {}
    for user_id, correct in TrainingAnswer.objects.filter(study=study).values_list("annotator_id", "correct"):
        row = rows.setdefault(user_id, {"annotator": names[user_id], "n": 0, "correct": 0})
        row["n"] += 1
        row["correct"] += int(correct)
    return [
        {**row, "accuracy": row["correct"] / row["n"]} for row in sorted(rows.values(), key=lambda r: r["annotator"])
    ]
