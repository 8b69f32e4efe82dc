"""A crowd participant's next item kept ready, as on the annotate page (issue 15 §1, for the crowd).

static/js/workbench.js asks `participant_ahead` for the item after the one on screen, sends answers
to the step route in the background (header `X-Claimlab-Workbench`; participant_views.step answers
them with the JSON built here) and gives an unseen item back to `participant_release` when the
participant leaves. The participant is their session (crowd/session.py), never a login: an
assignment that is not theirs is a 404, every route is a CSRF-checked POST and never cached.

Which item may be claimed ahead is crowd/ahead.py's rule (never a check, never past
the quota or the time limit). A reply with `go` means the page's flow goes on at the step URL (a
check, the end, a refusal that ends the session's items): the page goes there once its other
answers are sent. A refused answer is also left as a message for that page, so it is said there.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from annotation.crowd.ahead import claim_ahead, next_after_answer
from annotation.crowd.render import item_fragment, progress
from annotation.crowd.session import UNKNOWN, arrived, their_assignment
from annotation.errors import ServiceError
from annotation.models import Participant, ParticipantLink
from annotation.workbench.prefetch import STAMP_MISSING, holding, lost_or_answered, release_stamp
from annotation.workbench.services import ClaimContention, LeaseLost, NotAllowed, release_ahead

Status = Participant.Status

#: An assignment id that is not the participant's (never was, or another participant's).
NOT_YOURS = "that item is not one of yours"

#: Why an answer cannot be taken any more, by the participant's status.
ENDED_REASONS: dict[str, str] = {
    Status.COMPLETED: "you had already finished this study",
    Status.SCREENED_OUT: "the study had already ended for you",
    Status.TIMED_OUT: "your time for this study ran out",
    Status.WITHDRAWN: "you have withdrawn from this study",
}


def _step_url(participant: Participant) -> str:
    return reverse("annotation:participant_step", args=[participant.study.slug])


def refused_for_good(
    request: HttpRequest, participant: Participant, reason: str = "", *, status: int = 409
) -> JsonResponse:
    """An answer that cannot be saved now or later: said in JSON and, for the step page it goes to, as a message."""
    reason = reason or ENDED_REASONS.get(participant.status, "this page is out of date")
    messages.error(request, f"Your answer was not saved: {reason}.")
    return JsonResponse({"saved": False, "error": reason, "go": _step_url(participant)}, status=status)


def refused_in_background(request: HttpRequest, participant: Participant, exc: ServiceError) -> JsonResponse:
    """`submit` said no to an answer sent in the background: a lost lease 409 (the page says so and goes
    on), a closed study 403 (on to the step, which says why), contention 503 (the page sends it again)."""
    if isinstance(exc, LeaseLost):
        return JsonResponse({"saved": False, "error": str(exc)}, status=409)
    if isinstance(exc, NotAllowed):
        return refused_for_good(request, participant, str(exc), status=403)
    if isinstance(exc, ClaimContention):
        return JsonResponse({"saved": False, "error": str(exc)}, status=503, headers={"Retry-After": "1"})
    return JsonResponse({"saved": False, "error": str(exc)}, status=400)


def answered_in_background(request: HttpRequest, participant: Participant, link: ParticipantLink) -> JsonResponse:
    """After an answer sent in the background (saved, `after_item` done): the progress and the item after
    the one now on screen; `go` when the session ended with it, or the item on screen was lost and no
    item comes next."""
    counts = progress(participant, link)
    body: dict = {"saved": True, "progress": counts}
    if participant.status != Status.WORKING:
        return JsonResponse({**body, "ahead": None, "go": _step_url(participant)})
    try:
        following, lost = next_after_answer(participant, link, holding=holding(request))
    except (ClaimContention, NotAllowed):
        return JsonResponse(body)  # saved; the page asks again (participant_ahead says why)
    body["ahead"] = item_fragment(request, participant, link, following, counts) if following else None
    body["holding_lost"] = lost
    if lost and following is None:
        body["go"] = _step_url(participant)
    return JsonResponse(body)


@never_cache
@require_POST
def participant_ahead(request: HttpRequest, slug: str, assignment_id: int) -> JsonResponse:
    """The item after the one on screen (`assignment_id`), claimed and rendered for workbench.js.

    {"ahead": {"id", "html"}}, or {"ahead": null} when the next step is not an item (a check, the
    quota's end, the time limit) or nothing is left; with "go" when the session has ended; with
    "answered" when the one on screen was answered meanwhile. 404 for an assignment that is not the
    participant's, 409 when the one on screen is no longer theirs.
    """
    found = arrived(request, slug)
    if found is None:
        return JsonResponse({"error": UNKNOWN}, status=404)
    participant, link = found
    shown = their_assignment(participant, assignment_id)
    if shown is None:
        return JsonResponse({"error": NOT_YOURS}, status=404)
    if participant.status != Status.WORKING:
        return JsonResponse({"ahead": None, "go": _step_url(participant)})
    try:
        ahead = claim_ahead(participant, link, shown_id=shown.pk)
    except LeaseLost as exc:
        return lost_or_answered(shown, str(exc))
    except NotAllowed as exc:
        return JsonResponse({"error": str(exc)}, status=403)
    except ClaimContention as exc:
        return JsonResponse({"error": str(exc)}, status=503, headers={"Retry-After": "1"})
    if ahead is None:
        return JsonResponse({"ahead": None})
    return JsonResponse({"ahead": item_fragment(request, participant, link, ahead, progress(participant, link))})


@never_cache
@require_POST
def participant_release(request: HttpRequest, slug: str, assignment_id: int) -> JsonResponse:
    """Give back an item fetched ahead that the participant never saw (sent when they leave the page)."""
    found = arrived(request, slug)
    if found is None:
        return JsonResponse({"error": UNKNOWN}, status=404)
    participant, _link = found
    if their_assignment(participant, assignment_id) is None:
        return JsonResponse({"error": NOT_YOURS}, status=404)
    stamp = release_stamp(request)
    if stamp is None:
        return JsonResponse({"error": STAMP_MISSING}, status=400)
    user, study = participant.member.user, participant.study
    return JsonResponse(
        {"released": release_ahead(user=user, study=study, assignment_id=assignment_id, updated_at=stamp)}
    )
