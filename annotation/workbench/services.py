"""Handing out items to annotators and taking their answers (docs/architecture.md, Mechanisms).

`claim_next` gives each annotator one active assignment at a time: their own
(lease renewed), else an expired one reclaimed from someone else, else a fresh
slot on an item with the most slots taken, so items in progress finish first.

Why it cannot over-assign, even when this code races:

- a user's claims are serialised by locking their StudyMember row (PostgreSQL;
  SQLite's IMMEDIATE transactions serialise every writer anyway), so a double
  click cannot hand one user two items. On PostgreSQL the common claim (a
  fresh slot for a user who holds nothing) needs no transaction: its one
  statement takes that lock itself and goes on only if no other claim of the
  user committed since its snapshot (`_claim_alone`);
- a fresh slot is taken by `UPDATE item SET slots_taken = slots_taken + 1
  WHERE slots_taken < N` on a row locked with `FOR UPDATE SKIP LOCKED` (other
  claimers move on to another item instead of queueing);
- the constraints on Assignment (unique (item, annotator), unique (item, slot),
  slot < N) refuse whatever slipped through; a lost race is retried.

A reclaimed lease does not move the old row to the new annotator: the old
assignment is closed as skipped (slot given up, `lease_expires_at` kept as the
mark of a lease that ran out) and a new one takes the same slot number and
left/right placement. So the first annotator is never served that item again,
their late submit is a clear LeaseLost (HTTP 409), and the slot's
counterbalancing is unchanged.

`submit` is a conditional UPDATE on the user's own active assignment: a double
click stores one annotation; submitting again on one's own submitted
assignment with a different answer is the "back" flow and appends a revision.

Every query here is bounded by the number of candidates (CANDIDATES), the rows
a walk may look at (WALK) or the user's own active assignments, never by the size
of the study: candidates come from the (study, is_check, slots_taken, claim_rank) index scanned from
the top, and "not one of mine" is a NOT EXISTS probe of the (item, annotator)
unique index.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, TypeVar

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from annotation.conditions.services import claimable_slots
from annotation.errors import ServiceError
from annotation.lib.dblocks import UNAVAILABLE, close_broken_connections, database_fault
from annotation.lib.lease_commit import commit_without_waiting, lease_only_commit_applies
from annotation.lib.randomisation import left_system_for, queue_position, side_coin
from annotation.models import MAX_ACTIVE_MS, Annotation, Assignment, Item, Study
from annotation.progress.quality_counters import close_leases, closed_counted
from annotation.questions.answers import checked_question_answers
from annotation.questions.definitions import asks_per_claim
from annotation.vocab import (
    PREFERENCE_BOTH_BAD,
    PREFERENCE_CHOICES,
    PREFERENCE_TIE,
    preference_choice_parts,
    preference_label,
)
from annotation.workbench import assignment_sql as sql
from annotation.workbench import submit_sql
from annotation.workbench.answers import AnswerValues, answer_fields, record_answer, record_first_answer
from annotation.workbench.evidence import InvalidEvidence, checked_judgements
from annotation.workbench.selectors import annotator_progress, progress_counts, progress_from_counts

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Fresh items considered per claim; the annotator's keyed-hash order picks among them.
CANDIDATES = 32
#: Rows of the (study, is_check, slots_taken, claim_rank) index a claim looks at for them, at most, per level of slots taken
#: (assignment_sql.fresh_candidates): what bounds a claim of an annotator far ahead of the others.
WALK = 64
#: Attempts when a claim loses a race (each attempt is its own transaction, with a short pause between).
CLAIM_ATTEMPTS = 10
MAX_TEXT = 10_000

Status = Assignment.Status
#: Assignments closed because their lease ran out and another annotator took the slot over.
LOST_LEASE = Q(status=Status.SKIPPED, lease_expires_at__isnull=False)


class LeaseLost(ServiceError):
    """The assignment is no longer the user's to answer (HTTP 409)."""


class NotAllowed(ServiceError):
    """The user may not annotate in this study (not an annotator, or it is not open)."""


class ClaimContention(ServiceError):
    """Every attempt to claim (or to store an answer or skip) lost a race; the client should retry (HTTP 503),
    not conclude it is done."""


def lease_length() -> timedelta:
    return timedelta(seconds=settings.ANNOTATION_LEASE_SECONDS)


#: Why a study that is not open hands out nothing, by status.
NOT_OPEN_REASONS: dict[str, str] = {
    Study.Status.DRAFT: "is a draft: annotation starts when a researcher opens it",
    Study.Status.PAUSED: "is paused: no new items are handed out until a researcher resumes it",
    Study.Status.CLOSED: "is closed: annotation has ended",
    Study.Status.ARCHIVED: "is archived: annotation has ended",
}


def not_open_reason(study: Study) -> str:
    """Why no item is handed out in this study (for the page and the API)."""
    reason = NOT_OPEN_REASONS.get(study.status, f"is {study.status}")
    return f"the study {study.slug!r} is not open for annotation: it {reason}"


