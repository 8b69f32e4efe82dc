"""Recording an answer on an assignment, with its revision trail.

The one place where an Annotation is created or changed, so that every path
(web page, API, import) keeps the same invariants: system-space storage and
one AnnotationRevision per change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from ..models import ANSWER_FIELDS, Annotation, AnnotationRevision, Assignment


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
    active_ms: int | None = None

    def snapshot(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ANSWER_FIELDS}


def record_answer(
    *,
    assignment: Assignment,
    values: AnswerValues,
    source: str,
    changed_by: AbstractBaseUser | None = None,
) -> tuple[Annotation, bool]:
    """Create the assignment's annotation or change it; returns (annotation, changed).

    A change appends a revision with the old and new value; writing the same
    answer again changes nothing, so a repeated submit is harmless. The first
    answer is not a revision: its time is the annotation's `created_at`.
    Call inside the caller's transaction.
    """
    annotation = Annotation.objects.filter(assignment=assignment).first()
    if annotation is None:
        annotation = Annotation.objects.create(assignment=assignment, source=source, **_fields(values))
        return annotation, True
    old = annotation.snapshot()
    new = values.snapshot()
    if old == new:
        if values.active_ms is not None and values.active_ms != annotation.active_ms:
            annotation.active_ms = values.active_ms  # a timing is not an answer: no revision
            annotation.save(update_fields=["active_ms", "updated_at"])
            return annotation, True
        return annotation, False
    for name, value in _fields(values).items():
        setattr(annotation, name, value)
    annotation.save()
    AnnotationRevision.objects.create(annotation=annotation, old_value=old, new_value=new, changed_by=changed_by)
    return annotation, True


def _fields(values: AnswerValues) -> dict[str, Any]:
    return {**values.snapshot(), "active_ms": values.active_ms}
