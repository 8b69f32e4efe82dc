"""Handing out items to annotators and taking their answers (DESIGN §5).

`claim_next` gives each annotator one active assignment at a time: their own
(lease renewed), else an expired one reclaimed from someone else, else a fresh
slot on the item with the most slots taken, so items in progress finish first.
Slots are counted with a conditional UPDATE and guarded by the constraints on
Assignment, so no item ever gets more than N annotators even if this code
races. `submit` is a conditional UPDATE on the user's own active assignment:
a double click stores one annotation; a lost lease is a LeaseLost (HTTP 409).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from ..models import Annotation, Assignment, Item, Study, StudyMember
from ..randomisation import keyed_hash, left_system_for, queue_position
from ..vocab import EVIDENCE_JUDGEMENTS, PREFERENCE_BOTH_BAD
from .answers import AnswerValues, record_answer
from .errors import ServiceError

#: Fresh items considered per claim; the annotator's keyed hash picks among them.
CANDIDATES = 32
PREFERENCE_CHOICES = ("left_strong", "left_slight", "tie", "right_slight", "right_strong", PREFERENCE_BOTH_BAD)
MAX_TEXT = 10_000


class LeaseLost(ServiceError):
    """The assignment is no longer the user's to answer (HTTP 409)."""


class NotAllowed(ServiceError):
    """The user may not annotate in this study (not an annotator, or it is not open)."""


def lease_length() -> timedelta:
    return timedelta(seconds=getattr(settings, "ANNOTATION_LEASE_SECONDS", 30 * 60))


def _check_can_annotate(user: AbstractBaseUser, study: Study) -> None:
    if study.status != Study.Status.OPEN:
        raise NotAllowed(f"the study {study.slug!r} is {study.status}, not open for annotation")
    is_annotator = StudyMember.objects.filter(study=study, user=user, role=StudyMember.Role.ANNOTATOR).exists()
    if not is_annotator:
        raise NotAllowed("only the study's annotators can annotate")


def claim_next(*, user: AbstractBaseUser, study: Study, now: datetime | None = None) -> Assignment | None:
    """The user's current assignment, or a new one; None when nothing is left for them."""
    _check_can_annotate(user, study)
    now = now or timezone.now()
    for _ in range(5):  # a lost race on a candidate just means: try the next one
        try:
            with transaction.atomic():
                assignment = _claim(user, study, now)
            return assignment
        except IntegrityError:
            continue
    return None


def _claim(user: AbstractBaseUser, study: Study, now: datetime) -> Assignment | None:
    expires = now + lease_length()
    own = Assignment.objects.filter(study=study, annotator=user, status=Assignment.Status.ACTIVE).first()
    if own is not None:
        Assignment.objects.filter(pk=own.pk).update(lease_expires_at=expires, updated_at=now)
        own.lease_expires_at = expires
        return own
    mine = Assignment.objects.filter(study=study, annotator=user).values("item_id")
    expired = (
        Assignment.objects.filter(study=study, status=Assignment.Status.ACTIVE, lease_expires_at__lt=now)
        .exclude(item_id__in=mine)
        .order_by("lease_expires_at", "pk")
        .values_list("pk", "item__external_id")[:CANDIDATES]
    )
    for assignment_id, external_id in expired:
        taken = Assignment.objects.filter(
            pk=assignment_id, status=Assignment.Status.ACTIVE, lease_expires_at__lt=now
        ).update(
            annotator=user,
            lease_expires_at=expires,
            queue_position=queue_position(study.seed, str(user.pk), external_id),
            created_at=now,
            updated_at=now,
        )
        if taken:
            return Assignment.objects.select_related("item").get(pk=assignment_id)
    return _fresh_slot(user, study, now, expires, mine)