def _check_can_annotate(user: User, study: Study, *, lock: bool = False, paused_ok: bool = False) -> None:
    """Refuse studies that are not open and non-annotators; with `lock`, serialise this user's claims.

    The lock is on the user's StudyMember row, so two claims by one user (two
    tabs, a double click) run one after the other and the second sees the
    first one's assignment. Call inside a transaction when locking. With
    `paused_ok`, a paused study passes too (its leases are kept).
    """
    allowed = (Study.Status.OPEN, Study.Status.PAUSED) if paused_ok else (Study.Status.OPEN,)
    if study.status not in allowed:
        raise NotAllowed(not_open_reason(study))
    if sql.annotator_member_id(study.pk, user.pk, lock=lock) is None:
        raise NotAllowed("only the study's annotators can annotate")


class _Busy(Exception):
    """Every candidate is being claimed by someone else right now: retry, do not say "nothing left"."""


#: PostgreSQL's SQLSTATEs for a transaction it rolled back to break a deadlock or a serialisation conflict.
RETRYABLE_SQLSTATES = {"40P01", "40001"}


def _lost_race(exc: Exception) -> bool:
    """Whether a claim's failure is a race another claim won: a constraint said no, every candidate was
    locked, or PostgreSQL chose this transaction as a deadlock's victim.

    Why deadlocks: two claims on one item (one taking over an expired lease, one taking a fresh slot)
    can each wait for the other's uncommitted row in the (item, slot) unique index. PostgreSQL rolls
    one of them back whole, so it is retried like any lost race."""
    return isinstance(exc, IntegrityError | _Busy) or _deadlock_victim(exc)


def _deadlock_victim(exc: Exception) -> bool:
    """Whether PostgreSQL rolled this transaction back to break a deadlock (or a serialisation conflict).

    Why answers, skips and releases meet it too: they lock their assignment and then its item (the
    counters, the freed slot), while a claim locks an item and then waits on that item's other
    assignments, so under load PostgreSQL may pick either as the victim."""
    return isinstance(exc, OperationalError) and getattr(exc.__cause__, "sqlstate", None) in RETRYABLE_SQLSTATES


def _retrying(
    write: Callable[[], T], *, lost: Callable[[Exception], bool], what: str, user: User, study: Study, gave_up: str
) -> T:
    """Run `write` (its own transaction) again, after a short pause, while it fails by losing a race (`lost`).

    A lost transaction is rolled back whole, with its locks, so running it again is safe; any other
    error is not ours to retry. After CLAIM_ATTEMPTS losses, ClaimContention (`gave_up`): the API
    answers 503 with Retry-After, and the workbench's background sender tries again.
    """
    for attempt in range(CLAIM_ATTEMPTS):
        try:
            return _reconnecting(write, what=what)
        except (IntegrityError, _Busy, OperationalError) as exc:
            if not lost(exc):
                raise
            logger.debug(
                "%s by user %s in study %s lost a race (attempt %d of %d): %s",
                what,
                user.pk,
                study.slug,
                attempt + 1,
                CLAIM_ATTEMPTS,
                type(exc).__name__,
            )
            time.sleep(random.uniform(0.001, 0.005) * (attempt + 1))
    logger.warning(
        "%s by user %s in study %s gave up after %d lost races; the client is told to retry",
        what,
        user.pk,
        study.slug,
        CLAIM_ATTEMPTS,
        extra={"study": study.slug, "attempts": CLAIM_ATTEMPTS},
    )
    raise ClaimContention(gave_up)


#: How long a claim or answer cut off by a lost connection (a PostgreSQL restart or failover) is
#: tried again on a new one before the client gets 503 database_unavailable; and the pause between.
RECONNECT_SECONDS = 5.0
RECONNECT_PAUSE_SECONDS = 0.25


def _reconnecting(write: Callable[[], T], *, what: str) -> T:
    """`write()` (its own transaction), run again on a new connection when its connection was lost.

    Why: a database restart cuts the claims and answers in flight; each was rolled back whole or,
    if only the commit's acknowledgement was lost, committed, and both services are repeat-safe
    (a claim returns the user's current assignment, an identical answer is left alone), so running
    it again here is what the workbench's outbox would do after a 503, minus the annotator's wait.
    Inside a caller's transaction nothing is retried (the caller's work was lost too).
    """
    deadline = time.monotonic() + RECONNECT_SECONDS
    while True:
        try:
            return write()
        except (OperationalError, InterfaceError) as exc:
            if database_fault(exc) != UNAVAILABLE or connection.in_atomic_block or time.monotonic() >= deadline:
                raise
            logger.warning("%s: the database connection was lost (%s); trying again on a new one", what, exc)
            close_broken_connections()
            time.sleep(RECONNECT_PAUSE_SECONDS)


def _retrying_deadlocks(write: Callable[[], T], *, what: str, user: User, study: Study) -> T:
    """An answer, skip or release, run again when it was a deadlock's victim (`_deadlock_victim`)."""
    gave_up = f"too many annotators are working on this item at this moment; the {what} was not saved, send it again"
    return _retrying(write, lost=_deadlock_victim, what=what, user=user, study=study, gave_up=gave_up)


