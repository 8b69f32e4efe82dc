"""Reads for the Prolific page and API: a study's Prolific submissions matched to its Claimlab participants,
what Claimlab suggests doing with each, which participants already have a bonus through Claimlab, and
the log of calls.

The submissions themselves come from Prolific (prolific_services.fetch_submissions); here they are
only joined with what Claimlab knows: the participant with that Prolific ID (PROLIFIC_PID is the
link's panel ID), how they ended, their checks, their active and wall minutes and their pay
(crowd/selectors.payment_rows, the payment table's own numbers).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from annotation.crowd.prolific_client import PAY_PATH, RETRIES, SETUP_BONUSES_PATH
from annotation.crowd.selectors import PaymentRow, payment_rows
from annotation.models import Participant, ParticipantCheck, ParticipantLink, ProlificCall, Study

#: Prolific's submission statuses (SubmissionShort.status), as it writes them.
AWAITING_REVIEW = "AWAITING REVIEW"
APPROVED = "APPROVED"
WAITING = ("RESERVED", "ACTIVE")
#: Submissions a bonus may go to: the participant took part and was not rejected or returned.
BONUSABLE = (AWAITING_REVIEW, APPROVED)

Status = Participant.Status


def prolific_status(submission: dict[str, Any]) -> str:
    """A submission's status as Prolific writes it in lists ("AWAITING REVIEW"; filters say AWAITING_REVIEW)."""
    return str(submission.get("status") or "").replace("_", " ").upper()


@dataclass(frozen=True)
class Suggestion:
    """What Claimlab's record suggests doing with a submission: approve, reject (with a category), review
    (a person decides), wait (still going) or none (already decided on Prolific)."""

    action: str
    reason: str
    category: str = ""


@dataclass(frozen=True)
class BonusState:
    """A bonus Claimlab set up for a participant: ``paid`` (Prolific took the payment), ``pending`` (a call
    is on its way), ``unknown`` (a pay call got no clear answer: check on Prolific). Any of them keeps
    the participant out of further bonuses from Claimlab, so nobody is paid twice."""

    state: str
    amount: Decimal


@dataclass
class SubmissionRow:
    submission_id: str
    panel_id: str
    prolific_status: str
    started_at: str
    completed_at: str
    study_code: str
    participant: Participant | None
    payment: PaymentRow | None
    attention_failed: int
    suggestion: Suggestion
    bonus: BonusState | None = None

    @property
    def pseudonym(self) -> str:
        return self.payment.pseudonym if self.payment else ""

    @property
    def outcome(self) -> str:
        """The participant's Claimlab status (completed, screened_out, timed_out, ...; '' for no participant)."""
        return self.participant.status if self.participant else ""

    @property
    def outcome_label(self) -> str:
        return Status(self.outcome).label if self.participant else "No Claimlab participant"

    @property
    def awaiting_review(self) -> bool:
        return self.prolific_status == AWAITING_REVIEW


@dataclass
class SubmissionTable:
    rows: list[SubmissionRow]
    #: Claimlab participants with no submission in the Prolific study (arrived with another ID, or tests).
    unmatched: list[PaymentRow] = field(default_factory=list)

    @property
    def awaiting_review(self) -> int:
        return sum(1 for row in self.rows if row.awaiting_review)

    def suggested(self, action: str) -> list[SubmissionRow]:
        return [row for row in self.rows if row.suggestion.action == action]

    @property
    def suggested_counts(self) -> dict[str, int]:
        """Suggestion -> submissions (approve, reject, review, wait, none), for the page's summary."""
        counts = dict.fromkeys(("approve", "reject", "review", "wait", "none"), 0)
        for row in self.rows:
            counts[row.suggestion.action] += 1
        return counts


def _suggest(status: str, participant: Participant | None, attention_failed: int, link: ParticipantLink) -> Suggestion:
    if status in WAITING:
        return Suggestion("wait", "still taking part on Prolific")
    if status != AWAITING_REVIEW:
        return Suggestion("none", f"already {status.lower() or 'decided'} on Prolific")
    if participant is None:
        return Suggestion(
            "review",
            "no Claimlab participant has this Prolific ID: they never arrived through the link "
            "(NO_DATA, if they did not take part)",
        )
    outcome = participant.status
    if outcome == Status.COMPLETED:
        failed = f"; {attention_failed} attention check(s) failed, below the limit" if attention_failed else ""
        return Suggestion("approve", f"completed their quota in Claimlab{failed}")
    if outcome == Status.SCREENED_OUT:
        if link.attention_fail_limit and attention_failed >= link.attention_fail_limit:
            return Suggestion(
                "reject",
                f"failed {attention_failed} attention check(s) in Claimlab (the link screens out at "
                f"{link.attention_fail_limit})",
                "FAILED_CHECK",
            )
        return Suggestion(
            "review",
            "screened out by the qualification: Prolific does not allow rejecting a screen-out; approve, "
            "or ask them to return the submission",
        )
    if outcome == Status.TIMED_OUT:
        return Suggestion("review", "ran out of the link's time limit in Claimlab before finishing")
    if outcome == Status.WITHDRAWN:
        return Suggestion("review", "withdrew in Claimlab: ask them to return the submission")
    return Suggestion("wait", f"still in Claimlab ({Status(outcome).label.lower()})")


