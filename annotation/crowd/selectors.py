"""Reads of a study's crowd participants: the payment table and its study-level summary."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from statistics import median

from django.db.models import Count, Max, Q, QuerySet, Sum

from annotation.lib.analysis_rules import EXCLUDED_STATUSES, excluded_annotator_ids
from annotation.models import (
    Annotation,
    Assignment,
    Item,
    Participant,
    ParticipantCheck,
    ParticipantLink,
    QuestionnaireResponse,
    Study,
)

CENT = Decimal("0.01")


@dataclass
class PaymentRow:
    participant: Participant
    pseudonym: str
    panel_id: str
    status: str
    items_done: int
    checks_passed: int
    checks_failed: int
    active_minutes: float
    wall_minutes: float
    pay: Decimal
    currency: str
    code: str


@dataclass
class PaymentSummary:
    participants: int
    by_status: dict[str, int]  # status (completed, screened_out, ...) -> participants
    median_active_minutes_per_item: float | None
    cost_so_far: Decimal
    projected_total_cost: Decimal | None
    currency: str
    pay_basis: str  # "active" | "wall": the minutes the pay column is for

    def status_labels(self) -> list[tuple[str, int]]:
        """(label, participants) for the page, e.g. ("Screened out", 2)."""
        return [(Participant.Status(status).label, n) for status, n in self.by_status.items()]

    @property
    def pay_basis_words(self) -> str:
        """The basis as the page and the CSV say it: "active time" or "wall time"."""
        return PAY_BASIS_WORDS[self.pay_basis]


#: How the page names each pay basis in its sentences and the pay column's head.
PAY_BASIS_WORDS: dict[str, str] = {
    ParticipantLink.PayBasis.ACTIVE: "active time",
    ParticipantLink.PayBasis.WALL: "wall time",
}


def _pay(ms: int, per_hour: Decimal) -> Decimal:
    return (Decimal(ms) / Decimal(3_600_000) * per_hour).quantize(CENT, rounding=ROUND_HALF_UP)


def _wall_ms(participant: Participant, questionnaire_at: datetime | None) -> int:
    """From arrival to the end (or the last sign of life while still going), consent, instructions and
    questionnaires included: the post-study questionnaire is answered after the session's end, so its
    last answer counts when later."""
    end = participant.finished_at or participant.last_seen_at
    if questionnaire_at is not None and questionnaire_at > end:
        end = questionnaire_at
    return max(int((end - participant.created_at).total_seconds() * 1000), 0)


def payment_rows(study: Study, link: ParticipantLink) -> list[PaymentRow]:
    """One row per participant, in arrival order: what they did, for how long, and what they are owed.

    Active time is what the item pages measured (answers and checks); wall time is arrival to the
    end (or the last sign of life), questionnaires included. Pay is at the link's hourly rate on the
    time the link's `pay_basis` names; both times are kept, so the other basis can be checked.
    """
    from annotation.crowd.services import code_for  # the codes' one home

    participants = list(Participant.objects.filter(study=study).select_related("member").order_by("created_at", "id"))
    users = [p.member.user_id for p in participants]
    done = dict(
        Assignment.objects.filter(study=study, annotator_id__in=users, status=Assignment.Status.SUBMITTED)
        .values("annotator_id")
        .annotate(n=Count("id"))
        .values_list("annotator_id", "n")
    )
    label_ms = dict(
        Annotation.objects.filter(assignment__study=study, assignment__annotator_id__in=users)
        .values("assignment__annotator_id")
        .annotate(ms=Sum("active_ms"))
        .values_list("assignment__annotator_id", "ms")
    )
    check_ms = dict(
        ParticipantCheck.objects.filter(participant__study=study)
        .values("participant_id")
        .annotate(ms=Sum("active_ms"))
        .values_list("participant_id", "ms")
    )
    questionnaire_at = dict(
        QuestionnaireResponse.objects.filter(study=study, respondent_id__in=users)
        .values("respondent_id")
        .annotate(at=Max("answered_at"))
        .values_list("respondent_id", "at")
    )
    by_wall = link.pay_basis == ParticipantLink.PayBasis.WALL
    rows = []
    for p in participants:
        active = (label_ms.get(p.member.user_id) or 0) + (check_ms.get(p.pk) or 0)
        wall = _wall_ms(p, questionnaire_at.get(p.member.user_id))
        rows.append(
            PaymentRow(
                participant=p,
                pseudonym=p.member.pseudonym,
                panel_id=p.panel_id,
                status=p.status,
                items_done=done.get(p.member.user_id, 0),
                checks_passed=p.checks_passed,
                checks_failed=p.checks_failed,
                active_minutes=round(active / 60_000, 2),
                wall_minutes=round(wall / 60_000, 2),
                pay=_pay(wall if by_wall else active, link.pay_per_hour),
                currency=link.currency,
                code=code_for(p, link),
            )
        )
    return rows


def payment_summary(study: Study, link: ParticipantLink, rows: list[PaymentRow]) -> PaymentSummary:
    """Median active minutes per item, cost so far, and the projected cost of labelling every item N times."""
    per_item = [row.active_minutes / row.items_done for row in rows if row.items_done]
    cost = sum((row.pay for row in rows), Decimal(0))
    labels = sum(row.items_done for row in rows)
    needed = study.items.count() * study.slots_per_item
    projected = (cost / labels * needed).quantize(CENT) if labels else None
    by_status: dict[str, int] = {}
    for row in rows:
        by_status[row.status] = by_status.get(row.status, 0) + 1
    return PaymentSummary(
        participants=len(rows),
        by_status=by_status,
        median_active_minutes_per_item=round(median(per_item), 2) if per_item else None,
        cost_so_far=cost,
        projected_total_cost=projected,
        currency=link.currency,
        pay_basis=link.pay_basis,
    )


def link_warnings(link: ParticipantLink) -> list[str]:
    """What the link's settings promise that its check items cannot keep, in words for the settings page
    and the API: fewer usable attention items than a full quota's checks (each is shown to a
    participant once, so the checks would stop part-way and a participant meets fewer than the rule says).
    """
    from annotation.crowd.services import attention_checks_due, usable_attention_items  # the rule's one home

    due = attention_checks_due(link)
    usable = usable_attention_items(link)
    if len(usable) >= due:
        return []
    every, quota = link.attention_every, link.items_per_participant
    after = ", ".join(str(every * k) for k in range(1, due + 1))
    also = len(link.attention_items) - len(usable)
    overlap = f" ({also} of them also qualification item(s), already answered by then)" if also else ""
    return [
        f"A full quota of {quota} items with a check after every {every} needs {due} attention check item(s) "
        f"per participant (after items {after}; none after the last item), and each is shown to a participant "
        f"once: there {'is' if len(usable) == 1 else 'are'} only {len(usable)} usable attention item(s){overlap}, "
        f"so participants who finish meet only {len(usable)} check(s). Add {due - len(usable)} more gold item(s) "
        "to the attention-check items, or check less often."
    ]


@dataclass(frozen=True)
class CheckNeed:
    """What one check list holds against what a full quota needs, for the picker and the settings page."""

    which: str  # "qualification" | "attention"
    chosen: int  # items on the list
    usable: int  # of them, those that count (an attention item that is also a qualification item does not)
    needed: int  # the fewest usable items the settings ask for
    explanation: str  # why that many, in words

    @property
    def short(self) -> bool:
        return self.usable < self.needed


def check_need(link: ParticipantLink, which: str) -> CheckNeed:
    """How many items a check list needs: the pass mark for the qualification (each item answered once),
    and for attention checks (quota - 1) // every, the rule of `services.attention_checks_due`, counted
    even before any item is chosen."""
    from annotation.crowd.services import usable_attention_items  # the rule's one home

    if which == "qualification":
        chosen = len(link.qualification_items)
        needed = link.qualification_pass
        if needed:
            why = (
                f"A participant needs {needed} correct answer(s) to qualify, so at least {needed} qualification "
                "item(s); more lets them miss some."
            )
        elif chosen:
            why = "The pass mark is 0: everyone passes, and their answers are kept."
        else:
            why = "No qualification: participants go straight to the items."
        return CheckNeed(which, chosen, chosen, needed, why)
    every, quota = link.attention_every, link.items_per_participant
    chosen = len(link.attention_items)
    usable = len(usable_attention_items(link))
    if not every:
        why = "No attention checks (a check after every 0 items): chosen items wait unused."
        return CheckNeed(which, chosen, usable, 0, why)
    needed = (quota - 1) // every
    after = ", ".join(str(every * k) for k in range(1, needed + 1)) or "none"
    why = (
        f"A full quota of {quota} items with a check after every {every} shows {needed} attention check(s) "
        f"(after items {after}; none after the last), each item at most once per participant."
    )
    return CheckNeed(which, chosen, usable, needed, why)


#: The picker's "has gold" filter: gold items only (the default: only they can be checks), or every item.
GOLD_FILTERS = ("yes", "all")


def pickable_items(study: Study, *, query: str = "", gold: str = "yes") -> QuerySet[Item]:
    """The study's items for the check picker, in import order: by id or text, gold ones only by default."""
    items = Item.objects.filter(study=study).order_by("position", "pk")
    if gold == "yes":
        items = items.exclude(gold_label="")
    if query:
        items = items.filter(Q(external_id__icontains=query) | Q(summary__icontains=query))
    return items.only("pk", "external_id", "summary", "gold_label", "domain", "n_answers", "is_check")


