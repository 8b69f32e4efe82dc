"""Prolific from Claimlab (issue 34): connect a study to its Prolific study, approve and reject its
submissions with Prolific's reasons, and pay bonuses after a preview the researcher confirms.

Who: the study's researchers and staff (the views and API fetch the study through
access_study_to_manage); the token is the one a researcher gave when connecting, stored encrypted
(annotation/lib/keystore.py) and read only to build the client. Every call is logged as a
ProlificCall (prolific_client.py).

Bonuses are paid in two steps. `bonus_preview` computes the exact set (who, how much, the total, in
the link's currency) and a confirmation code bound to that set; `pay_bonuses` computes the set again
and pays only when the code matches, so a preview that is no longer true (a participant's pay grew,
someone was bonused meanwhile, the rule changed) cannot be paid by its old confirmation. The check and
the log row of the set-up call are written under a lock of the link's row, and participants with a
bonus paid, on its way or of unknown outcome are never in a set, so the same confirmation sent twice
(a double click, two tabs) pays once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.crypto import constant_time_compare, salted_hmac

from annotation.crowd.prolific_client import (
    MIN_REJECTION_MESSAGE,
    PROLIFIC_ID,
    REJECTION_CATEGORIES,
    SETUP_BONUSES_PATH,
    ProlificClient,
    ProlificError,
)
from annotation.crowd.prolific_selectors import (
    AWAITING_REVIEW,
    BONUSABLE,
    SubmissionRow,
    SubmissionTable,
    bonus_states,
    connection,
    prolific_status,
    submission_table,
)
from annotation.crowd.services import link_for
from annotation.errors import ServiceError
from annotation.lib.keystore import KeyUnreadable, decrypt, encrypt
from annotation.models import ParticipantLink, Study

logger = logging.getLogger(__name__)

CENT = Decimal("0.01")
#: A token as Prolific issues them: one word of URL-safe characters (nothing that could end a header).
TOKEN = re.compile(r"^[A-Za-z0-9._~+/=-]{8,512}$")
MAX_REJECTION_MESSAGE = 2000
#: Submissions one approve or reject request may name, and bonus lines one payment may hold.
MAX_REVIEW = 500
MAX_BONUS_LINES = 2000
#: The largest single bonus Claimlab sends (in the study's currency): Prolific pays "30" as 30.00, so a
#: typo for 0.30 is refused here rather than paid.
MAX_BONUS = Decimal("500")
BASES = ("pay", "fixed")


class NotConnected(ServiceError):
    """The study has no Prolific study id and token (or the token can no longer be read)."""


class StaleConfirmation(ServiceError):
    """The confirmation is not the one of the bonuses as they are now: preview again."""


# --- connecting --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectionCheck:
    """What the test call read of the Prolific study: its id, name and status there."""

    study_id: str
    name: str
    status: str


def _check_study(client: ProlificClient, study_id: str) -> ConnectionCheck:
    answer = client.get_study(study_id)
    return ConnectionCheck(
        study_id=study_id,
        name=str(answer.get("name") or answer.get("internal_name") or ""),
        status=str(answer.get("status") or ""),
    )


def connect(*, study: Study, user: User | None, study_id: str, token: str) -> ConnectionCheck:
    """Test the token on the Prolific study, and only then store both (the token encrypted).

    Both are given together: the stored token is never reused for another Prolific study, so
    nobody can point someone else's token at a study of their choosing. Nothing is stored when the
    test fails (its error says why).
    """
    study_id, token = (study_id or "").strip(), (token or "").strip()
    if not PROLIFIC_ID.match(study_id):
        raise ServiceError(
            "the Prolific study id is missing or malformed: copy it from the study's page on Prolific "
            "(24 letters and digits, e.g. 60f6acb180a7b59ac0621f9e)"
        )
    if not TOKEN.match(token):
        raise ServiceError(
            "the Prolific API token is missing or malformed: create one on Prolific (Settings → API tokens) and "
            "paste it whole"
        )
    check = _check_study(ProlificClient(token=token, study=study, made_by=user), study_id)
    link = link_for(study)
    link.prolific_study_id = study_id
    link.prolific_token_encrypted = encrypt(token)
    link.save(update_fields=["prolific_study_id", "prolific_token_encrypted"])
    logger.info("prolific connected", extra={"study": study.slug, "prolific_study": study_id})
    return check


def disconnect(*, study: Study) -> None:
    """Forget the Prolific study id and the token (the call log stays)."""
    ParticipantLink.objects.filter(study=study).update(prolific_study_id="", prolific_token_encrypted="")
    logger.info("prolific disconnected", extra={"study": study.slug})


def client_for(study: Study, user: User | None) -> tuple[ProlificClient, ParticipantLink]:
    """The client of the study's stored connection; NotConnected says what is missing."""
    link = link_for(study)
    if not connection(link).connected:
        raise NotConnected("this study is not connected to Prolific: give the Prolific study id and an API token")
    try:
        token = decrypt(link.prolific_token_encrypted, what="the stored Prolific API token")
    except KeyUnreadable as exc:
        raise NotConnected(f"{exc}: connect again") from None
    return ProlificClient(token=token, study=study, made_by=user), link


