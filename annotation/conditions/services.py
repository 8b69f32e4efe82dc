"""Assigning each annotator (or crowd participant) one of the study's conditions, balanced and for good.

Why not a keyed hash of the person alone: with a few dozen people a hash leaves the conditions
unbalanced by chance. People are numbered in the order they first claim an item; within each
block of C people (C conditions) every condition comes once, in an order drawn from the study's
seed for that block (keyed hash). So among people who started, the counts per condition differ
by at most one, and which condition the k-th person gets cannot be foreseen without the seed.
The condition is kept on the membership (StudyMember.condition): fixed for the whole session and
every later one, and on every answer of theirs (exports and reports join it).
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from annotation.lib.randomisation import keyed_hash
from annotation.lib.suggestions import suggestion_for
from annotation.models import Assignment, Study, StudyMember
from annotation.vocab import preference_as_seen


def condition_at(study: Study, ordinal: int) -> str:
    """The condition of the person who started `ordinal`-th (0-based) in the study."""
    keys = [condition["key"] for condition in study.conditions]
    block, place = divmod(ordinal, len(keys))
    order = sorted(keys, key=lambda key: keyed_hash(study.seed, "condition", str(block), key))
    return order[place]


def condition_of(user: User, study: Study) -> str:
    """The user's condition in the study ("" when it declares none or they are not a member), assigned
    at the first call: what every claim calls first for a study with conditions."""
    if not study.conditions:
        return ""
    current = StudyMember.objects.filter(study=study, user=user).values_list("condition", flat=True).first()
    if current is None or current:
        return current or ""
    with transaction.atomic():
        # One assignment at a time per study (PostgreSQL: the study row's lock; SQLite's IMMEDIATE
        # transactions serialise every writer anyway): the count below is then exact.
        Study.objects.select_for_update().filter(pk=study.pk).values_list("pk", flat=True).first()
        member = StudyMember.objects.select_for_update().get(study=study, user=user)
        if not member.condition:
            started = StudyMember.objects.filter(study=study).exclude(condition="").count()
            member.condition = condition_at(study, started)
            member.save(update_fields=["condition"])
    return member.condition


def claimable_slots(user: User, study: Study) -> range | None:
    """The user's condition, assigned at their first call (what every claim calls first), and the slot numbers of an item the user may take where exact N holds per condition: the N of
    their condition, slots c*N to c*N + N - 1 for the c-th one; None (any slot of the item) otherwise.

    Why slot ranges: the (item, slot) unique constraint then keeps each condition at N on every
    item, as it keeps the item at its total, with no counter per condition to race on."""
    condition = condition_of(user, study)  # assigned here at the first claim, whichever rule holds
    n = study.annotators_per_item
    if study.slots_per_item == n or not condition:  # no condition: not a member, refused by the claim
        return None
    keys = [entry["key"] for entry in study.conditions]
    first = keys.index(condition) * n
    return range(first, first + n)


def forget_conditions(study: Study) -> None:
    """Clear everyone's condition (the study's conditions changed before its first answer)."""
    StudyMember.objects.filter(study=study).exclude(condition="").update(condition="")


def shown_suggestion(user: User, study: Study, assignment: Assignment) -> dict[str, str] | None:
    """The machine suggestion the user's condition shows beside the assignment's item (None: their condition
    shows none, or the verifier has no prediction on it). A preference judge's verdict is said in the
    terms of the screen ("List 1 slightly better"), as the assignment shows the lists."""
    if not study.conditions:
        return None
    key = condition_of(user, study)
    verifier = next((c["verifier"] for c in study.conditions if c["key"] == key), "")
    suggestion = suggestion_for(study, verifier, assignment.item)
    if suggestion is not None and study.is_preference:
        label = suggestion.get("code", suggestion["label"])
        suggestion = {**suggestion, "label": preference_as_seen(label, list(study.systems), assignment.left_system)}
    return suggestion