def chosen_items(study: Study, external_ids: list[str]) -> list[tuple[str, Item | None]]:
    """A check list's items in its order, each with its row (None for an id no longer in the study)."""
    found = {item.external_id: item for item in Item.objects.filter(study=study, external_id__in=external_ids)}
    return [(external_id, found.get(external_id)) for external_id in external_ids]


def exclusion_counts(study: Study, *, include_screened_out: bool = False) -> dict[str, int]:
    """How many participants were screened out or withdrew, and how many labels analysis leaves out."""
    by_status = dict(
        Participant.objects.filter(study=study, status__in=EXCLUDED_STATUSES)
        .values("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    labels = Annotation.objects.filter(
        assignment__study=study,
        assignment__annotator_id__in=excluded_annotator_ids(study, include_screened_out=include_screened_out),
    ).count()
    return {status: by_status.get(status, 0) for status in EXCLUDED_STATUSES} | {"labels": labels}


def exclusion_rule(study: Study, *, include_screened_out: bool = False) -> str | None:
    """The report's sentence on crowd participants left out, with counts; None for a study without participants."""
    if not Participant.objects.filter(study=study).exists():
        return None
    counts = exclusion_counts(study, include_screened_out=include_screened_out)
    if include_screened_out:
        return (
            f"crowd participants who were screened out ({counts['screened_out']}) are included, as asked "
            f"(include_screened_out); those who withdrew ({counts['withdrawn']}) are left out of every number "
            f"here, with their {counts['labels']} label(s)"
        )
    return (
        f"crowd participants who were screened out ({counts['screened_out']}) or withdrew ({counts['withdrawn']}) "
        f"are left out of every number here, with their {counts['labels']} label(s)"
    )