def check_connection(*, study: Study, user: User | None) -> ConnectionCheck:
    client, link = client_for(study, user)
    return _check_study(client, link.prolific_study_id)


def fetch_submissions(*, study: Study, user: User | None) -> SubmissionTable:
    """The Prolific study's submissions (one logged call, or a few for a paged list), matched to Claimlab."""
    client, link = client_for(study, user)
    return submission_table(study, link, client.study_submissions(link.prolific_study_id))


# --- approving and rejecting ------------------------------------------------------------------


@dataclass
class ReviewResult:
    action: str
    done: list[tuple[str, str]] = field(default_factory=list)  # (submission id, its status now)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (submission id, why)
    not_sent: list[str] = field(default_factory=list)  # left unsent after a failure that would repeat


def _review_ids(submission_ids: Any) -> list[str]:
    if not isinstance(submission_ids, (list, tuple)) or not submission_ids:
        raise ServiceError("choose at least one submission")
    ids = [str(value).strip() for value in submission_ids]
    bad = [value for value in ids if not PROLIFIC_ID.match(value)]
    if bad:
        raise ServiceError(f"not Prolific submission ids: {', '.join(repr(value) for value in bad[:5])}")
    if len(set(ids)) != len(ids):
        raise ServiceError("a submission is named twice")
    if len(ids) > MAX_REVIEW:
        raise ServiceError(f"at most {MAX_REVIEW} submissions at once (got {len(ids)})")
    return ids


def rejection_problem(category: str, message: str) -> str | None:
    """Why Prolific would refuse this rejection reason, or None."""
    if category not in REJECTION_CATEGORIES:
        return f"choose one of Prolific's rejection categories ({', '.join(REJECTION_CATEGORIES)})"
    length = len(message.strip())
    if length < MIN_REJECTION_MESSAGE:
        return (
            f"Prolific requires a message of at least {MIN_REJECTION_MESSAGE} characters explaining the rejection "
            f"to the participant (this one has {length})"
        )
    if length > MAX_REJECTION_MESSAGE:
        return f"the message is {length} characters; at most {MAX_REJECTION_MESSAGE}"
    return None


def review(
    *,
    study: Study,
    user: User | None,
    action: str,
    submission_ids: Any,
    category: str = "",
    message: str = "",
) -> ReviewResult:
    """Approve or reject submissions of the connected Prolific study, one transition call each.

    Refused before anything is sent: a rejection without one of Prolific's categories or a message
    long enough, a submission that is not the connected study's, or one not awaiting review (its
    status on Prolific is named). A failure that would repeat for the rest (the token refused, Prolific
    down, no answer) stops the batch; the rest are listed as not sent.
    """
    if action not in ("approve", "reject"):
        raise ServiceError("the action must be approve or reject")
    ids = _review_ids(submission_ids)
    message = (message or "").strip()
    if action == "reject":
        problem = rejection_problem(category, message)
        if problem:
            raise ServiceError(problem)
    client, link = client_for(study, user)
    statuses = {str(s["id"]): prolific_status(s) for s in client.study_submissions(link.prolific_study_id)}
    unknown = [value for value in ids if value not in statuses]
    if unknown:
        raise ServiceError(f"not submissions of the Prolific study {link.prolific_study_id}: {', '.join(unknown[:10])}")
    decided = [f"{value} ({statuses[value].lower()})" for value in ids if statuses[value] != AWAITING_REVIEW]
    if decided:
        raise ServiceError(f"only submissions awaiting review can be {action}d; not: {', '.join(decided[:10])}")
    result = ReviewResult(action=action)
    for index, submission_id in enumerate(ids):
        try:
            if action == "approve":
                answer = client.approve(submission_id)
            else:
                answer = client.reject(submission_id, message=message, category=category)
        except ProlificError as exc:
            result.failed.append((submission_id, str(exc)))
            if exc.kind in ("timeout", "network", "failed") or exc.status_code in (401, 403, 429):
                result.not_sent = ids[index + 1 :]
                break
            continue
        result.done.append(
            (submission_id, prolific_status(answer) or ("APPROVED" if action == "approve" else "REJECTED"))
        )
    logger.info(
        "prolific %s", action, extra={"study": study.slug, "done": len(result.done), "failed": len(result.failed)}
    )
    return result