def _fresh_slot(user, study: Study, now: datetime, expires: datetime, mine) -> Assignment | None:
    candidates = Item.objects.filter(study=study, slots_taken__lt=study.annotators_per_item).exclude(id__in=mine)
    if connection.features.has_select_for_update_skip_locked:
        candidates = candidates.select_for_update(skip_locked=True)
    rows = list(candidates.order_by("-slots_taken", "position", "pk").values_list("pk", "external_id", "slots_taken")[:CANDIDATES])
    if not rows:
        return None
    top = rows[0][2]
    tier = [row for row in rows if row[2] == top]  # breadth-first: only items with the most slots taken
    tier.sort(key=lambda row: keyed_hash(study.seed, "pick", str(user.pk), row[1]))
    for item_id, external_id, _ in tier:
        bumped = Item.objects.filter(pk=item_id, slots_taken__lt=study.annotators_per_item).update(
            slots_taken=F("slots_taken") + 1
        )
        if not bumped:
            continue
        used = set(Assignment.objects.filter(item_id=item_id, slot__isnull=False).values_list("slot", flat=True))
        slot = next(number for number in range(study.annotators_per_item) if number not in used)
        return Assignment.objects.create(
            study=study,
            item_id=item_id,
            annotator=user,
            slot=slot,
            max_slots=study.annotators_per_item,
            queue_position=queue_position(study.seed, str(user.pk), external_id),
            left_system=left_system_for(study.seed, external_id, slot, study.systems),
            status=Assignment.Status.ACTIVE,
            lease_expires_at=expires,
        )
    return None


@dataclass
class SubmittedAnswer:
    """What the annotator sent, before it is checked and turned into system space."""

    label: str = ""
    choice: str = ""
    justification: str = ""
    evidence: list[dict[str, Any]] | None = None
    active_ms: int | None = None


def answer_values(study: Study, assignment: Assignment, answer: SubmittedAnswer) -> AnswerValues:
    """Check an answer against the study and store it in system space, never as left/right."""
    justification = (answer.justification or "").strip()
    if len(justification) > MAX_TEXT:
        raise ServiceError(f"the justification is {len(justification):,} characters; the limit is {MAX_TEXT:,}")
    if study.justification_required and not justification:
        raise ServiceError("this study asks for a justification with every answer")
    active_ms = answer.active_ms
    if active_ms is not None and not (isinstance(active_ms, int) and 0 <= active_ms <= 2**31 - 1):
        raise ServiceError("active_ms must be a whole number of milliseconds")
    if study.is_preference:
        return _preference_values(study, assignment, answer.choice, justification, active_ms)
    label = (answer.label or "").strip()
    if label not in study.labels:
        raise ServiceError(f"label must be one of {', '.join(study.labels)}, got {label!r}")
    evidence = _evidence_judgements(study, assignment.item, answer.evidence)
    return AnswerValues(
        label=label, raw_label=label, choice=label, justification=justification,
        evidence_judgements=evidence, active_ms=active_ms,
    )


def _preference_values(study: Study, assignment: Assignment, choice: str, justification: str, active_ms: int | None) -> AnswerValues:
    choice = (choice or "").strip()
    if choice not in PREFERENCE_CHOICES:
        raise ServiceError(f"choice must be one of {', '.join(PREFERENCE_CHOICES)}, got {choice!r}")
    if choice == "tie" and not study.tie_allowed:
        raise ServiceError("this study does not allow a tie")
    if choice == PREFERENCE_BOTH_BAD and not study.both_bad_allowed:
        raise ServiceError("this study does not offer 'both bad'")
    systems = list(study.systems)
    if choice in ("tie", PREFERENCE_BOTH_BAD):
        return AnswerValues(label=choice, raw_label=choice, choice=choice, justification=justification, active_ms=active_ms)
    side, strength = choice.split("_", 1)
    left = assignment.left_system or systems[0]
    right = next(system for system in systems if system != left)
    preferred = left if side == "left" else right
    label = f"{'a' if systems.index(preferred) == 0 else 'b'}_{strength}"
    if label not in study.labels:
        raise ServiceError(f"{label!r} is not one of the study's labels")
    return AnswerValues(
        label=label, raw_label=choice, preferred_system=preferred, strength=strength,
        choice=choice, justification=justification, active_ms=active_ms,
    )