def claim_next(
    *, user: User, study: Study, now: datetime | None = None, ahead_of: int | None = None
) -> Assignment | None:
    """The user's current assignment, or a new one; None when nothing is left for them.

    With `ahead_of` (the user's active assignment on screen), the one after it: the workbench
    fetches the next item while the annotator works on this one (issue 15). Its lease is renewed
    too; LeaseLost when it is no longer the user's. An annotator holds at most these two: the
    one after is their other active assignment if they have one, so reloads claim nothing more.
    A paused study hands nothing out ahead. In a study with conditions, the user's first claim
    gives them their condition (conditions.services: balanced, for good). Where exact N holds per
    item across conditions, items are handed out as in any study; where it holds per condition,
    the user takes only slots of their condition's range (`claimable_slots`).
    """
    now = now or timezone.now()
    slots = claimable_slots(user, study) if study.conditions else None  # the first gives the user their condition
    if ahead_of is None and study.status == Study.Status.OPEN and connection.vendor == "postgresql":
        alone = _reconnecting(lambda: _claim_alone(user, study, now, slots), what="claim")
        if alone is not None:
            _unless_closed_meanwhile(alone, user, study)
            alone.study = study
            return alone

    def claim() -> Assignment | None:
        lease_only = lease_only_commit_applies()
        with transaction.atomic():
            if lease_only:
                commit_without_waiting()
            _check_can_annotate(user, study, lock=True, paused_ok=True)
            if ahead_of is not None:
                if not sql.renew_own_lease(ahead_of, user.pk, now + lease_length(), now):
                    raise LeaseLost("the item on your screen is no longer assigned to you")
                paused = study.status == Study.Status.PAUSED
                return None if paused else _claim(user, study, now, slots, exclude_id=ahead_of)
            if study.status == Study.Status.PAUSED:
                return _keep_own_lease(user, study, now)
            return _claim(user, study, now, slots)

    assignment = _retrying(
        claim,
        lost=_lost_race,
        what="claim",
        user=user,
        study=study,
        gave_up="too many annotators are claiming at this moment; try again in a second",
    )
    if assignment is not None:
        _unless_closed_meanwhile(assignment, user, study)
        assignment.study = study  # callers render it; spare a query
    return assignment


#: Statuses in which an active lease may stand (a paused study keeps them).
LEASE_STATUSES = (Study.Status.OPEN, Study.Status.PAUSED)


def _unless_closed_meanwhile(assignment: Assignment, user: User, study: Study) -> None:
    """Give the claimed lease back, and refuse, when the study was closed while the claim ran.

    Why: a claim reads the study's status when the request starts; a close that commits after
    that read releases the leases it sees, not one committed later. Read after the claim has
    committed, the status is the close's if the close committed first; a claim that committed
    before the close is released by the close (`change_status` releases again once committed).
    So no lease outlives a close. Costs one primary-key read per claim.
    """
    current = Study.objects.filter(pk=study.pk).values_list("status", flat=True).first()
    if current in LEASE_STATUSES:
        return

    def give_back() -> None:
        with transaction.atomic():
            if close_leases([assignment.pk], timezone.now()):
                sql.give_slot_back(assignment.item_id)

    _retrying_deadlocks(give_back, what="release", user=user, study=study)
    study.status = current or study.status
    raise NotAllowed(not_open_reason(study))


def next_after_submit(user: User, study: Study, holding: int | None) -> tuple[Assignment | None, bool]:
    """What to show after an answer, claimed in the same request: (next, holding lost).

    Without `holding`, the user's current assignment (as `claim_next`). With it (the assignment
    the client fetched ahead and now shows), the one after it; when the held one is no longer
    theirs, their current one instead and "holding lost" is true, so the client can say so.
    """
    if holding is None:
        return claim_next(user=user, study=study), False
    try:
        return claim_next(user=user, study=study, ahead_of=holding), False
    except LeaseLost:
        return claim_next(user=user, study=study), True


def release_ahead(*, user: User, study: Study, assignment_id: int, updated_at: datetime) -> bool:
    """Give back an item fetched ahead that the annotator never saw (they left the page).

    The row is deleted and the slot freed, as if it had never been claimed: unlike a skip, the
    item may come back to this annotator later. Only when it is still exactly as handed out
    (`updated_at` unchanged) and is not the user's oldest active assignment, so an item on
    someone's screen is never taken away. False when nothing was released (its lease then runs out).
    """

    def release() -> bool:
        with transaction.atomic():
            item_id = sql.delete_unseen_ahead(assignment_id, study.pk, user.pk, updated_at)
            if item_id is None:
                return False
            sql.give_slot_back(item_id)
        return True

    try:
        return _retrying_deadlocks(release, what="release", user=user, study=study)
    except ClaimContention:
        return False


def _keep_own_lease(user: User, study: Study, now: datetime) -> Assignment:
    """A paused study: the user's own active assignment (lease renewed), or a refusal saying why."""
    own = (
        Assignment.objects.filter(study=study, annotator=user, status=Status.ACTIVE)
        .order_by("pk")
        .values_list("pk", flat=True)
        .first()
    )
    if own is not None and sql.renew_lease(own, now + lease_length(), now):
        assignment = sql.assignment_with_item(own)
        if assignment is not None:
            return assignment
    raise NotAllowed(not_open_reason(study))