# --- bonuses ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BonusRule:
    """How much each chosen participant gets: ``pay`` (the payment table's pay minus `amount`, the reward
    Prolific already pays them) or ``fixed`` (`amount` each). `panel_ids`: whom (None: everyone eligible)."""

    basis: str
    amount: Decimal
    panel_ids: tuple[str, ...] | None = None


@dataclass(frozen=True)
class BonusLine:
    panel_id: str
    pseudonym: str
    amount: Decimal


@dataclass
class BonusPreview:
    lines: list[BonusLine]
    currency: str
    confirmation: str
    left_out: list[tuple[str, str]]  # (Prolific ID, why not in the set)

    @property
    def count(self) -> int:
        return len(self.lines)

    @property
    def total(self) -> Decimal:
        return sum((line.amount for line in self.lines), Decimal("0.00"))

    @property
    def csv_bonuses(self) -> str:
        return "".join(f"{line.panel_id},{line.amount}\n" for line in self.lines)


@dataclass
class BonusPayment:
    preview: BonusPreview
    bulk_id: str
    set_up: dict[str, Any]  # Prolific's answer: amount, fees, vat, total_amount (in its own units)
    paid: bool
    note: str


def check_rule(basis: Any, amount: Any, panel_ids: Any = None) -> BonusRule:
    """A BonusRule from the request's fields, or a ServiceError naming the one that is wrong."""
    if basis not in BASES:
        raise ServiceError("the bonus basis must be 'pay' (the payment table's pay, less the reward) or 'fixed'")
    try:
        value = Decimal(str(amount if amount not in (None, "") else "0")).quantize(CENT, rounding=ROUND_HALF_UP)
    except ArithmeticError:
        raise ServiceError(f"the amount {amount!r} is not a number") from None
    if value < 0 or value > MAX_BONUS:
        raise ServiceError(f"the amount must be between 0 and {MAX_BONUS}")
    if basis == "fixed" and value == 0:
        raise ServiceError("a fixed bonus needs an amount above 0")
    ids: tuple[str, ...] | None = None
    if panel_ids is not None:
        ids = tuple(str(value).strip() for value in panel_ids)
        if not ids:
            raise ServiceError("choose at least one participant")
        if len(set(ids)) != len(ids):
            raise ServiceError("a participant is named twice")
    return BonusRule(basis=basis, amount=value, panel_ids=ids)


def _confirmation(study: Study, link: ParticipantLink, lines: list[BonusLine]) -> str:
    payload = json.dumps(
        [study.pk, link.prolific_study_id, link.currency, [[line.panel_id, str(line.amount)] for line in lines]]
    )
    digest = hashlib.sha256(payload.encode()).hexdigest()
    return salted_hmac("claimlab.prolific.bonus", digest).hexdigest()[:32]


def _lines(study: Study, link: ParticipantLink, rule: BonusRule, table: SubmissionTable) -> BonusPreview:
    """The bonus set a rule gives now: eligible participants (a submission awaiting review or approved,
    a Claimlab participant, no bonus through Claimlab yet), each with an amount above 0."""
    states = bonus_states(study)
    rows: dict[str, SubmissionRow] = {}
    for row in table.rows:  # a participant with several submissions (one returned, one not): the one that counts
        if row.payment is not None and (row.panel_id not in rows or row.prolific_status in BONUSABLE):
            rows[row.panel_id] = row
    wanted = rule.panel_ids if rule.panel_ids is not None else tuple(rows)
    unknown = [pid for pid in wanted if pid not in rows]
    if unknown:
        raise ServiceError(
            "not Claimlab participants with a submission in the Prolific study: " + ", ".join(unknown[:10])
        )
    lines, left_out = [], []
    for pid in wanted:
        row, state = rows[pid], states.get(pid)
        assert row.payment is not None
        if state is not None:
            why = {
                "paid": "bonus already paid",
                "pending": "a bonus is on its way",
                "unknown": "a bonus of unknown outcome (check Prolific)",
            }
            left_out.append((pid, f"{why[state.state]}: {state.amount} {link.currency}"))
            continue
        if row.prolific_status not in BONUSABLE:
            left_out.append((pid, f"submission {row.prolific_status.lower()} on Prolific"))
            continue
        amount = row.payment.pay - rule.amount if rule.basis == "pay" else rule.amount
        if amount <= 0:
            left_out.append((pid, "nothing owed beyond the reward"))
            continue
        if amount > MAX_BONUS:
            raise ServiceError(f"the bonus of {pid} would be {amount} {link.currency}, above the limit of {MAX_BONUS}")
        lines.append(BonusLine(panel_id=pid, pseudonym=row.pseudonym, amount=amount.quantize(CENT)))
    if len(lines) > MAX_BONUS_LINES:
        raise ServiceError(f"at most {MAX_BONUS_LINES} bonuses in one payment (got {len(lines)}); choose fewer")
    lines.sort(key=lambda line: line.panel_id)
    return BonusPreview(
        lines=lines, currency=link.currency, confirmation=_confirmation(study, link, lines), left_out=left_out
    )


