"""The server's side of the next item kept ready by static/js/workbench.js (issue 15), in one place
for both pages that use it: the annotate page (workbench/views.py) and the crowd participant's
item page (crowd/views.py, crowd/ahead_views.py).

The page asks an "ahead" route for the item after the one on screen, sends answers to its form's
own route with the header below (JSON instead of a redirect, with the item after that), and gives
an unseen item back to a "release" route when it leaves. Each page says where those routes are in
its item's config (`prefetch_config`).
"""

from __future__ import annotations

from datetime import datetime

from django.http import HttpRequest, JsonResponse
from django.utils.dateparse import parse_datetime

from annotation.models import Assignment

#: The header workbench.js sends with a background submit; the answer is JSON instead of a redirect.
BACKGROUND_HEADER = "X-Claimlab-Workbench"

#: The release route's refusal of a request without the stamp the item was handed out with.
STAMP_MISSING = "updated_at: the time the item was handed out, ISO 8601"


def in_background(request: HttpRequest) -> bool:
    return request.headers.get(BACKGROUND_HEADER) == "1"


def holding(request: HttpRequest) -> int | None:
    """The assignment workbench.js shows while this answer is being sent (fetched ahead), if any."""
    value = request.POST.get("holding", "")
    return int(value) if value.isdigit() and len(value) < 19 else None


def release_stamp(request: HttpRequest) -> datetime | None:
    """`updated_at` as handed out: it guards against releasing one that another page of theirs renewed."""
    return parse_datetime(request.POST.get("updated_at", ""))


#: The ahead routes' reply when the item on screen was answered before the request for the item after it
#: was served (the page sends both at once, and the answer may win the race): not an error, the answer's
#: own reply brings the next item. A 409 would be logged by the browser as a failed resource.
ANSWERED_MEANWHILE = {"ahead": None, "answered": True}


def answered_meanwhile(shown: Assignment) -> bool:
    """Whether the assignment on screen has been answered by now (read again: the claim saw it lost)."""
    return Assignment.objects.filter(pk=shown.pk, status=Assignment.Status.SUBMITTED).exists()


def lost_or_answered(shown: Assignment, lost: str) -> JsonResponse:
    """An ahead request whose item on screen is no longer active: answered meanwhile (200) or lost (409)."""
    if answered_meanwhile(shown):
        return JsonResponse(ANSWERED_MEANWHILE)
    return JsonResponse({"error": lost}, status=409)


def form_refusal(form) -> JsonResponse:
    """A background answer the form refused (the page checks first, so this is rare): 400 with the reasons."""
    errors = [str(error) for errors in form.errors.values() for error in errors]
    return JsonResponse({"saved": False, "error": "; ".join(errors)}, status=400)


def prefetch_config(
    assignment: Assignment, *, ahead_url: str, release_url: str, annotate_url: str, progress: dict
) -> dict:
    """What workbench.js needs to keep the item after `assignment` ready (absent: the page works as plain forms).

    `annotate_url` is where the page goes when nothing is ahead after an answer (the finish page,
    or a crowd participant's next step); `progress` is the server's count of answers.
    """
    return {
        "ahead_url": ahead_url,
        "release_url": release_url,
        "updated_at": assignment.updated_at.isoformat() if assignment.updated_at else "",
        "annotate_url": annotate_url,
        "progress": progress,
    }
