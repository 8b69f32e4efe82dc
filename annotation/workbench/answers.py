"""Recording an answer on an assignment, with its revision trail.

The one place where an Annotation is changed, and where it is created but for PostgreSQL's
one-statement submit (workbench/submit_sql.py, which stores `answer_fields` the same way), so
that every path (web page, API, import) keeps the same invariants: system-space storage and
one AnnotationRevision per change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import connection

from annotation.models import ANSWER_FIELDS, Annotation, AnnotationRevision, Assignment
from annotation.progress.counters import CountedItem, answer_added, count_on_item, insert_locking_item
from annotation.progress.quality_counters import CountedAnswer, answer_revised
from annotation.workbench.adaptive import answer_decides


@dataclass
class AnswerValues:
    """An answer in system space, as the services store it."""

    label: str
    raw_label: str = ""
    preferred_system: str = ""
    strength: str = ""
    choice: str = ""
    justification: str = ""
    evidence_judgements: list[dict[str, Any]] = field(default_factory=list)
    question_answers: dict[str, Any] = field(default_factory=dict)
    active_ms: int | None = None

    def snapshot(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ANSWER_FIELDS}


def record_answer(
    *,
    assignment: Assignment,
    values: AnswerValues,
    source: str,
    changed_by: User | None = None,
) -> tuple[Annotation, bool]:
    """Create the assignment's annotation or change it; returns (annotation, changed).

    A change appends a revision with the old and new value; writing the same
    answer again changes nothing, so a repeated submit is harmless. The first
    answer is not a revision: its time is the annotation's `created_at`.
    Call inside the caller's transaction.
    """
    annotation = Annotation.objects.filter(assignment=assignment).first()
    if annotation is None:
        annotation = Annotation.objects.create(
            assignment=assignment, study_id=assignment.study_id, source=source, **answer_fields(values)
        )
        _count_answer(assignment, count_on_item(assignment.item_id), values, source)
        return annotation, True
    old = annotation.snapshot()
    new = values.snapshot()
    counted = CountedAnswer(annotation.label, annotation.active_ms, annotation.source)
    if old == new:
        if values.active_ms is not None and values.active_ms != annotation.active_ms:
            annotation.active_ms = values.active_ms  # a timing is not an answer: no revision
            annotation.save(update_fields=["active_ms", "updated_at"])
            answer_revised(assignment, counted, CountedAnswer(annotation.label, values.active_ms, annotation.source))
            return annotation, True
        return annotation, False
    for name, value in answer_fields(values).items():
        setattr(annotation, name, value)
    annotation.save()
    answer_revised(assignment, counted, CountedAnswer(annotation.label, annotation.active_ms, annotation.source))
    AnnotationRevision.objects.create(annotation=annotation, old_value=old, new_value=new, changed_by=changed_by)
    return annotation, True


def record_first_answer(*, assignment: Assignment, values: AnswerValues, source: str, now: datetime) -> Annotation:
    """Store the answer of an assignment that has none yet (the submit of an active one).

    One INSERT, without looking for an existing answer first: the annotator
    submits many of these per minute (see annotation/lib/rawsql.py). Should an
    answer exist after all, the unique assignment column refuses the row.
    Call inside the caller's transaction, as its last write: the counter row it
    updates (progress/counters.py) stays locked until the commit.
    """
    fields = {
        **answer_fields(values),
        "assignment_id": assignment.pk,
        "study_id": assignment.study_id,
        "source": source,
        "created_at": now,
        "updated_at": now,
    }
    pk, item = insert_locking_item(fields, assignment.item_id)
    _count_answer(assignment, item, values, source)
    annotation = Annotation(pk=pk, **fields)
    annotation._state.adding = False
    annotation._state.db = connection.alias
    return annotation


def _count_answer(assignment: Assignment, item: CountedItem, values: AnswerValues, source: str) -> None:
    """Count the new answer in the progress counters, its item counted on and locked already; in an
    adaptive-overlap study the answer first closes the item or opens a slot (`adaptive.answer_decides`)."""
    complete_at = assignment.max_slots
    if assignment.study.is_adaptive:
        complete_at = answer_decides(assignment.study, assignment.item_id)
    answer_added(
        study_id=assignment.study_id,
        item_id=assignment.item_id,
        user_id=assignment.annotator_id,
        complete_at=complete_at,
        answer=CountedAnswer(values.label, values.active_ms, source),
        item=item,
    )


def answer_fields(values: AnswerValues) -> dict[str, Any]:
    """The Annotation's answer fields, as stored."""
    return {**values.snapshot(), "active_ms": values.active_ms}
