"""Crowd participants: a study's participant link, and each participant's way through it (issue 13).

A participant is bound to the panel's ID from the URL (Prolific's PROLIFIC_PID by
default) and labels as an annotator identity whose user cannot log in: assignment,
exact N per item and leases are the annotator machinery, unchanged. Their path is
consent -> instructions -> qualification (optional) -> items with attention checks
-> an end (completed / screened out / timed out / withdrawn), each end with its own
completion code. Qualification and attention answers are ParticipantCheck rows: they
take no slot, so they never count towards N.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import quote, urlsplit

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone

from annotation.crowd.currencies import CURRENCIES
from annotation.errors import ServiceError
from annotation.models import (
    Annotation,
    Assignment,
    Item,
    Participant,
    ParticipantCheck,
    ParticipantLink,
    Study,
    StudyMember,
)
from annotation.progress.quality_counters import close_leases
from annotation.workbench.services import NotAllowed, SubmittedAnswer, answer_values, claim_next, skip

Status = Participant.Status
#: What a panel ID may look like: Prolific's are 24 hex characters, MTurk's 12-14 capitals and digits.
PANEL_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
PARAM_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
CODE = re.compile(r"^[A-Za-z0-9_\-]{0,64}$")
#: Attempts when two first visits pick the same random pseudonym or panel ID at once.
ARRIVE_ATTEMPTS = 3

#: The settings a researcher may change, and what each must be.
LINK_FIELDS = (
    "enabled",
    "max_participants",
    "pid_param",
    "study_param",
    "session_param",
    "consent",
    "items_per_participant",
    "budget_minutes",
    "qualification_items",
    "qualification_pass",
    "attention_items",
    "attention_every",
    "attention_fail_limit",
    "time_limit_minutes",
    "code_completed",
    "code_screened_out",
    "code_timed_out",
    "code_full",
    "redirect_url",
    "pay_per_hour",
    "currency",
    "pay_basis",
)
#: The two check lists, by the name the picker and its URL use.
CHECK_LISTS = {"qualification": "qualification_items", "attention": "attention_items"}
#: Longest redirect URL (the column's length).
MAX_REDIRECT_URL = 500
#: Longest consent text (Markdown, drawn on a participant's first page).
MAX_CONSENT = 20_000
#: The largest number any count or minutes setting takes (the columns hold 2,147,483,647).
MAX_NUMBER = 1_000_000


class LinkUnusable(ServiceError):
    """The link is switched off, rotated away, or full; the message says which."""


class LinkFull(LinkUnusable):
    """The participant cap is reached: the arrival gets the 'no places left' page and its code."""


class BadPanelId(ServiceError):
    """The URL's panel ID is missing or malformed; the message names the parameter."""


@dataclass(frozen=True)
class PanelIds:
    participant: str
    study: str = ""
    session: str = ""


def new_token() -> str:
    return secrets.token_urlsafe(18)


def link_for(study: Study) -> ParticipantLink:
    """The study's participant link, made (switched off) on first use."""
    link, _ = ParticipantLink.objects.get_or_create(study=study, defaults={"token": new_token()})
    return link


def find_link(token: str) -> ParticipantLink | None:
    return ParticipantLink.objects.select_related("study").filter(token=token).first()


#: Check items per list: a participant sees each one, so real lists are short; the bound keeps the
#: lookup within one statement's parameters.
MAX_CHECK_ITEMS = 1000