def _claim(
    user: User, study: Study, now: datetime, slots: range | None, *, exclude_id: int | None = None
) -> Assignment | None:
    """The claim in the caller's transaction; `slots` the slot numbers the user may take (None: any)."""
    expires = now + lease_length()
    # One query for all: the user's own active assignment (sorted first), then leases that ran
    # out on items the user has not had, oldest first; and the fresh candidates, for when neither is.
    rows, fresh = sql.claim_candidates(
        study.pk, user.pk, now, study.slots_per_item, CANDIDATES, WALK, exclude_id=exclude_id, slots=slots
    )
    if rows and rows[0][1] == user.pk:
        own_id = rows.pop(0)[0]
        if sql.renew_lease(own_id, expires, now):
            return sql.assignment_with_item(own_id)
    for assignment_id, annotator_id, item_id, slot, left_system in rows:
        if annotator_id == user.pk:
            continue  # another of the user's own (a third tab): not someone else's lease to reclaim
        # Reclaim, conditionally: of two reclaimers (or the owner renewing), exactly one wins.
        if sql.close_expired(assignment_id, now):
            closed_counted([assignment_id])  # a lease that ran out, in its annotator's counters
            return _create(user, study, sql.item(item_id), slot, left_system, expires, now)
    return _fresh_slot(user, study, fresh or _fresh_further_down(user, study, slots), expires, now, slots)


def _fresh_further_down(user: User, study: Study, slots: range | None) -> list[tuple[int, str, int]]:
    """Fresh candidates when the first `WALK` rows at the top of the index held none (an annotator
    far ahead of the others, whose unfinished items fill the top): walks from each lower level of
    slots taken, in one statement, until some are found; none when nothing is left for the user.
    A user who skipped more than `WALK` items in a row has them at the top of the lowest level:
    when the walks find nothing, one walk of the whole index decides.

    Each walk is bounded, so a claim costs at most N of them however far ahead the annotator is.
    Items the user has not had are still taken most slots first, except those that stand behind
    more than `WALK` of the user's own at the same level.
    """
    # Walks that found nothing may have stopped at WALK of the user's own or skipped items:
    # "nothing left" is said only after a walk of the whole index (once, at the user's end).
    return _walk_lower_levels(user, study, slots) or sql.every_fresh_candidate(
        study.pk, user.pk, study.slots_per_item, CANDIDATES, slots
    )


def _walk_lower_levels(user: User, study: Study, slots: range | None) -> list[tuple[int, str, int]]:
    """The bounded walks of `_fresh_further_down`, from each level of slots taken below the top."""
    return sql.fresh_candidates(study.pk, user.pk, study.slots_per_item - 1, CANDIDATES, WALK, slots)


def _claim_alone(user: User, study: Study, now: datetime, slots: range | None) -> Assignment | None:
    """PostgreSQL: the common claim, a fresh slot for a user who holds nothing, without a transaction.

    Two statements (the candidates, then `sql.claim_first_free_slot` with `alone`, which locks the
    user's membership itself and checks that no claim of theirs committed since its snapshot)
    in place of five (BEGIN, the membership lock, the candidates, the claim, COMMIT). None when
    anything else applies (an item of their own or a lease to reclaim, nothing fresh, a guard or a
    race that says no, a counter to repair): the caller then claims in a transaction, as before,
    which says why. Of the claim nothing is written unless it is made (the membership row may have
    been rewritten by the lock, which changes none of its values).
    """
    own_or_expired, fresh = sql.claim_candidates(
        study.pk, user.pk, now, study.slots_per_item, CANDIDATES, WALK, slots=slots
    )
    if own_or_expired:
        return None
    # Not the walk of the whole index: when the bounded walks find nothing, the transactional claim
    # that follows makes it, once (twice was a whole-index read per request of a user who is done).
    fresh = fresh or _walk_lower_levels(user, study, slots)
    if not fresh:
        return None
    positions = _ranked(user, study, fresh)
    lease_only = lease_only_commit_applies()
    try:
        with transaction.atomic() if connection.in_atomic_block else nullcontext():  # a savepoint in a transaction
            return _fresh_slot_in_one_statement(
                user, study, fresh, positions, now + lease_length(), now, slots, alone=True, lease_only=lease_only
            )
    except (sql.NotAlone, _Busy):
        return None
    except (IntegrityError, OperationalError) as exc:
        if not _lost_race(exc):
            raise
        return None


def _ranked(user: User, study: Study, rows: list[tuple[int, str, int]]) -> dict[int, int]:
    """Sort the fresh candidates (id, external id, slots taken) in claim order: most slots taken
    first, then the annotator's keyed-hash queue position; the positions by item id."""
    key = str(user.pk)
    positions = {pk: queue_position(study.seed, key, external_id) for pk, external_id, _ in rows}
    rows.sort(key=lambda row: (-row[2], positions[row[0]]))
    return positions


