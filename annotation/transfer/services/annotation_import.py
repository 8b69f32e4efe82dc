"""Importing annotations collected elsewhere into the study's own tables.

Imported labels land in Assignment + Annotation like labels made here, each on
a slot of its item, attributed to an annotator identity of the study, so that
every analysis sees one population of labels and the slot limit N still holds.
"""

from __future__ import annotations

from functools import partial
from typing import IO

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from annotation.errors import ErrorCollector, ImportResult
from annotation.lib.formats import MAX_LINE_BYTES, RecordError
from annotation.lib.randomisation import left_system_for, queue_position
from annotation.members.services import ensure_annotator_identities
from annotation.models import Annotation, Assignment, Item, Study, StudyMember
from annotation.signals import labels_imported
from annotation.transfer.faces import CLI, to_replace
from annotation.transfer.importers import AnnotationRow, parse_annotation
from annotation.transfer.services.annotation_staging import (
    annotation_staging_for,
    stage_annotation_rows,
    switch_annotations_live,
)
from annotation.workbench.answers import AnswerValues, record_answer

BATCH_SIZE = 2000


#: Why new labels cannot be imported where exact N holds per condition (updates of existing ones can).
PER_CONDITION_REFUSAL = (
    "this study holds N annotators per item in each condition (exact N per condition): an imported label "
    "belongs to no condition, so new labels cannot be imported; import them into a copy of the study whose "
    "exact N holds per item, or set that rule before the first answer"
)

#: Why new labels cannot be imported into an adaptive-overlap study (updates of existing ones can).
ADAPTIVE_REFUSAL = (
    "this study uses adaptive overlap (each item gets annotators until their answers agree): an imported "
    "label would skip the rule that opens and closes items, so new labels cannot be imported; import them "
    "into a copy of the study with a fixed N"
)


def import_annotations(
    *,
    study: Study,
    stream: IO[bytes],
    fmt: str,
    update: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    face: str = CLI,
) -> ImportResult:
    """Import annotations from a binary stream; raise ImportFailed on any problem.

    Items must exist already. A second label by the same annotator on the same
    item is an error unless `update` is given, in which case the annotation is
    changed and a revision recorded. New labels are staged while the file is
    read and switched live with the updates in one short transaction
    (annotation_staging.py), so annotators keep working during a big import.
    Annotator identities new to the study are made as the file is read and
    removed again if the import fails. `face` (transfer/faces.py): where the import was asked for, so
    an error that asks for `update` names it as that face does.
    """
    errors = ErrorCollector()
    result = ImportResult()
    now = timezone.now()
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
    identities = _Identities(study)
    seen: dict[tuple[int, str], int] = {}
    updates: list[tuple[int, AnnotationRow]] = []
    try:
        with annotation_staging_for(study) as staging:
            batch: list[tuple] = []
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
                        [
                            RecordError(
                                line, f"no item {row.item!r} in study {study.slug!r}; import the items first", "item"
                            )
                        ]
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
                user_id = identities.user_id(row.annotator)
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
                                    f"annotator {row.annotator!r} already has a label on item {row.item!r}; {to_replace(face)}",
                                    "annotator",
                                )
                            ]
                        )
                    elif not errors:
                        updates.append((assignment_pk, row))
                    continue
                if study.is_adaptive:
                    errors.extend([RecordError(line, ADAPTIVE_REFUSAL, "item")])
                    continue
                if study.slots_per_item != study.annotators_per_item:
                    # Each condition owns a range of an item's slots; an imported label has no condition
                    # and would take one of them, leaving that condition short of its N.
                    errors.extend([RecordError(line, PER_CONDITION_REFUSAL, "item")])
                    continue
                used = slots.setdefault(item_id, set())
                free = next((slot for slot in range(study.slots_per_item) if slot not in used), None)
                if free is None:
                    errors.extend(
                        [
                            RecordError(
                                line,
                                f"item {row.item!r} already has {study.slots_per_item} annotations, "
                                "the study's annotators per item",
                                "item",
                            )
                        ]
                    )
                    continue
                used.add(free)
                if errors:
                    continue  # the import will fail: check the rest, stage nothing more
                batch.append(_staged_label(study, line, item_id, row, user_id, free))
                result.created += 1
                if len(batch) >= BATCH_SIZE:
                    stage_annotation_rows(staging, batch)
                    batch.clear()
            if errors:
                raise errors.fail()
            stage_annotation_rows(staging, batch)

            def apply_updates() -> None:
                for assignment_pk, row in updates:
                    _update_existing(assignment_pk, row, result)

            switch_annotations_live(staging, now=now, apply_updates=apply_updates)
    except BaseException:
        identities.forget_new()
        raise
    transaction.on_commit(partial(labels_imported.send, sender=Study, study=study))
    return result


class _Identities:
    """Annotator names of the file -> user ids; identities new to the study are made at once (each in
    its own short transaction, so the import holds no lock while it reads) and removed again by
    `forget_new` when the import fails, so a failed import leaves no trace."""

    def __init__(self, study: Study) -> None:
        self.study = study
        self.ids: dict[str, int] = {}
        self.new: list[int] = []

    def user_id(self, name: str) -> int:
        if name not in self.ids:
            member = StudyMember.objects.filter(study=self.study, pseudonym=name).values_list("user_id", flat=True)
            known = member.first()
            if known is not None:
                self.ids[name] = known
            else:
                with transaction.atomic():
                    self.ids.update(ensure_annotator_identities(study=self.study, names=[name]))
                self.new.append(self.ids[name])
        return self.ids[name]

    def forget_new(self) -> None:
        """Remove the identities this import made (they hold no labels: the import changed nothing)."""
        if self.new:
            with transaction.atomic():
                StudyMember.objects.filter(study=self.study, user_id__in=self.new, is_external=True).delete()
                get_user_model().objects.filter(pk__in=self.new, is_active=False, assignments__isnull=True).delete()


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


def _staged_label(study: Study, line: int, item_id: int, row: AnnotationRow, user_id: int, slot: int) -> tuple:
    """A new label as a tuple in annotation_staging.STAGED_FIELDS order (see annotation/lib/bulk.py for why tuples)."""
    left = row.left_system
    if study.is_preference and not left:
        left = left_system_for(study.seed, row.item, slot, study.systems)
    return (
        line,
        item_id,
        user_id,
        slot,
        left,
        queue_position(study.seed, str(user_id), row.item),
        row.label,
        row.raw_label,
        row.preferred_system,
        row.strength,
        row.choice,
        row.justification,
        row.evidence_judgements,
        row.active_ms,
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


def _update_existing(assignment_id: int, row: AnnotationRow, result: ImportResult) -> None:
    assignment = Assignment.objects.get(pk=assignment_id)
    if row.left_system and row.left_system != assignment.left_system:
        assignment.left_system = row.left_system
        assignment.save(update_fields=["left_system", "updated_at"])
    _, changed = record_answer(assignment=assignment, values=_values(row), source=Annotation.Source.IMPORT)
    if changed:
        result.updated += 1