def submission_table(study: Study, link: ParticipantLink, submissions: list[dict[str, Any]]) -> SubmissionTable:
    """Prolific's submissions, each with its Claimlab participant (by Prolific ID), record and suggestion."""
    payments = {row.panel_id: row for row in payment_rows(study, link)}
    attention_failed = dict(
        ParticipantCheck.objects.filter(participant__study=study, kind=ParticipantCheck.Kind.ATTENTION, correct=False)
        .values("participant_id")
        .annotate(n=Count("id"))
        .values_list("participant_id", "n")
    )
    bonuses = bonus_states(study)
    rows = []
    for submission in submissions:
        panel_id = str(submission.get("participant_id") or submission.get("participant") or "")
        payment = payments.get(panel_id)
        participant = payment.participant if payment else None
        failed = attention_failed.get(participant.pk, 0) if participant else 0
        status = prolific_status(submission)
        rows.append(
            SubmissionRow(
                submission_id=str(submission["id"]),
                panel_id=panel_id,
                prolific_status=status,
                started_at=str(submission.get("started_at") or ""),
                completed_at=str(submission.get("completed_at") or ""),
                study_code=str(submission.get("study_code") or submission.get("entered_code") or ""),
                participant=participant,
                payment=payment,
                attention_failed=failed,
                suggestion=_suggest(status, participant, failed, link),
                bonus=bonuses.get(panel_id),
            )
        )
    seen = {row.panel_id for row in rows}
    return SubmissionTable(rows=rows, unmatched=[row for pid, row in payments.items() if pid not in seen])


# --- bonuses already set up through Claimlab, from the call log ------------------------------


def bonus_lines(csv_bonuses: str) -> dict[str, Decimal]:
    """Prolific ID -> amount of a ``csv_bonuses`` text (``<participant_id>,<amount>`` per line)."""
    lines: dict[str, Decimal] = {}
    for record in csv.reader(io.StringIO(csv_bonuses)):
        if len(record) != 2:
            continue
        try:
            lines[record[0].strip()] = Decimal(record[1].strip())
        except InvalidOperation:
            continue
    return lines


def _in_flight() -> timedelta:
    """How long a call may still be on its way: after that, one with no answer recorded never got one."""
    return timedelta(seconds=2 * float(settings.PROLIFIC_API_TIMEOUT_SECONDS) * (1 + RETRIES) + 60)


def _pay_state(pays: list[ProlificCall]) -> str | None:
    """What the pay calls of one bulk payment say: paid, unknown, pending, or None (refused: nothing paid)."""
    states = set()
    for call in pays:
        if call.status_code is not None and 200 <= call.status_code < 300:
            states.add("paid")
        elif call.status_code is None and not call.error:
            states.add("pending")
        elif call.status_code is None or call.status_code >= 500:
            states.add("unknown")  # a timeout, a lost connection, a server error: it may have gone through
    for state in ("paid", "unknown", "pending"):
        if state in states:
            return state
    return None


def bonus_states(study: Study) -> dict[str, BonusState]:
    """Prolific ID -> the bonus Claimlab set up for them, for every participant who has one that was paid,
    may have been paid, or is on its way (the log's set-up and pay calls are the record)."""
    calls = list(
        ProlificCall.objects.filter(study=study, method="POST")
        .filter(Q(path=SETUP_BONUSES_PATH) | Q(path__startswith="/api/v1/bulk-bonus-payments/"))
        .order_by("at", "id")
    )
    pays: dict[str, list[ProlificCall]] = {}
    for call in calls:
        match = PAY_PATH.match(call.path)
        if match:
            pays.setdefault(match.group(1), []).append(call)
    recent = timezone.now() - _in_flight()
    rank = {"pending": 1, "unknown": 2, "paid": 3}
    states: dict[str, BonusState] = {}
    for call in calls:
        if call.path != SETUP_BONUSES_PATH or not isinstance(call.request_body, dict):
            continue
        answered = call.status_code is not None and 200 <= call.status_code < 300
        bulk_id = call.response_body.get("id") if answered and isinstance(call.response_body, dict) else None
        if bulk_id is not None:
            state = _pay_state(pays.get(str(bulk_id), []))
            if state is None and not pays.get(str(bulk_id)) and call.at >= recent:
                state = "pending"  # set up a moment ago: its pay call is about to go
        elif call.status_code is None and not call.error and call.at >= recent:
            state = "pending"  # the set-up call itself is on its way
        else:
            state = None  # never set up: nothing was paid
        if state is None:
            continue
        for panel_id, amount in bonus_lines(str(call.request_body.get("csv_bonuses", ""))).items():
            known = states.get(panel_id)
            if known is None or rank[state] > rank[known.state]:
                states[panel_id] = BonusState(state=state, amount=amount)
    return states


def prolific_calls(study: Study, limit: int = 50) -> QuerySet[ProlificCall]:
    """The study's latest calls to Prolific, newest first, with who made them."""
    return ProlificCall.objects.filter(study=study).select_related("made_by").order_by("-at", "-id")[:limit]


@dataclass(frozen=True)
class Connection:
    study_id: str
    token_set: bool

    @property
    def connected(self) -> bool:
        return bool(self.study_id and self.token_set)


def connection(link: ParticipantLink) -> Connection:
    """Whether the study is connected to a Prolific study; the token itself is never read here."""
    return Connection(study_id=link.prolific_study_id, token_set=bool(link.prolific_token_encrypted))
