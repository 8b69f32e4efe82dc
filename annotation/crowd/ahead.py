"""A crowd participant's next item, claimed ahead as the annotate page does (issue 15 §1, for the crowd).

The participant's item page keeps the item after the one on screen claimed and rendered
(static/js/workbench.js) through the annotators' own `claim_next(..., ahead_of=...)`, so exact N,
leases, order and sides are unchanged. Only a real assignment is claimed ahead: when the step
after the item on screen is a check, the end of the quota, or past the time limit, nothing is, and
the page goes on through the step URL as it does without JavaScript. A held lease counts against
nothing: the quota and the check schedule count answers, and every end (`participants.end`,
`participants.withdraw`) gives back all the participant's active assignments, the one ahead too.
A time budget cannot be foreseen (it depends on the time spent on the item on screen): the page
does not show the item ahead after an answer that reaches it, and the end gives its lease back.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from annotation.crowd.services import claim_for, next_check, time_is_up
from annotation.models import Assignment, Participant, ParticipantLink
from annotation.workbench.services import LeaseLost

Status = Participant.Status


def answers_through(participant: Participant, shown_id: int) -> int:
    """The participant's answers once the item on screen is answered: those given, plus their items
    still open up to it (answers on their way from the page, and the one on screen), not the one ahead.

    The item on screen is the oldest the page has not answered, and one claimed ahead is newer than it.
    """
    return (
        Assignment.objects.filter(study=participant.study, annotator_id=participant.member.user_id)
        .filter(Q(status=Assignment.Status.SUBMITTED) | Q(status=Assignment.Status.ACTIVE, pk__lte=shown_id))
        .count()
    )


def ahead_refusal(participant: Participant, link: ParticipantLink, *, shown_id: int, now: datetime) -> str | None:
    """Why nothing is claimed after the item on screen, or None when the step after it is certainly an item."""
    if participant.status != Status.WORKING:
        return "your session is not at the items"
    if time_is_up(participant, link, now):
        return "your time is up"
    after = answers_through(participant, shown_id)
    if after >= link.items_per_participant:
        return "the item on your screen is the last of your quota"
    if next_check(participant, link, done=after) is not None:
        return "a check comes after the item on your screen"
    return None


def claim_ahead(
    participant: Participant, link: ParticipantLink, *, shown_id: int, now: datetime | None = None
) -> Assignment | None:
    """The item after the one on screen, or None when the rules say no (`ahead_refusal`) or nothing is left.

    LeaseLost when the item on screen is no longer theirs (only asked when the rules say yes).
    """
    now = now or timezone.now()
    if ahead_refusal(participant, link, shown_id=shown_id, now=now) is not None:
        return None
    return claim_for(participant, now, ahead_of=shown_id)


def next_is_an_item(participant: Participant, link: ParticipantLink, now: datetime) -> bool:
    """Whether the participant's step page would show a regular item now (not a check, not the end)."""
    if participant.status != Status.WORKING or time_is_up(participant, link, now):
        return False
    return next_check(participant, link) is None


def next_after_answer(
    participant: Participant, link: ParticipantLink, *, holding: int | None, now: datetime | None = None
) -> tuple[Assignment | None, bool]:
    """What the page keeps ready after an answer sent in the background: (item, whether `holding` was lost).

    With `holding` (the item the page shows now, fetched ahead): the one after it, as `claim_ahead`.
    Without it, or when it is no longer theirs: the item the step page would show now, if that step
    is an item (None when it is a check or the end: the page then goes to the step URL).
    """
    now = now or timezone.now()
    lost = False
    if holding is not None:
        try:
            return claim_ahead(participant, link, shown_id=holding, now=now), False
        except LeaseLost:
            lost = True
    if not next_is_an_item(participant, link, now):
        return None, lost
    return claim_for(participant, now), lost