def bonus_preview(
    *, study: Study, user: User | None, rule: BonusRule, table: SubmissionTable | None = None
) -> BonusPreview:
    """The exact set a payment with this rule would pay now, its total and its confirmation code."""
    if table is None:
        table = fetch_submissions(study=study, user=user)
    preview = _lines(study, link_for(study), rule, table)
    if rule.panel_ids is not None and preview.left_out:  # asked for by name: say why each cannot be paid
        raise ServiceError(
            "these participants cannot get this bonus: "
            + "; ".join(f"{pid} ({why})" for pid, why in preview.left_out[:10])
        )
    return preview


def pay_bonuses(*, study: Study, user: User | None, rule: BonusRule, confirmation: str) -> BonusPayment:
    """Pay the set `bonus_preview` showed, only if it is still exactly that set (StaleConfirmation otherwise).

    The set is computed again under a lock of the link's row, and the set-up call's log row is
    written before the lock is let go: a second payment of the same set finds those participants
    with a bonus on its way and its set changed, so it is refused.
    """
    client, link = client_for(study, user)
    submissions = client.study_submissions(link.prolific_study_id)
    with transaction.atomic():
        locked = ParticipantLink.objects.select_for_update().get(pk=link.pk)
        if (locked.prolific_study_id, locked.prolific_token_encrypted) != (
            link.prolific_study_id,
            link.prolific_token_encrypted,
        ):
            raise StaleConfirmation("the Prolific connection changed since the preview: preview again")
        preview = _lines(study, locked, rule, submission_table(study, locked, submissions))
        if not constant_time_compare(preview.confirmation, str(confirmation or "")):
            raise StaleConfirmation(
                f"the bonuses changed since the preview (now {preview.count} participant(s), {preview.total} "
                f"{preview.currency}): preview again and confirm what is shown"
            )
        if not preview.lines:
            raise ServiceError("there is no bonus to pay: every chosen participant is paid or owed nothing")
        body = {"study_id": locked.prolific_study_id, "csv_bonuses": preview.csv_bonuses}
        row = client.begin("POST", SETUP_BONUSES_PATH, body)
    set_up = client.set_up_bonuses(locked.prolific_study_id, preview.csv_bonuses, row=row)
    bulk_id = str(set_up["id"])
    try:
        answer = client.pay_bonuses(bulk_id)
    except ProlificError as exc:
        if exc.kind == "not_json" and exc.status_code is not None and 200 <= exc.status_code < 300:
            answer = None  # Prolific took it (2xx); only its words could not be read
        elif exc.kind == "refused":
            raise ProlificError(
                f"{exc}. Nothing was paid (the bonuses were set up on Prolific as {bulk_id}, unpaid)",
                kind=exc.kind,
                status_code=exc.status_code,
            ) from None
        else:
            raise ProlificError(
                f"{exc}. Whether the bonuses were paid is not known: check the study's bonus payments on Prolific "
                "before paying them there; Claimlab will not pay these participants again",
                kind=exc.kind,
                status_code=exc.status_code,
            ) from None
    logger.info("prolific bonuses paid", extra={"study": study.slug, "count": preview.count, "bulk": bulk_id})
    return BonusPayment(
        preview=preview,
        bulk_id=bulk_id,
        set_up={key: set_up.get(key) for key in ("amount", "fees", "vat", "total_amount")},
        paid=True,
        note=answer if isinstance(answer, str) else "Prolific took the payment; it is made in the next minutes.",
    )