def _gold_ids(study: Study, ids: Any, field: str) -> list[str]:
    if isinstance(ids, str):
        ids = [part.strip() for part in re.split(r"[,\s]+", ids) if part.strip()]
    if not isinstance(ids, list) or not all(isinstance(value, str) for value in ids):
        raise ServiceError(f"{field}: give a list of item ids")
    ids = list(dict.fromkeys(ids))
    if len(ids) > MAX_CHECK_ITEMS:
        raise ServiceError(f"{field}: at most {MAX_CHECK_ITEMS:,} items (got {len(ids):,})")
    gold = dict(Item.objects.filter(study=study, external_id__in=ids).values_list("external_id", "gold_label"))
    missing = [value for value in ids if value not in gold]
    if missing:
        raise ServiceError(f"{field}: no such item(s) in this study: {', '.join(missing[:10])}")
    no_gold = [value for value in ids if not gold[value]]
    if no_gold:
        raise ServiceError(f"{field}: item(s) without a gold label cannot score anyone: {', '.join(no_gold[:10])}")
    return ids


def _number(value: Any, field: str, *, minimum: int = 0, optional: bool = False) -> int | None:
    if optional and value in (None, ""):
        return None
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ServiceError(f"{field}: give a whole number, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ServiceError(f"{field}: give a whole number, got {value!r}") from None
    if number < minimum:
        raise ServiceError(f"{field}: must be at least {minimum}, got {number}")
    if number > MAX_NUMBER:
        raise ServiceError(f"{field}: at most {MAX_NUMBER:,}, got {number:,}")
    return number


def _text(value: Any, field: str) -> str:
    """A text setting; None reads as empty (a cleared form field)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ServiceError(f"{field}: give a text, got {value!r}")
    return value


def _currency(value: Any) -> str:
    """An ISO 4217 code of a currency in use (crowd/currencies.py), upper-cased: 'gbp' is GBP."""
    code = _text(value, "currency").strip().upper()
    if code not in CURRENCIES:
        raise ServiceError(
            f"currency: {code or value!r} is not an ISO 4217 code of a currency in use (e.g. GBP, USD, EUR)"
        )
    return code


def _validated(study: Study, link: ParticipantLink, changes: dict[str, Any]) -> dict[str, Any]:
    """The one home of the rules of a participant link's settings."""
    unknown = sorted(set(changes) - set(LINK_FIELDS))
    if unknown:
        raise ServiceError(f"unknown setting(s): {', '.join(unknown)}")
    clean: dict[str, Any] = {}
    for name, value in changes.items():
        if name == "enabled":
            if not isinstance(value, bool):
                raise ServiceError(f"enabled: true or false, got {value!r}")
            clean[name] = value
        elif name in ("max_participants", "budget_minutes"):
            clean[name] = _number(value, name, minimum=1, optional=True)
        elif name in ("items_per_participant", "time_limit_minutes", "attention_fail_limit"):
            clean[name] = _number(value, name, minimum=1)
        elif name in ("qualification_pass", "attention_every"):
            clean[name] = _number(value, name)
        elif name in ("qualification_items", "attention_items"):
            clean[name] = _gold_ids(study, value, name)
        elif name in ("pid_param", "study_param", "session_param"):
            value = _text(value, name).strip()
            if (value or name == "pid_param") and not PARAM_NAME.match(value):
                raise ServiceError(f"{name}: a URL parameter name (letters, digits, _), got {value!r}")
            clean[name] = value
        elif name.startswith("code_"):
            value = _text(value, name).strip()
            if not CODE.match(value):
                raise ServiceError(f"{name}: letters, digits, - and _ only (at most 64), got {value!r}")
            clean[name] = value
        elif name == "redirect_url":
            value = _text(value, name).strip()
            parts = urlsplit(value)
            if len(value) > MAX_REDIRECT_URL:
                raise ServiceError(f"redirect_url: at most {MAX_REDIRECT_URL} characters (got {len(value)})")
            if value and (parts.scheme not in ("http", "https") or not parts.netloc):
                raise ServiceError(f"redirect_url: an http(s) address, got {value!r}")
            clean[name] = value
        elif name == "currency":
            clean[name] = _currency(value)
        elif name == "pay_basis":
            if value not in ParticipantLink.PayBasis.values:
                raise ServiceError(f"pay_basis: 'active' (active time) or 'wall' (wall time), got {value!r}")
            clean[name] = value
        elif name == "pay_per_hour":
            try:
                pay = Decimal(str(value or 0))
            except InvalidOperation:
                raise ServiceError(f"pay_per_hour: a number, got {value!r}") from None
            if not pay.is_finite() or pay < 0 or pay >= Decimal("1000000"):
                raise ServiceError("pay_per_hour: between 0 and 999999.99")
            clean[name] = pay.quantize(Decimal("0.01"))
        else:  # consent
            value = _text(value, name).strip()
            if len(value) > MAX_CONSENT:
                raise ServiceError(f"consent: at most {MAX_CONSENT:,} characters (got {len(value):,})")
            clean[name] = value
    merged = {name: clean.get(name, getattr(link, name)) for name in LINK_FIELDS}
    if merged["qualification_pass"] > len(merged["qualification_items"]):
        raise ServiceError(
            f"qualification_pass: {merged['qualification_pass']} correct answers are asked for but there are "
            f"only {len(merged['qualification_items'])} qualification item(s)"
        )
    if merged["attention_every"] and not merged["attention_items"]:
        raise ServiceError("attention_every: name the attention_items (gold items) the checks are drawn from")
    if merged["enabled"] and not (merged["code_completed"] or merged["redirect_url"]):
        raise ServiceError("a link that is on needs a completion code or a redirect URL, so people can be paid")
    return clean


@transaction.atomic
def configure_link(*, study: Study, changes: dict[str, Any]) -> ParticipantLink:
    """Change the link's settings, all or none (the message names the first setting that does not pass)."""
    link = link_for(study)
    clean = _validated(study, link, changes)
    before = check_item_ids(link)
    for name, value in clean.items():
        setattr(link, name, value)
    link.save()
    training = {entry["item"] for entry in study.training}  # checks too: a link's change never unmarks them
    _mark_check_items(study, before | training, check_item_ids(link) | training)
    return link


@transaction.atomic
def edit_check_items(
    *, study: Study, which: str, remove: Iterable[str] = (), add: Iterable[str] = ()
) -> ParticipantLink:
    """Take items off one check list and put others on its end (the picker's save), through `configure_link`'s
    rules: all or none, the message naming what does not pass.

    Only the items named change, so two researchers editing the list at once each keep what the other
    did: the link's row is locked while the new list is made from the stored one, not from the page's copy.
    """
    field = CHECK_LISTS.get(which)
    if field is None:
        raise ServiceError(f"no check list called {which!r}: qualification or attention")
    link = link_for(study)
    ParticipantLink.objects.select_for_update().filter(pk=link.pk).first()
    link.refresh_from_db()
    gone = set(remove)
    kept = [external_id for external_id in getattr(link, field) if external_id not in gone]
    added = [external_id for external_id in dict.fromkeys(add) if external_id not in kept]
    return configure_link(study=study, changes={field: kept + added})


def mark_training_items(study: Study, before: set[str], after: set[str]) -> None:
    """Keep training items marked like checks (Item.is_check: never handed out as items, their labels out of
    agreement), as the study's training setting changes; the link's checks stay marked."""
    link = ParticipantLink.objects.filter(study=study).first()
    checks = check_item_ids(link) if link is not None else set()
    _mark_check_items(study, before | checks, after | checks)


def check_item_ids(link: ParticipantLink) -> set[str]:
    """The external ids of the items the link uses as qualification or attention checks."""
    return {*link.qualification_items, *link.attention_items}


def _mark_check_items(study: Study, before: set[str], after: set[str]) -> None:
    """Keep `Item.is_check` equal to the link's check items, in the transaction that changes them.

    Why a column: the claim leaves check items out in its index walk (annotation/workbench/claim_order.py), so
    a check is never handed out as an ordinary item to anyone, and analysis can tell their labels
    apart (`Study.checks_in_agreement`). Only the items that changed are written.

    An item that becomes a check while someone holds it as an item (on screen, fetched ahead, or a
    lease that ran out and waits to be taken over) is taken back: the claim hands out held and
    expired leases before fresh items, so such a lease would serve the check as an item. Its
    leases are closed before the item is marked and once more after (a claim may have taken a
    slot in between), in the order a submit locks (assignment, then item), so the two never
    deadlock; an answer that committed first stands (a label given before the item became a check).
    """
    added = after - before
    if added:
        _take_back_leases(study, added)
    if after:
        Item.objects.filter(study=study, external_id__in=after, is_check=False).update(is_check=True)
    if added:
        _take_back_leases(study, added)
    if before - after:
        Item.objects.filter(study=study, external_id__in=before - after).update(is_check=False)


def _take_back_leases(study: Study, external_ids: set[str]) -> int:
    """Close the active assignments on these items as leases that ran out (slot given back, the lease's
    end kept as the mark, so a late answer is refused saying why); how many were closed."""
    active = Assignment.objects.filter(study=study, item__external_id__in=external_ids, status=Assignment.Status.ACTIVE)
    held = list(active.select_for_update(of=("self",)).values_list("pk", "item_id"))
    if not held:
        return 0
    now = timezone.now()
    closed = 0
    for item_id, pks in _by_item(held).items():
        count = len(close_leases(pks, now))  # a lease that had run out counts as timed out (progress counters)
        if count:
            Item.objects.filter(pk=item_id, slots_taken__gte=count).update(slots_taken=F("slots_taken") - count)
        closed += count
    return closed


def _by_item(rows: list[tuple[int, int]]) -> dict[int, list[int]]:
    grouped: dict[int, list[int]] = {}
    for pk, item_id in rows:
        grouped.setdefault(item_id, []).append(pk)
    return grouped


def rotate_link(*, study: Study) -> ParticipantLink:
    """A new token: the old link stops working; participants already in keep their session."""
    link = link_for(study)
    link.token = new_token()
    link.rotated_at = timezone.now()
    link.save(update_fields=["token", "rotated_at"])
    return link


def panel_ids_from(link: ParticipantLink, query: Any) -> PanelIds:
    """The panel's identifiers from the link's query string; BadPanelId names what is wrong."""
    values = {}
    for role, param in (("participant", link.pid_param), ("study", link.study_param), ("session", link.session_param)):
        value = (query.get(param, "") if param else "").strip()
        if not value and role == "participant":
            raise BadPanelId(f"the link has no {param}: open it from the panel's study page, which adds your ID")
        if value and not PANEL_ID.match(value):
            raise BadPanelId(f"{param} is not a valid ID (letters, digits, '.', '_' and '-', at most 64 characters)")
        values[role] = value
    return PanelIds(**values)


def link_refusal(link: ParticipantLink) -> str | None:
    if not link.enabled:
        return "This study's participant link is switched off: the study is not taking participants now."
    if link.study.status != Study.Status.OPEN:
        return "This study is not open for participants now."
    return None


def _new_participant(link: ParticipantLink, ids: PanelIds, now: datetime) -> Participant:
    study = link.study
    if link.max_participants is not None:
        # Serialise first visits of this study (row lock on PostgreSQL; SQLite serialises writers).
        ParticipantLink.objects.select_for_update().filter(pk=link.pk).first()
        if Participant.objects.filter(study=study).count() >= link.max_participants:
            raise LinkFull("This study has all the participants it needs; thank you for your interest.")
    user = User(username=f"crowd-{secrets.token_hex(10)}", is_active=False)
    user.set_unusable_password()
    user.save()
    member = StudyMember.objects.create(
        study=study, user=user, role=StudyMember.Role.ANNOTATOR, pseudonym=f"p-{secrets.token_hex(4)}"
    )
    return Participant.objects.create(
        study=study,
        member=member,
        panel_id=ids.participant,
        panel_study_id=ids.study,
        panel_session_id=ids.session,
        created_at=now,
        last_seen_at=now,
    )


def arrive(*, link: ParticipantLink, ids: PanelIds, now: datetime | None = None) -> Participant:
    """The participant with this panel ID in the link's study: the same one on every return, else a new one."""
    now = now or timezone.now()
    refusal = link_refusal(link)
    for attempt in range(ARRIVE_ATTEMPTS):
        found = Participant.objects.filter(study=link.study, panel_id=ids.participant).first()
        if found is not None:
            Participant.objects.filter(pk=found.pk).update(last_seen_at=now)
            return found
        if refusal is not None:
            raise LinkUnusable(refusal)
        try:
            with transaction.atomic():
                return _new_participant(link, ids, now)
        except IntegrityError:
            if attempt == ARRIVE_ATTEMPTS - 1:
                raise ServiceError("too many people are arriving at this moment; reload the page") from None
    raise AssertionError("unreachable")


def _set_status(participant: Participant, status: str, now: datetime, **extra: Any) -> None:
    """Move on, conditionally: an ended participant stays ended whatever a second tab does."""
    fields = {"status": status, "last_seen_at": now, **extra}
    if status in Participant.ENDED:
        fields["finished_at"] = now
    Participant.objects.filter(pk=participant.pk).exclude(status__in=Participant.ENDED).update(**fields)
    participant.refresh_from_db()


def accept_consent(*, participant: Participant, now: datetime | None = None) -> None:
    if participant.status == Status.CONSENT:
        now = now or timezone.now()
        _set_status(participant, Status.INSTRUCTIONS, now, consented_at=now)


def start(*, participant: Participant, link: ParticipantLink, now: datetime | None = None) -> None:
    """After the instructions: the qualification when the study has one, else the items."""
    if participant.status == Status.INSTRUCTIONS:
        nxt = Status.QUALIFYING if link.qualification_items else Status.WORKING
        _set_status(participant, nxt, now or timezone.now())


def release_held(participant: Participant) -> None:
    """Give back the item the participant holds, so its slot goes to someone else now, not at lease end."""
    held = Assignment.objects.filter(
        study=participant.study, annotator_id=participant.member.user_id, status=Assignment.Status.ACTIVE
    ).values_list("pk", flat=True)
    for assignment_id in held:
        # A study that is neither open nor paused holds no leases to give back.
        with suppress(NotAllowed):
            skip(user=participant.member.user, study=participant.study, assignment_id=assignment_id)


def end(*, participant: Participant, status: str, now: datetime | None = None) -> None:
    """End the participant's session with `status` and free what they hold."""
    if status not in Participant.ENDED:
        raise ServiceError(f"not an end: {status!r}")
    _set_status(participant, status, now or timezone.now())
    if participant.status == status:
        release_held(participant)


def time_is_up(participant: Participant, link: ParticipantLink, now: datetime) -> bool:
    return now > participant.created_at + timedelta(minutes=link.time_limit_minutes)


def close_overdue(*, study: Study, link: ParticipantLink, now: datetime | None = None) -> int:
    """Mark participants whose time limit passed while away as timed out (ended when the limit ran out).

    This makes the payment table and the report say what happened, and gives back what they
    still hold (the item on their screen and the one fetched ahead, when their leases have not
    run out yet), as every end does. Returns how many were closed.
    """
    now = now or timezone.now()
    limit = timedelta(minutes=link.time_limit_minutes)
    overdue = Participant.objects.filter(study=study, created_at__lt=now - limit).exclude(status__in=Participant.ENDED)
    closed = 0
    for participant in overdue.select_related("member__user", "study"):
        ended_at = participant.created_at + limit
        ended = (
            Participant.objects.filter(pk=participant.pk)
            .exclude(status__in=Participant.ENDED)
            .update(status=Status.TIMED_OUT, finished_at=ended_at)
        )
        if ended:
            release_held(participant)
        closed += ended
    return closed


def seen(participant: Participant, now: datetime | None = None) -> None:
    """A sign of life (a page asked for), for the wall-time column of the payment table."""
    Participant.objects.filter(pk=participant.pk).update(last_seen_at=now or timezone.now())


def items_done(participant: Participant) -> int:
    return Assignment.objects.filter(
        study=participant.study, annotator_id=participant.member.user_id, status=Assignment.Status.SUBMITTED
    ).count()


def attention_checks_due(link: ParticipantLink) -> int:
    """The attention checks a participant who answers the whole quota meets, by `next_check`'s rule.

    A check comes once `attention_every` more items are answered, and the answer that reaches the
    quota ends the session (`after_item`), so none comes after the last item: with a quota of q
    and a check every k items, (q - 1) // k checks (quota 20, every 5: after items 5, 10 and 15).
    """
    if not link.attention_every or not link.attention_items:
        return 0
    return (link.items_per_participant - 1) // link.attention_every


def usable_attention_items(link: ParticipantLink) -> list[str]:
    """The attention items a participant can be shown: each at most once, and none they answered as a
    qualification item (an answer they already gave is no check of attention)."""
    qualification = set(link.qualification_items)
    return [external_id for external_id in link.attention_items if external_id not in qualification]


def next_check(participant: Participant, link: ParticipantLink, *, done: int | None = None) -> Item | None:
    """The check item to show now: the next qualification item, or an attention check that is due.

    Each check item is shown to a participant at most once, in the link's order, so a participant
    meets `attention_checks_due` checks when there are that many `usable_attention_items`.
    `done`: the answers to count instead of the items answered so far, to ask whether a check
    comes after items still on their way (the item fetched ahead must not jump a check).
    """
    answered = set(ParticipantCheck.objects.filter(participant=participant).values_list("item__external_id", flat=True))
    if participant.status == Status.QUALIFYING:
        pool = link.qualification_items
    elif participant.status == Status.WORKING and link.attention_every and link.attention_items:
        shown = ParticipantCheck.objects.filter(participant=participant, kind=ParticipantCheck.Kind.ATTENTION).count()
        if (items_done(participant) if done is None else done) < link.attention_every * (shown + 1):
            return None
        pool = link.attention_items
    else:
        return None
    # Check items are never handed out as items (Item.is_check), but an item may have become a
    # check after this participant had it as an item (a link changed mid-study, or data from before
    # the rule): its answer is known to them, so it is no check of their attention.
    had = set(
        Assignment.objects.filter(
            study=participant.study, annotator_id=participant.member.user_id, item__external_id__in=pool
        ).values_list("item__external_id", flat=True)
    )
    for external_id in pool:
        if external_id not in answered and external_id not in had:
            return Item.objects.filter(study=participant.study, external_id=external_id).first()
    return None


#: Items given back in one claim because the participant met them as checks (bounded: checks are few).
CLAIM_SKIPS = 20


def claim_for(
    participant: Participant, now: datetime | None = None, *, ahead_of: int | None = None
) -> Assignment | None:
    """The participant's next item, never one they answered as a check (that one is given back to the pool).

    The claim never hands out an item that is a check now (Item.is_check), so the only items given
    back here are those that were checks when this participant answered them and have since been
    taken off the link's lists (they are ordinary items again for everyone else).
    With `ahead_of` (the item on their screen), the one after it (`claim_next`'s; LeaseLost when
    the one on screen is no longer theirs); crowd/ahead.py says when it may be asked.
    """
    user, study = participant.member.user, participant.study
    checked = set(
        ParticipantCheck.objects.filter(participant=participant, item__is_check=False).values_list("item_id", flat=True)
    )
    for _ in range(CLAIM_SKIPS):
        assignment = claim_next(user=user, study=study, now=now, ahead_of=ahead_of)
        if assignment is None or assignment.item_id not in checked:
            return assignment
        skip(user=user, study=study, assignment_id=assignment.pk, now=now)
    return None


def answer_check(
    *, participant: Participant, link: ParticipantLink, item: Item, answer: SubmittedAnswer, now: datetime | None = None
) -> ParticipantCheck:
    """Score a check answer against gold, keep it, and end the session when the rule says so."""
    now = now or timezone.now()
    study = participant.study
    kind = (
        ParticipantCheck.Kind.QUALIFICATION
        if participant.status == Status.QUALIFYING
        else ParticipantCheck.Kind.ATTENTION
    )
    shown = Assignment(study=study, item=item, left_system=(study.systems or [""])[0])
    values = answer_values(study, shown, answer)
    with transaction.atomic():
        check, created = ParticipantCheck.objects.get_or_create(
            participant=participant,
            item=item,
            defaults={
                "kind": kind,
                "label": values.label,
                "correct": values.label == item.gold_label,
                "active_ms": values.active_ms,
                "answered_at": now,
            },
        )
        if not created:
            return check  # a double click: the first answer stands
        counter = "checks_passed" if check.correct else "checks_failed"
        Participant.objects.filter(pk=participant.pk).update(**{counter: getattr(participant, counter) + 1})
        participant.refresh_from_db()
    if kind == ParticipantCheck.Kind.QUALIFICATION:
        checks = ParticipantCheck.objects.filter(participant=participant, kind=kind)
        if checks.count() >= len(link.qualification_items):
            passed = checks.filter(correct=True).count() >= link.qualification_pass
            if passed:
                _set_status(participant, Status.WORKING, now)
            else:
                end(participant=participant, status=Status.SCREENED_OUT, now=now)
    else:
        failed = ParticipantCheck.objects.filter(participant=participant, kind=kind, correct=False).count()
        if failed >= max(1, link.attention_fail_limit):
            end(participant=participant, status=Status.SCREENED_OUT, now=now)
    return check


def active_ms(participant: Participant) -> int:
    """The participant's active time on their submitted items, as the pages measured it."""
    total = Annotation.objects.filter(
        assignment__study=participant.study,
        assignment__annotator_id=participant.member.user_id,
        assignment__status=Assignment.Status.SUBMITTED,
    ).aggregate(ms=Sum("active_ms"))["ms"]
    return total or 0


def active_minutes(participant: Participant) -> float:
    return active_ms(participant) / 60_000


def after_item(*, participant: Participant, link: ParticipantLink, now: datetime | None = None) -> None:
    """After a submitted item: the item quota, or the time budget, reached ends the session as completed."""
    if participant.status != Status.WORKING:
        return
    quota_met = items_done(participant) >= link.items_per_participant
    budget_met = link.budget_minutes is not None and active_minutes(participant) >= link.budget_minutes
    if quota_met or budget_met:
        end(participant=participant, status=Status.COMPLETED, now=now)


def withdraw(*, participant: Participant, now: datetime | None = None) -> None:
    """The participant leaves the study: their labels leave analysis and exports; the withdrawal is recorded."""
    now = now or timezone.now()
    Participant.objects.filter(pk=participant.pk).update(status=Status.WITHDRAWN, withdrawn_at=now, finished_at=now)
    participant.refresh_from_db()
    release_held(participant)


def code_for(participant: Participant, link: ParticipantLink) -> str:
    codes: dict[str, str] = {
        Status.COMPLETED: link.code_completed,
        Status.SCREENED_OUT: link.code_screened_out,
        Status.TIMED_OUT: link.code_timed_out,
    }
    return codes.get(participant.status, "")


def redirect_for(participant: Participant, link: ParticipantLink) -> str:
    """Where the panel takes the participant back, with their code; empty when the study names none."""
    return redirect_with(link, code_for(participant, link))


def redirect_with(link: ParticipantLink, code: str) -> str:
    """The link's redirect URL with `code` in it; empty without a URL or a code (nothing to take back)."""
    if not link.redirect_url or not code:
        return ""
    if "{code}" in link.redirect_url:
        return link.redirect_url.replace("{code}", quote(code, safe=""))
    return link.redirect_url
