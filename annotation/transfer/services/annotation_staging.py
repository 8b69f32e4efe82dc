"""Staging big annotation imports: labels go into a private temporary table, then live in one transaction.

Why, and how the temporary table works: annotation/lib/staging.py. The switch inserts the
submitted assignments and their annotations with two INSERT ... SELECT
statements, applies the few `--update` changes (each with its revision), and
recounts the slots of the items it touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from annotation.errors import ImportFailed
from annotation.lib.formats import RecordError
from annotation.lib.rawsql import Names
from annotation.lib.staging import stage_rows, temporary_table
from annotation.models import Annotation, Assignment, Item, StagedAnnotation, Study
from annotation.progress.counters import labels_switched, lock_staged_items

STAGED_FIELDS = [
    "line",
    "item_id",
    "annotator_id",
    "slot",
    "left_system",
    "queue_position",
    "label",
    "raw_label",
    "preferred_system",
    "strength",
    "choice",
    "justification",
    "evidence_judgements",
    "active_ms",
]
ASSIGNMENT_COLUMNS = ["item", "annotator", "slot", "queue_position", "left_system"]
#: The same columns in the staging table (a plain integer column for each relation).
STAGED_ASSIGNMENT_COLUMNS = ["item_id", "annotator_id", "slot", "queue_position", "left_system"]
ANSWER_COLUMNS = [
    "label",
    "raw_label",
    "preferred_system",
    "strength",
    "choice",
    "justification",
    "evidence_judgements",
    "active_ms",
]
MAX_REPORTED_CONFLICTS = 50


@dataclass(frozen=True)
class AnnotationStaging:
    """A temporary table holding one import's new labels (StagedAnnotation's columns)."""

    study: Study
    table: str  # quoted


@contextmanager
def annotation_staging_for(study: Study) -> Iterator[AnnotationStaging]:
    """A fresh temporary staging table for one annotation import, dropped afterwards."""
    assignment, annotation, staged = Names(Assignment), Names(Annotation), Names(StagedAnnotation)
    shape = (
        f"SELECT a.{assignment.queue_position} AS {staged.line}, "
        + ", ".join(f"a.{getattr(assignment, name)}" for name in ASSIGNMENT_COLUMNS)
        + ", "
        + ", ".join(f"n.{getattr(annotation, name)}" for name in ANSWER_COLUMNS)
        + f" FROM {assignment.table} AS a JOIN {annotation.table} AS n ON n.{annotation.assignment} = a.{assignment.id}"
        " WHERE 1 = 0"
    )
    with temporary_table(shape) as table:
        yield AnnotationStaging(study=study, table=table)


def stage_annotation_rows(staging: AnnotationStaging, rows: Sequence[tuple]) -> None:
    """Write labels (tuples in STAGED_FIELDS order) to the staging table; takes no lock others wait on."""
    stage_rows(StagedAnnotation, STAGED_FIELDS, staging.table, rows)


def switch_annotations_live(
    staging: AnnotationStaging, *, now: datetime, apply_updates: Callable[[], None] = lambda: None
) -> None:
    """Make the staged labels submitted assignments with annotations, in one transaction; or raise ImportFailed.

    `apply_updates` runs inside the same transaction (the `--update` changes
    to labels that already existed). Between staging and this switch an
    annotator may have been given one of the staged (item, annotator) pairs or
    slots: those lines are named and nothing changes.
    """
    study = staging.study
    assignment, annotation, staged = Names(Assignment), Names(Annotation), Names(StagedAnnotation)
    with transaction.atomic():
        Study.objects.select_for_update().get(pk=study.pk)
        conflicts = _taken_since(staging)
        if conflicts:
            raise ImportFailed(conflicts)
        lock_staged_items(staging.table)  # before the labels go in: see progress/counters.py
        stamp = connection.ops.adapt_datetimefield_value(now)
        assignment_columns = ", ".join(getattr(assignment, name) for name in ASSIGNMENT_COLUMNS)
        staged_assignment = ", ".join(getattr(staged, name) for name in STAGED_ASSIGNMENT_COLUMNS)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {assignment.table} ({assignment.study}, {assignment_columns}, {assignment.max_slots}, "
                f"{assignment.status}, {assignment.lease_expires_at}, {assignment.flagged}, {assignment.flag_reason}, "
                f"{assignment.created_at}, {assignment.submitted_at}, {assignment.updated_at}) "
                f"SELECT %s, {staged_assignment}, %s, %s, NULL, %s, '', %s, %s, %s "
                f"FROM {staging.table} ORDER BY {staged.line}",
                [study.pk, study.slots_per_item, Assignment.Status.SUBMITTED, False, stamp, stamp, stamp],
            )
            answer_columns = ", ".join(getattr(annotation, name) for name in ANSWER_COLUMNS)
            staged_answers = ", ".join(f"s.{getattr(staged, name)}" for name in ANSWER_COLUMNS)
            cursor.execute(
                f"INSERT INTO {annotation.table} ({annotation.assignment}, {annotation.study}, {answer_columns}, "
                f"{annotation.source}, {annotation.created_at}, {annotation.updated_at}) "
                f"SELECT a.{assignment.id}, a.{assignment.study}, {staged_answers}, %s, %s, %s FROM {staging.table} AS s "
                f"JOIN {assignment.table} AS a ON a.{assignment.item} = s.{staged.item_id} "
                f"AND a.{assignment.annotator} = s.{staged.annotator_id} ORDER BY s.{staged.line}",
                [Annotation.Source.IMPORT, stamp, stamp],
            )
        labels_switched(study, staging.table)
        apply_updates()
        _recount_touched_slots(staging)


def _taken_since(staging: AnnotationStaging) -> list[RecordError]:
    """Staged labels whose (item, annotator) or slot an annotator has been given since the file was read."""
    assignment, staged, item = Names(Assignment), Names(StagedAnnotation), Names(Item)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.{staged.line}, i.{item.external_id} FROM {staging.table} AS s "
            f"JOIN {item.table} AS i ON i.{item.id} = s.{staged.item_id} "
            f"WHERE EXISTS (SELECT 1 FROM {assignment.table} AS a WHERE a.{assignment.item} = s.{staged.item_id} "
            f"AND (a.{assignment.annotator} = s.{staged.annotator_id} OR a.{assignment.slot} = s.{staged.slot})) "
            f"ORDER BY s.{staged.line} LIMIT %s",
            [MAX_REPORTED_CONFLICTS],
        )
        rows = cursor.fetchall()
    return [
        RecordError(
            line,
            f"item {external_id!r} was given to an annotator while this file was being read, so the slot this "
            "label was to take is gone; import the file again",
            "item",
        )
        for line, external_id in rows
    ]


def _recount_touched_slots(staging: AnnotationStaging) -> None:
    """Set the slot counter of every item the import touched to the slots its assignments hold."""
    assignment, staged, item = Names(Assignment), Names(StagedAnnotation), Names(Item)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {item.table} SET {item.slots_taken} = (SELECT COUNT(*) FROM {assignment.table} AS a "
            f"WHERE a.{assignment.item} = {item.table}.{item.id} AND a.{assignment.slot} IS NOT NULL) "
            f"WHERE {item.id} IN (SELECT {staged.item_id} FROM {staging.table})"
        )
