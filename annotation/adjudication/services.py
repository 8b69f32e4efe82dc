"""Writes of adjudication: an adjudicator's final label for an item (with revisions), importing
past adjudications all-or-nothing, and a study's adjudication settings.

Adjudications live beside annotations and never change them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from annotation.errors import ErrorCollector, ImportResult, ServiceError
from annotation.lib.formats import MAX_LINE_BYTES, RecordError
from annotation.models import (
    Adjudication,
    AdjudicationRevision,
    AdjudicationRule,
    Item,
    Participant,
    ReferenceRule,
    Study,
    StudyChange,
    StudyMember,
)
from annotation.vocab import PREFERENCE_STRENGTHS, PREFERENCE_TIE, canonical_label, preference_label, preference_parts

MAX_NOTE_LENGTH = 10_000
#: The study's adjudication settings (analysis settings: they may change at any time, and a
#: duplicated study keeps them).
ADJUDICATION_SETTINGS: tuple[str, ...] = (
    "adjudication_rule",
    "adjudication_audit_share",
    "adjudication_shows_systems",
    "adjudication_shows_verifiers",
    "reference_rule",
)
ADJUDICATION_IMPORT_FIELDS = frozenset(
    {"item", "adjudicator", "label", "preferred", "strength", "note", "guidelines_unclear"}
)


@dataclass(frozen=True)
class Verdict:
    """A final label in system space: the canonical label and, for preference, system and strength."""

    label: str
    preferred_system: str = ""
    strength: str = ""


def verdict_for(study: Study, *, label: str = "", preferred: str = "", strength: str = "") -> Verdict:
    """The canonical verdict from a label, or (preference) a preferred system or list and a strength.

    `preferred` may be a system name, "List 1"/"List 2" (the study's systems in declared
    order, as the page shows them when names are hidden) or "tie". Raises ServiceError
    naming what is wrong.
    """
    systems = list(study.systems)
    if study.is_preference and not label:
        chosen = preferred.strip()
        if not chosen:
            raise ServiceError("give a label, or the preferred system (or 'tie') with a strength")
        if chosen.casefold() == PREFERENCE_TIE:
            label = PREFERENCE_TIE
        else:
            lists = {f"list {n}": system for n, system in enumerate(systems, start=1)}
            system = chosen if chosen in systems else lists.get(chosen.casefold())
            if system is None:
                raise ServiceError(f"{chosen!r} is not one of the study's systems ({', '.join(systems)})")
            if strength not in PREFERENCE_STRENGTHS:
                raise ServiceError(
                    f"strength must be 'strong' or 'slight' when a system is preferred, got {strength!r}"
                )
            label = preference_label(systems.index(system), strength)
    canonical = canonical_label(label, study.labels, study.label_aliases) if label else None
    if canonical is None:
        raise ServiceError(f"{label!r} is not one of the study's labels ({', '.join(study.labels)})")
    if not study.is_preference:
        return Verdict(canonical)
    index, part = preference_parts(canonical)
    if index is None:
        return Verdict(canonical)
    if len(systems) != 2:
        raise ServiceError("the study has no declared systems yet; import its items first")
    return Verdict(canonical, systems[index], part)


def adjudicate(
    *,
    item: Item,
    adjudicator: User,
    verdict: Verdict,
    note: str = "",
    guidelines_unclear: bool = False,
    source: str = Adjudication.Source.WEB,
) -> tuple[Adjudication, bool]:
    """Store (or revise) `adjudicator`'s final label for `item`; returns (adjudication, created).

    A revision keeps the old and new values; the same answer again changes nothing.
    Who may adjudicate is the access helper's question, not this function's.
    """
    if len(note) > MAX_NOTE_LENGTH:
        raise ServiceError(f"the note is longer than {MAX_NOTE_LENGTH} characters")
    values = {
        "label": verdict.label,
        "preferred_system": verdict.preferred_system,
        "strength": verdict.strength,
        "note": note.strip(),
        "guidelines_unclear": bool(guidelines_unclear),
    }
    with transaction.atomic():
        existing = Adjudication.objects.select_for_update().filter(item=item, adjudicator=adjudicator).first()
        if existing is None:
            try:
                with transaction.atomic():
                    created = Adjudication.objects.create(
                        study_id=item.study_id, item=item, adjudicator=adjudicator, source=source, **values
                    )
                return created, True
            except IntegrityError:
                # The same adjudicator's other request (a double submit) stored it first: revise that one.
                existing = Adjudication.objects.select_for_update().get(item=item, adjudicator=adjudicator)
        old = existing.snapshot()
        if old == values:
            return existing, False
        for name, value in values.items():
            setattr(existing, name, value)
        existing.source = source
        existing.save()
        AdjudicationRevision.objects.create(
            adjudication=existing, old_value=old, new_value=values, changed_by=adjudicator
        )
        return existing, False


def import_adjudications(
    *, study: Study, stream: IO[bytes], fmt: str, max_line_bytes: int = MAX_LINE_BYTES
) -> ImportResult:
    """Import past adjudications (item, adjudicator, label or preferred + strength, note,
    guidelines_unclear): every line checked first, then all stored in one transaction, or
    nothing and ImportFailed with the problems by line.

    `adjudicator` names a member of the study by pseudonym or username; a second record of
    the same adjudicator on an item revises the first (as a revision).
    """
    errors = ErrorCollector()
    result = ImportResult()
    items = {item.external_id: item for item in Item.objects.filter(study=study)}
    people: dict[str, User] = {}
    for member in StudyMember.objects.filter(study=study, is_active=True).select_related("user"):
        people.setdefault(member.user.username, member.user)
        people[member.pseudonym] = member.user
    rows: list[tuple[Item, User, Verdict, str, bool]] = []
    for line, record in errors.records(stream, fmt, result, max_line_bytes=max_line_bytes):
        problems: list[RecordError] = []
        unknown = sorted(set(record) - ADJUDICATION_IMPORT_FIELDS)
        if unknown:
            problems.append(RecordError(line, f"unknown field(s) {', '.join(unknown)}"))
        item = items.get(_text(record.get("item")))
        if item is None:
            problems.append(RecordError(line, f"no item {_text(record.get('item'))!r} in this study", "item"))
        name = _text(record.get("adjudicator"))
        person = people.get(name)
        if person is None:
            problems.append(
                RecordError(line, f"{name!r} is not a member of this study (add them first)", "adjudicator")
            )
        note = _text(record.get("note"))
        unclear = _text(record.get("guidelines_unclear")).casefold() in ("1", "true", "yes")
        try:
            verdict = verdict_for(
                study,
                label=_text(record.get("label")),
                preferred=_text(record.get("preferred")),
                strength=_text(record.get("strength")).casefold(),
            )
        except ServiceError as exc:
            problems.append(RecordError(line, str(exc), "label"))
        if len(note) > MAX_NOTE_LENGTH:
            problems.append(RecordError(line, f"longer than {MAX_NOTE_LENGTH} characters", "note"))
        if problems:
            errors.extend(problems)
            continue
        assert item is not None and person is not None
        rows.append((item, person, verdict, note, unclear))
    if errors:
        raise errors.fail()
    with transaction.atomic():
        for item, person, verdict, note, unclear in rows:
            _, created = adjudicate(
                item=item,
                adjudicator=person,
                verdict=verdict,
                note=note,
                guidelines_unclear=unclear,
                source=Adjudication.Source.IMPORT,
            )
            if created:
                result.created += 1
            else:
                result.updated += 1
    return result


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


def set_adjudication_settings(
    *,
    study: Study,
    user: User | None,
    rule: str | None = None,
    audit_share: float | None = None,
    shows_systems: bool | None = None,
    shows_verifiers: bool | None = None,
    reference_rule: str | None = None,
) -> list[StudyChange]:
    """Change how the queue is built and where reference labels come from; every change is recorded
    (these are analysis settings: they may change at any time and never touch a stored label)."""
    changes: dict[str, object] = {}
    if rule is not None:
        if rule not in AdjudicationRule.values:
            raise ServiceError(f"adjudication rule {rule!r} is not one of {', '.join(AdjudicationRule.values)}")
        changes["adjudication_rule"] = rule
    if audit_share is not None:
        if not 0 < audit_share <= 1:
            raise ServiceError(f"audit share must be above 0 and at most 1, got {audit_share}")
        changes["adjudication_audit_share"] = float(audit_share)
    if shows_systems is not None:
        changes["adjudication_shows_systems"] = bool(shows_systems)
    if shows_verifiers is not None:
        changes["adjudication_shows_verifiers"] = bool(shows_verifiers)
    if reference_rule is not None:
        if reference_rule not in ReferenceRule.values:
            raise ServiceError(f"reference rule {reference_rule!r} is not one of {', '.join(ReferenceRule.values)}")
        changes["reference_rule"] = reference_rule
    recorded = []
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        for name, value in changes.items():
            old = getattr(locked, name)
            if old == value:
                continue
            setattr(locked, name, value)
            setattr(study, name, value)
            recorded.append(StudyChange(study=locked, changed_by=user, field=name, old_value=old, new_value=value))
        if recorded:
            locked.save(update_fields=[change.field for change in recorded] + ["updated_at"])
            StudyChange.objects.bulk_create(recorded)
    return recorded


def set_can_adjudicate(*, member: StudyMember, allowed: bool) -> StudyMember:
    """Give or take a member's adjudicator flag; never given to a crowd participant, whose account
    cannot log in (one who withdrew was offered it, issue 29)."""
    if allowed and Participant.objects.filter(member=member).exists():
        raise ServiceError(f"{member.pseudonym} is a crowd participant, who cannot log in, so cannot adjudicate")
    member.can_adjudicate = allowed
    member.save(update_fields=["can_adjudicate"])
    return member