def _fresh_slot(
    user: User, study: Study, rows: list[tuple[int, str, int]], expires: datetime, now: datetime, slots: range | None
) -> Assignment | None:
    """A new slot on an item with the most slots taken among those the user has not had.

    The candidates come from the top of the (study, is_check, slots_taken, claim_rank) index: at most
    CANDIDATES of them from at most WALK rows per level of slots taken, so the cost
    grows neither with the study nor with how far ahead the annotator is. Among items
    equally far along, the annotator's keyed-hash queue position decides.
    """
    n = study.slots_per_item
    if not rows:
        return None
    positions = _ranked(user, study, rows)
    if connection.vendor == "postgresql":
        assignment = _fresh_slot_in_one_statement(user, study, rows, positions, expires, now, slots)
        if assignment is not None:
            return assignment
    for item in _lock_candidates([pk for pk, _, _ in rows], n):
        if not sql.take_slot(item.pk, n):
            continue
        held = sql.held_slots(item.pk)
        free = [number for number in (slots or range(n)) if number not in held]
        if not free:
            # The counter was behind the slots actually held (e.g. edited by hand), or (exact N per
            # condition) the user's range filled since the candidates were read: the counter is
            # set to the slots held (this claim's bump undone), and the next candidate tried.
            sql.set_slots_taken(item.pk, len(held))
            continue
        left_system = left_system_for(study.seed, item.external_id, free[0], study.systems)
        return _create(user, study, item, free[0], left_system, expires, now)
    return None


def _fresh_slot_in_one_statement(
    user: User,
    study: Study,
    rows: list[tuple[int, str, int]],
    positions: dict[int, int],
    expires: datetime,
    now: datetime,
    slots: range | None,
    *,
    alone: bool = False,
    lease_only: bool = False,
) -> Assignment | None:
    """PostgreSQL: lock, bump, pick the slot and insert in one statement (sql.claim_first_free_slot).

    The keyed hashes (queue positions, by item id, and side coins) are computed here, where the
    seed's BLAKE2b is; the coins only where there are two systems to place (they place nothing
    else). None only when a counter needed repair, and the step-by-step path then repairs it.
    With `alone`, the statement is the whole claim (`_claim_alone`); sql.NotAlone when it may not be;
    with `lease_only` too, its commit does not wait for the disk (lib/lease_commit.py).
    """
    two = len(study.systems) == 2
    candidates = [(pk, positions[pk], side_coin(study.seed, external_id) if two else 0) for pk, external_id, _ in rows]
    values = _assignment_values(user, study, expires, now)
    try:
        item, assignment_id, slot, left_system = sql.claim_first_free_slot(
            candidates, values, study.systems, study.slots_per_item, alone=alone, slots=slots, lease_only=lease_only
        )
    except LookupError:
        raise _Busy from None
    if assignment_id is None:
        return None
    assignment = Assignment(
        pk=assignment_id,
        **{
            **values,
            "item_id": item.pk,
            "slot": slot,
            "left_system": left_system,
            "queue_position": positions[item.pk],
        },
    )
    assignment._state.adding = False
    assignment._state.db = connection.alias
    assignment.item = item
    return assignment


def _lock_candidates(ordered_ids: list[int], n: int) -> Iterator[Item]:
    """The candidate items to try, in order; on PostgreSQL only the first one nobody else holds, locked.

    `FOR UPDATE SKIP LOCKED ... LIMIT 1` locks exactly one row: an item that
    another claimer is bumping is stepped around rather than queued behind,
    and the other candidates stay free for other claimers. It never waits
    for a lock: claimers visit candidates in different (per-annotator)
    orders, and a row PostgreSQL locked but then dropped on its recheck stays
    locked, so waiting could deadlock; when everything is held the claim is
    retried instead (_Busy). SQLite has no row locks; its IMMEDIATE
    transactions already serialise the claims, so the first candidate wins.
    """
    remaining = list(ordered_ids)
    while remaining:
        item = sql.first_unlocked_item(remaining, n)
        if item is None:
            if connection.features.has_select_for_update_skip_locked:
                raise _Busy
            return
        yield item
        remaining = remaining[remaining.index(item.pk) + 1 :]  # only asked for again if it could not be used


def _assignment_values(user: User, study: Study, expires: datetime, now: datetime) -> dict[str, Any]:
    """The columns of a new active assignment that do not depend on the item."""
    return {
        "study_id": study.pk,
        "annotator_id": user.pk,
        "max_slots": study.slots_per_item,
        "status": Status.ACTIVE,
        "lease_expires_at": expires,
        "flagged": False,
        "flag_reason": "",
        "created_at": now,
        "submitted_at": None,
        "updated_at": now,
    }


def _create(
    user: User, study: Study, item: Item, slot: int, left_system: str, expires: datetime, now: datetime
) -> Assignment:
    """The assignment row, with its randomisation computed from the seed and stored."""
    assignment = sql.create_assignment(
        {
            **_assignment_values(user, study, expires, now),
            "item_id": item.pk,
            "slot": slot,
            "queue_position": queue_position(study.seed, str(user.pk), item.external_id),
            "left_system": left_system,
        }
    )
    assignment.item = item
    return assignment


