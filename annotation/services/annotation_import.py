"""Importing annotations collected elsewhere into the study's own tables.

Imported labels land in Assignment + Annotation like labels made here, each on
a slot of its item, attributed to an annotator identity of the study, so that
every analysis sees one population of labels and the slot limit N still holds.
"""

from __future__ import annotations

from typing import IO

from django.db import transaction
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..bulk import insert_rows
from ..formats import MAX_LINE_BYTES, RecordError
from ..importers import AnnotationRow, parse_annotation
from ..models import Annotation, Assignment, Item, Study
from ..randomisation import left_system_for, queue_position
from .answers import AnswerValues, record_answer
from .errors import ErrorCollector, ImportResult
from .members import ensure_annotator_identities

BATCH_SIZE = 2000


def import_annotations(
    *,
    study: Study,
    stream: IO[bytes],
    fmt: str,
    update: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> ImportResult:
    """Import annotations from a binary stream; raise ImportFailed on any problem.

    Items must exist already. A second label by the same annotator on the same
    item is an error unless `update` is given, in which case the annotation is
    changed and a revision recorded.
    """
    errors = ErrorCollector()
    result = ImportResult()
    now = timezone.now()
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        items = dict(Item.objects.filter(study=study).values_list("external_id", "pk"))
        taken: dict[tuple[int, int], tuple[int, str]] = {}
        slots: dict[int, set[int]] = {}
        for assignment_pk, item_pk, user_pk, slot, status in Assignment.objects.filter(study=study).values_list(
            "pk", "item_id", "annotator_id", "slot", "status"
        ):
            taken[(item_pk, user_pk)] = (assignment_pk, status)
            if slot is not None:
                slots.setdefault(item_pk, set()).add(slot)
        passages = _PassageCounts(study)
        identities: dict[str, int] = {}
        seen: dict[tuple[int, str], int] = {}
        pending: list[tuple[tuple, AnnotationRow]] = []
        for line, record in errors.records(stream, fmt, result, max_line_bytes=max_line_bytes):
            row = parse_annotation(
                line,
                record,
                kind=study.kind,
                labels=study.labels,
                aliases=study.label_aliases,
                systems=study.systems,
                passages=passages,
            )
            if isinstance(row, list):
                errors.extend(row)
                continue
            item_id = items.get(row.item)
            if item_id is None:
                errors.extend(
                    [RecordError(line, f"no item {row.item!r} in study {study.slug!r}; import the items first", "item")]
                )
                continue
            if (item_id, row.annotator) in seen:
                errors.extend(
                    [
                        RecordError(
                            line,
                            f"annotator {row.annotator!r} already labelled item {row.item!r} on line {seen[(item_id, row.annotator)]}",
                            "annotator",
                        )
                    ]
                )
                continue
            seen[(item_id, row.annotator)] = line
            if row.annotator not in identities:
                identities.update(ensure_annotator_identities(study=study, names=[row.annotator]))
            user_id = identities[row.annotator]
            existing = taken.get((item_id, user_id))
            if existing is not None:
                assignment_pk, status = existing
                if status != Assignment.Status.SUBMITTED:
                    errors.extend(
                        [
                            RecordError(
                                line,
                                f"annotator {row.annotator!r} has an assignment on item {row.item!r} that is {status} in Claimlab; only submitted labels can be replaced",
                                "annotator",
                            )
                        ]
                    )
                elif not update:
                    errors.extend(
                        [
                            RecordError(
                                line,
                                f"annotator {row.annotator!r} already has a label on item {row.item!r}; use --update to replace it",
                                "annotator",
                            )
                        ]
                    )
                elif not errors:
                    _update_existing(assignment_pk, row, result)
                continue
            used = slots.setdefault(item_id, set())
            free = next((slot for slot in range(study.annotators_per_item) if slot not in used), None)
            if free is None:
                errors.extend(
                    [
                        RecordError(
                            line,
                            f"item {row.item!r} already has {study.annotators_per_item} annotations, the study's annotators per item",
                            "item",
                        )
                    ]
                )
                continue
            used.add(free)
            if errors:
                pending.clear()
                continue
            pending.append((_assignment(study, item_id, row, user_id, free, now), row))
            if len(pending) >= BATCH_SIZE:
                result.created += _flush(pending)
        errors.raise_if_any()
        result.created += _flush(pending)
        _recount_slots(study)
    return result


class _PassageCounts:
    """Evidence passages per item id, read on the first record that judges evidence (most files judge none)."""

    def __init__(self, study: Study) -> None:
        self.study = study
        self.counts: dict[str, int] | None = None

    def __call__(self, external_id: str) -> int | None:
        if self.counts is None:
            # Streamed: only the counts stay in memory, not the passages' text.
            rows = Item.objects.filter(study=self.study).values_list("external_id", "payload__evidence")
            self.counts = {item: len(evidence or []) for item, evidence in rows.iterator(chunk_size=BATCH_SIZE)}
        return self.counts.get(external_id)


ASSIGNMENT_FIELDS = [
    "study",
    "item",
    "annotator",
    "slot",
    "max_slots",
    "queue_position",
    "left_system",
    "status",
    "lease_expires_at",
    "flagged",
    "flag_reason",
    "created_at",
    "submitted_at",
    "updated_at",
]
ANNOTATION_FIELDS = [
    "assignment",
    "label",
    "raw_label",
    "preferred_system",
    "strength",
    "choice",
    "justification",
    "evidence_judgements",
    "active_ms",
    "source",
    "created_at",
    "updated_at",
]


def _assignment(study: Study, item_id: int, row: AnnotationRow, user_id: int, slot: int, now) -> tuple:
    """A submitted assignment as a tuple in ASSIGNMENT_FIELDS order."""
    left = row.left_system
    if study.is_preference and not left:
        left = left_system_for(study.seed, row.item, slot, study.systems)
    return (
        study.pk,
        item_id,
        user_id,
        slot,
        study.annotators_per_item,
        queue_position(study.seed, str(user_id), row.item),
        left,
        Assignment.Status.SUBMITTED,
        None,
        False,
        "",
        now,
        now,
        now,
    )


def _values(row: AnnotationRow) -> AnswerValues:
    return AnswerValues(
        label=row.label,
        raw_label=row.raw_label,
        preferred_system=row.preferred_system,
        strength=row.strength,
        choice=row.choice,
        justification=row.justification,
        evidence_judgements=row.evidence_judgements,
        active_ms=row.active_ms,
    )


def _flush(pending: list[tuple[tuple, AnnotationRow]]) -> int:
    """Write a batch of new assignments, then their annotations (fast path: annotation/bulk.py)."""
    if not pending:
        return 0
    insert_rows(Assignment, ASSIGNMENT_FIELDS, [assignment for assignment, _ in pending])
    item_ids = {assignment[1] for assignment, _ in pending}
    ids = {
        (item_id, annotator_id): pk
        for item_id, annotator_id, pk in Assignment.objects.filter(item_id__in=item_ids).values_list(
            "item_id", "annotator_id", "pk"
        )
    }
    now = pending[0][0][-1]
    insert_rows(
        Annotation,
        ANNOTATION_FIELDS,
        (
            (
                ids[(assignment[1], assignment[2])],
                row.label,
                row.raw_label,
                row.preferred_system,
                row.strength,
                row.choice,
                row.justification,
                row.evidence_judgements,
                row.active_ms,
                Annotation.Source.IMPORT,
                now,
                now,
            )
            for assignment, row in pending
        ),
    )
    count = len(pending)
    pending.clear()
    return count


def _update_existing(assignment_id: int, row: AnnotationRow, result: ImportResult) -> None:
    assignment = Assignment.objects.get(pk=assignment_id)
    if row.left_system and row.left_system != assignment.left_system:
        assignment.left_system = row.left_system
        assignment.save(update_fields=["left_system", "updated_at"])
    _, changed = record_answer(assignment=assignment, values=_values(row), source=Annotation.Source.IMPORT)
    if changed:
        result.updated += 1


def _recount_slots(study: Study) -> None:
    """Set each item's slot counter to the slots its assignments hold."""
    held = (
        Assignment.objects.filter(item=OuterRef("pk"), slot__isnull=False)
        .order_by()
        .values("item")
        .annotate(n=Count("pk"))
        .values("n")
    )
    Item.objects.filter(study=study).update(slots_taken=Coalesce(Subquery(held), 0))