def _evidence_judgements(study: Study, item: Item, given: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    if not given:
        return []
    if not study.evidence_judgements:
        raise ServiceError("this study does not ask for evidence judgements")
    passages = item.payload.get("evidence", [])
    judgements: dict[int, dict[str, Any]] = {}
    for entry in given:
        if not isinstance(entry, dict):
            raise ServiceError("each evidence judgement must be an object with 'index' and 'judgement'")
        index, judgement, useful = entry.get("index"), entry.get("judgement"), entry.get("useful", False)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(passages):
            raise ServiceError(f"evidence index must be 0..{len(passages) - 1}, got {index!r}")
        if judgement not in EVIDENCE_JUDGEMENTS:
            raise ServiceError(f"evidence judgement must be one of {', '.join(EVIDENCE_JUDGEMENTS)}, got {judgement!r}")
        if not isinstance(useful, bool):
            raise ServiceError("'useful' must be true or false")
        if index in judgements:
            raise ServiceError(f"evidence passage {index} is judged twice")
        judgements[index] = {"index": index, "judgement": judgement, "useful": useful}
    return [judgements[index] for index in sorted(judgements)]


def _own_assignment(user: AbstractBaseUser, study: Study, assignment_id: int) -> Assignment:
    assignment = Assignment.objects.select_for_update().select_related("item").filter(pk=assignment_id, study=study).first()
    if assignment is None:
        raise LeaseLost("no such assignment in this study")
    if assignment.annotator_id != user.pk:
        raise LeaseLost("this item is no longer assigned to you: your time on it ran out and another annotator took it over")
    return assignment


def submit(
    *, user: AbstractBaseUser, study: Study, assignment_id: int, answer: SubmittedAnswer, source: str = Annotation.Source.WEB,
    now: datetime | None = None,
) -> Assignment:
    """Store the answer on the user's own assignment; repeat-safe.

    Active: the answer is stored and the assignment submitted, in one
    transaction. Already submitted by this user: the answer is changed (with a
    revision) or, when identical, left alone, so a double click is harmless.
    """
    now = now or timezone.now()
    with transaction.atomic():
        assignment = _own_assignment(user, study, assignment_id)
        if assignment.status == Assignment.Status.SKIPPED:
            raise LeaseLost("you skipped this item; it cannot be answered now")
        values = answer_values(study, assignment, answer)
        if assignment.status == Assignment.Status.ACTIVE:
            updated = Assignment.objects.filter(
                pk=assignment.pk, annotator=user, status=Assignment.Status.ACTIVE
            ).update(status=Assignment.Status.SUBMITTED, submitted_at=now, lease_expires_at=None, updated_at=now)
            if not updated:
                raise LeaseLost("this item is no longer assigned to you")
            assignment.status, assignment.submitted_at = Assignment.Status.SUBMITTED, now
        record_answer(assignment=assignment, values=values, source=source, changed_by=user)
    return assignment


def skip(*, user: AbstractBaseUser, study: Study, assignment_id: int, now: datetime | None = None) -> Assignment:
    """Give the item back: its slot is freed for someone else, and never served to this user again."""
    now = now or timezone.now()
    with transaction.atomic():
        assignment = _own_assignment(user, study, assignment_id)
        if assignment.status == Assignment.Status.SKIPPED:
            return assignment
        if assignment.status != Assignment.Status.ACTIVE:
            raise LeaseLost("this item is already answered; it cannot be skipped")
        Assignment.objects.filter(pk=assignment.pk, status=Assignment.Status.ACTIVE).update(
            status=Assignment.Status.SKIPPED, slot=None, lease_expires_at=None, updated_at=now
        )
        Item.objects.filter(pk=assignment.item_id, slots_taken__gt=0).update(slots_taken=F("slots_taken") - 1)
        assignment.refresh_from_db()
    return assignment


def flag(*, user: AbstractBaseUser, study: Study, assignment_id: int, reason: str) -> Assignment:
    """Mark an item as problematic (broken text, offensive, impossible) with a reason."""
    reason = (reason or "").strip()
    if not reason:
        raise ServiceError("say why the item is flagged")
    if len(reason) > MAX_TEXT:
        raise ServiceError(f"the reason is too long (limit {MAX_TEXT:,} characters)")
    with transaction.atomic():
        assignment = _own_assignment(user, study, assignment_id)
        Assignment.objects.filter(pk=assignment.pk).update(flagged=True, flag_reason=reason, updated_at=timezone.now())
        assignment.flagged, assignment.flag_reason = True, reason
    return assignment