@dataclass
class SubmittedAnswer:
    """What the annotator sent, before it is checked and turned into system space."""

    label: str = ""
    choice: str = ""
    justification: str = ""
    evidence: list[Any] | None = None  # untrusted until checked_judgements has read it
    questions: Any = None  # the extra questions' answers in screen space; untrusted until checked
    active_ms: int | None = None


def answer_values(study: Study, assignment: Assignment, answer: SubmittedAnswer) -> AnswerValues:
    """Check an answer against the study and store it in system space, never as left/right."""
    passages = len(assignment.item.payload.get("evidence", [])) if study.evidence_judgements else 0
    claim_counts = shown_claim_counts(study, assignment) if asks_per_claim(study.questions) else ()
    return checked_answer(
        study, answer, left_system=assignment.left_system, passages=passages, claim_counts=claim_counts
    )


def shown_claim_counts(study: Study, assignment: Assignment) -> tuple[int, ...]:
    """How many claims List 1 and List 2 of the assignment's item show (what per-claim questions answer)."""
    lists = assignment.item.payload.get("lists", {})
    return tuple(len(lists.get(system, [])) for system in shown_systems(study, assignment.left_system))


def shown_systems(study: Study, left_system: str) -> tuple[str, ...]:
    """The systems shown as List 1 and List 2 (preference studies; none for verification)."""
    if not study.is_preference or len(study.systems) != 2:
        return ()
    left = left_system or study.systems[0]
    return (left, study.systems[1] if left == study.systems[0] else study.systems[0])


def checked_answer(
    study: Study, answer: SubmittedAnswer, *, left_system: str, passages: int, claim_counts: Sequence[int] = ()
) -> AnswerValues:
    """`answer_values` from what the answer depends on: the system the assignment shows on the left
    (preference studies), its item's number of evidence passages (counted when the study asks for
    a judgement of each) and the number of claims of each list (when a question asks about each claim)."""
    values = _checked_main_answer(study, answer, left_system=left_system, passages=passages)
    values.question_answers = checked_question_answers(
        study.questions, answer.questions, shown=shown_systems(study, left_system), claim_counts=claim_counts
    )
    return values


def _checked_main_answer(study: Study, answer: SubmittedAnswer, *, left_system: str, passages: int) -> AnswerValues:
    justification = (answer.justification or "").strip()
    if len(justification) > MAX_TEXT:
        raise ServiceError(f"the justification is {len(justification):,} characters; the limit is {MAX_TEXT:,}")
    if study.justification_required and not justification:
        raise ServiceError("this study asks for a justification with every answer")
    active_ms = answer.active_ms
    if active_ms is not None and (
        isinstance(active_ms, bool) or not isinstance(active_ms, int) or not 0 <= active_ms <= MAX_ACTIVE_MS
    ):
        raise ServiceError("active_ms must be a whole number of milliseconds")
    if study.is_preference:
        return _preference_values(study, left_system, answer.choice, justification, active_ms)
    label = (answer.label or "").strip()
    if label not in study.labels:
        raise ServiceError(f"label must be one of {', '.join(study.labels)}, got {label!r}")
    evidence = _evidence_judgements(study, passages, answer.evidence)
    return AnswerValues(
        label=label,
        raw_label=label,
        choice=label,
        justification=justification,
        evidence_judgements=evidence,
        active_ms=active_ms,
    )


def _preference_values(
    study: Study, left_system: str, choice: str, justification: str, active_ms: int | None
) -> AnswerValues:
    choice = (choice or "").strip()
    if choice not in PREFERENCE_CHOICES:
        raise ServiceError(f"choice must be one of {', '.join(PREFERENCE_CHOICES)}, got {choice!r}")
    if choice == PREFERENCE_TIE and not study.tie_allowed:
        raise ServiceError("this study does not allow a tie")
    if choice == PREFERENCE_BOTH_BAD and not study.both_bad_allowed:
        raise ServiceError("this study does not offer 'both bad'")
    systems = list(study.systems)
    if len(systems) != 2:
        raise ServiceError("this preference study does not declare its two systems")
    position, strength = preference_choice_parts(choice)
    if position is None:  # tie or both bad: the same in screen and system space
        return AnswerValues(
            label=choice, raw_label=choice, choice=choice, justification=justification, active_ms=active_ms
        )
    left = left_system or systems[0]
    shown = (left, systems[1] if left == systems[0] else systems[0])
    preferred = shown[position]
    label = preference_label(systems.index(preferred), strength)
    if label not in study.labels:
        raise ServiceError(f"{label!r} is not one of the study's labels")
    return AnswerValues(
        label=label,
        raw_label=choice,
        preferred_system=preferred,
        strength=strength,
        choice=choice,
        justification=justification,
        active_ms=active_ms,
    )


