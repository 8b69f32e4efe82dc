"""Who a request's crowd participant is: the signed session cookie maps a study to its Participant.

Participants are never logged in, so this is their only identity: every participant route
(the pages, and the item-ahead and release routes) finds them here, and only their own
assignments through them. A different panel ID in the same browser replaces the session's
participant for that study, so it is a different person.
"""

from __future__ import annotations

from django.http import HttpRequest
from django.utils import timezone

from annotation.crowd import services as crowd
from annotation.models import Assignment, Participant, ParticipantLink
from annotation.progress.selectors import own_assignment

SESSION_KEY = "crowd_participants"
#: Said (page and JSON) to a browser whose session holds no participant of the study.
UNKNOWN = "We do not know who you are in this study. Go back to the panel and open the study link again."


def remember(request: HttpRequest, participant: Participant) -> None:
    held = dict(request.session.get(SESSION_KEY, {}))
    held[str(participant.study_id)] = participant.pk
    request.session[SESSION_KEY] = held
    request.session.cycle_key()  # a new participant (or a returning one) gets a fresh session id


def current(request: HttpRequest, slug: str) -> Participant | None:
    held = request.session.get(SESSION_KEY, {})
    for study_id, participant_id in held.items():
        found = (
            Participant.objects.select_related("study", "member__user")
            .filter(pk=participant_id, study_id=study_id, study__slug=slug)
            .first()
        )
        if found is not None:
            return found
    return None


def arrived(request: HttpRequest, slug: str) -> tuple[Participant, ParticipantLink] | None:
    """The request's participant in the study and its link; None when the session holds none.

    A session past its time limit is ended here (timed out, its items given back, the one
    fetched ahead too), on every request, so no route answers for a participant out of time.
    """
    participant = current(request, slug)
    if participant is None:
        return None
    link = crowd.link_for(participant.study)
    now = timezone.now()
    if not participant.ended and crowd.time_is_up(participant, link, now):
        crowd.end(participant=participant, status=Participant.Status.TIMED_OUT, now=now)
    return participant, link


def their_assignment(participant: Participant, assignment_id: int) -> Assignment | None:
    """One of the participant's own assignments (with its item), or None: anyone else's is not found."""
    return own_assignment(participant.member.user, participant.study, assignment_id)