def _evidence_judgements(study: Study, passages: int, given: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """One judgement per passage when the study asks for them, none otherwise: the same rule
    for the web form and the API, so a study's answers are complete for the credibility scores."""
    if not given:
        if passages:
            raise ServiceError(
                f"this study asks for a judgement of every evidence passage: send 'evidence' with index 0..{passages - 1}"
            )
        return []
    if not study.evidence_judgements:
        raise ServiceError("this study does not ask for evidence judgements")
    try:
        return checked_judgements(given, passages, complete=True)
    except InvalidEvidence as exc:
        raise ServiceError(str(exc)) from None


def lease_ran_out(assignment: Assignment) -> bool:
    """Closed because its lease expired and someone else took the slot (not skipped by its annotator)."""
    return assignment.status == Status.SKIPPED and assignment.lease_expires_at is not None


def _own_assignment(user: User, study: Study, assignment_id: int) -> Assignment:
    """The user's assignment, locked for the rest of the transaction.

    NotAllowed when the study is neither open nor paused (a paused study keeps
    its leases, so what was handed out can still be answered) or the user is
    not (any more) one of its annotators; LeaseLost when the assignment is not
    theirs. The membership check rides along in the same query.
    """
    if study.status not in (Study.Status.OPEN, Study.Status.PAUSED):
        raise NotAllowed(not_open_reason(study))
    found = sql.locked_for_answer(assignment_id, study.pk, user.pk)
    if found is None:
        raise LeaseLost("no such assignment in this study")
    assignment, user_is_annotator = found
    if not user_is_annotator:
        raise NotAllowed("only the study's annotators can annotate")
    if assignment.annotator_id != user.pk:
        raise LeaseLost("this assignment is not yours: it belongs to another annotator")
    if lease_ran_out(assignment):
        logger.info(
            "user %s answered assignment %s in study %s after its lease ran out or was taken back",
            user.pk,
            assignment.pk,
            study.slug,
            extra={"study": study.slug, "assignment": assignment.pk},
        )
        raise LeaseLost(
            "this item is no longer assigned to you: your time on it ran out, or the study's researchers took it "
            "back (the study closed, or the item became a check), and it may go to another annotator"
        )
    assignment.study = study
    return assignment


def submit(
    *,
    user: User,
    study: Study,
    assignment_id: int,
    answer: SubmittedAnswer,
    source: str = Annotation.Source.WEB,
    now: datetime | None = None,
    shown_left: str | None = None,
) -> Assignment:
    """Store the answer on the user's own assignment; repeat-safe.

    Active (even with an expired lease that nobody took over): the answer is
    stored and the assignment submitted, in one transaction. Already submitted
    by this user: the answer is changed with a revision ("back" to revise) or,
    when identical, left alone, so a double click is harmless.

    `shown_left`: the assignment's `left_system` as the caller read it; in a preference
    study it lets the common submit be one statement on PostgreSQL (`_submit_in_one_statement`).
    """
    given = _Given(user, study, assignment_id, answer, source, now or timezone.now(), shown_left)
    return _submit(given, with_progress=False)[0]


class Submitted(NamedTuple):
    assignment: Assignment
    progress: dict[str, int | bool]


def submit_with_progress(
    *,
    user: User,
    study: Study,
    assignment_id: int,
    answer: SubmittedAnswer,
    source: str = Annotation.Source.WEB,
    shown_left: str | None = None,
) -> Submitted:
    """`submit`, and the annotator's progress after it (what the answer's response shows).

    On PostgreSQL's common submit the progress is read by the answer's own statement, as of
    before its writes (one round trip less per label); otherwise by `annotator_progress` after it.
    """
    given = _Given(user, study, assignment_id, answer, source, timezone.now(), shown_left)
    assignment, progress = _submit(given, with_progress=True)
    return Submitted(assignment, progress if progress is not None else annotator_progress(user, study))


@dataclass(frozen=True)
class _Given:
    """One answer as `submit` and `submit_with_progress` were given it."""

    user: User
    study: Study
    assignment_id: int
    answer: SubmittedAnswer
    source: str
    now: datetime
    shown_left: str | None


def _submit(given: _Given, *, with_progress: bool) -> tuple[Assignment, dict[str, int | bool] | None]:
    """The answer stored (`submit`), and the progress when it was read with it (`submit_with_progress`)."""

    def write() -> tuple[Assignment, dict[str, int | bool] | None]:
        in_one = _submit_in_one_statement(given, with_progress)
        if in_one is not None:
            return in_one
        stored = _submit_once(given.user, given.study, given.assignment_id, given.answer, given.source, given.now)
        return stored, None

    return _retrying_deadlocks(write, what="answer", user=given.user, study=given.study)


def _submit_in_one_statement(
    given: _Given, with_progress: bool
) -> tuple[Assignment, dict[str, int | bool] | None] | None:
    """PostgreSQL's common submit: the answer checked first against what it depends on (the side
    shown on the left, the number of evidence passages given), then stored with the assignment's
    submit in one statement that requires both of the assignment (workbench/submit_sql.py); with
    `with_progress`, the annotator's progress after it, read by the same statement.

    None when that was not done (another database, an answer that does not check, anything the
    statement requires that does not hold): `_submit_once` then does it step by step, or says why not.
    """
    study, answer, shown_left = given.study, given.answer, given.shown_left
    if connection.vendor != "postgresql" or study.status not in (Study.Status.OPEN, Study.Status.PAUSED):
        return None
    if study.is_preference and shown_left is None:
        return None
    if asks_per_claim(study.questions):
        return None  # the answer depends on the item's claim counts, which the step-by-step path reads
    if study.is_adaptive:
        return None  # the answer closes its item or opens a slot (workbench/adaptive.py), step by step
    # Untrusted evidence that is not a list: presumed none, so the check refuses it and the step-by-step path says why.
    passages = len(answer.evidence) if study.evidence_judgements and isinstance(answer.evidence, list) else 0
    try:
        values = checked_answer(study, answer, left_system=shown_left or "", passages=passages)
    except ServiceError:
        return None  # `_submit_once` refuses it, after the checks that come first
    now = given.now
    done = submit_sql.submit_with_first_answer(
        assignment_id=given.assignment_id,
        study_id=study.pk,
        user_id=given.user.pk,
        answer={**answer_fields(values), "source": given.source, "created_at": now, "updated_at": now},
        now=now,
        left_system=shown_left if study.is_preference else None,
        passages=passages if study.evidence_judgements else None,
        also_read=progress_counts(study, given.user.pk) if with_progress else None,
    )
    if done is None:
        return None
    assignment, counts = done
    assignment.study = study
    if not with_progress:
        return assignment, None
    answered, active, had_unfinished, unfinished = counts
    # Counted as of before the statement's writes, when this assignment was still active.
    return assignment, progress_from_counts(answered + 1, active - 1, had_unfinished, unfinished)


def _submit_own_active(user: User, study: Study, assignment_id: int, now: datetime) -> Assignment | None:
    """The step-by-step submit's first statement: the user's own active assignment, marked submitted (locked).

    None when it is not that (answered, skipped, lost, someone else's, the user no longer an
    annotator, the study neither open nor paused): `_own_assignment` then says why, or finds
    the answered assignment that a repeated submit revises.
    """
    if study.status not in (Study.Status.OPEN, Study.Status.PAUSED):
        return None
    assignment = sql.submit_own_active(assignment_id, study.pk, user.pk, now)
    if assignment is not None:
        assignment.study = study
    return assignment


def _submit_once(
    user: User, study: Study, assignment_id: int, answer: SubmittedAnswer, source: str, now: datetime
) -> Assignment:
    with transaction.atomic():
        submitted = _submit_own_active(user, study, assignment_id, now)
        if submitted is not None:
            # Checked after the UPDATE: a refused answer raises, and the rollback takes the UPDATE back.
            values = answer_values(study, submitted, answer)
            record_first_answer(assignment=submitted, values=values, source=source, now=now)
            return submitted
        assignment = _own_assignment(user, study, assignment_id)
        if assignment.status == Status.SKIPPED:
            raise LeaseLost("you skipped this item; it cannot be answered now")
        values = answer_values(study, assignment, answer)
        if assignment.status == Status.ACTIVE:
            if not sql.mark_submitted(assignment.pk, user.pk, now):
                # unreachable while the row lock holds; kept so a change there cannot overwrite silently
                logger.warning("submit of assignment %s lost it despite the row lock", assignment.pk)
                raise LeaseLost("this item is no longer assigned to you")
            assignment.status, assignment.submitted_at, assignment.lease_expires_at = Status.SUBMITTED, now, None
            # An active assignment has no answer yet (answers are only stored with this
            # status change), so the first answer is inserted without looking for one.
            record_first_answer(assignment=assignment, values=values, source=source, now=now)
        else:
            record_answer(assignment=assignment, values=values, source=source, changed_by=user)
    return assignment


def skip(*, user: User, study: Study, assignment_id: int, now: datetime | None = None) -> Assignment:
    """Give the item back: its slot is freed for someone else, and never served to this user again."""
    now = now or timezone.now()
    return _retrying_deadlocks(lambda: _skip_once(user, study, assignment_id, now), what="skip", user=user, study=study)


def _skip_once(user: User, study: Study, assignment_id: int, now: datetime) -> Assignment:
    with transaction.atomic():
        assignment = _own_assignment(user, study, assignment_id)
        if assignment.status == Status.SKIPPED:
            return assignment
        if assignment.status != Status.ACTIVE:
            raise LeaseLost("this item is already answered; it cannot be skipped")
        marked = sql.mark_skipped(assignment.pk, now)
        sql.give_slot_back(assignment.item_id)
        if marked:  # a skip pressed (not by a crowd participant), counted last: the order a submit locks in
            closed_counted([assignment.pk])
        assignment.status, assignment.slot, assignment.lease_expires_at = Status.SKIPPED, None, None
    return assignment


def flag(*, user: User, study: Study, assignment_id: int, reason: str) -> Assignment:
    """Mark an item as problematic (broken text, offensive, impossible) with a reason.

    Flagging neither answers nor skips: the annotator still does one or the other.
    """
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
