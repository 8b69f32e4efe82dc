"""How a crowd participant's pages are drawn: the frame, the item page, and an item as the fragment
that static/js/workbench.js keeps ready off-screen (issue 15). One template, participant/_item.html,
draws an item both ways, so the item swapped in is the item a page load would show.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse

from annotation.conditions.services import shown_suggestion
from annotation.crowd import services as crowd
from annotation.models import Assignment, Item, Participant, ParticipantLink
from annotation.workbench.forms import answer_form as study_answer_form
from annotation.workbench.prefetch import prefetch_config
from annotation.workbench.selectors import display_payload


def page(request: HttpRequest, template: str, context: dict, *, status: int = 200) -> HttpResponse:
    response = render(request, f"annotation/participant/{template}", context, status=status)
    response["X-Robots-Tag"] = "noindex"
    return response


def stop(request: HttpRequest, title: str, reason: str, *, status: int) -> HttpResponse:
    return page(request, "stop.html", {"title": title, "reason": reason}, status=status)


def no_places(request: HttpRequest, link: ParticipantLink) -> HttpResponse:
    """The page for an arrival after the participant cap: its own code (`code_full`) and the way back to the
    panel with it, as the other ends have; nobody is admitted, so nothing is stored for them."""
    context = {
        "study": link.study,
        "code": link.code_full,
        "redirect_url": crowd.redirect_with(link, link.code_full),
    }
    return page(request, "full.html", context, status=410)


def answer_form(participant: Participant, item: Item, data=None, *, left_system: str | None = None):
    """The answer form of an item shown with `left_system` on the left (default: the study's first system,
    as a check is shown)."""
    study = participant.study
    passages = 0 if study.is_preference else len(item.payload.get("evidence", []))
    left = left_system if left_system is not None else (study.systems or [""])[0]
    shown = Assignment(study=study, item=item, left_system=left)
    return study_answer_form(study, passages=passages, data=data, assignment=shown)


def progress(participant: Participant, link: ParticipantLink) -> dict:
    """Answers given and the quota; with a time budget, the active time spent and the budget, so the
    page can tell the answer that reaches it (it ends the session: the item ahead is not shown)."""
    counts: dict = {"done": crowd.items_done(participant), "total": link.items_per_participant}
    if link.budget_minutes is not None:
        counts.update(active_ms=crowd.active_ms(participant), budget_ms=link.budget_minutes * 60_000)
    return counts


def item_context(
    participant: Participant, link: ParticipantLink, shown: Assignment, form, *, check: bool, counts: dict
) -> dict:
    """What participant/_item.html needs for one item; a regular one carries the config to fetch the next ahead."""
    study = participant.study
    slug = study.slug
    item = display_payload(shown)
    timer: dict = {
        "study": slug,
        "assignment": f"check-{participant.pk}-{shown.item_id}" if check else shown.pk,
        "base_ms": 0,
        "persist": True,
        # One keystroke per label when the study asks for nothing else, as on the annotate page.
        "submit_on_label": study.submit_on_label,
    }
    if not check:
        timer["prefetch"] = prefetch_config(
            shown,
            ahead_url=reverse("annotation:participant_ahead", args=[slug, shown.pk]),
            release_url=reverse("annotation:participant_release", args=[slug, shown.pk]),
            annotate_url=reverse("annotation:participant_step", args=[slug]),
            progress=counts,
        )
    return {
        "study": study,
        "participant": participant,
        "link": link,
        "progress": counts,
        "assignment": shown,
        "item": item,
        "form": form,
        "passages": [] if study.is_preference else form.passage_rows(item["evidence"]),
        "check": check,
        "check_item": shown.item_id if check else None,
        "timer": timer,
        # A check is no item of the study's: no suggestion beside it (checks stay blind).
        "suggestion": None if check else shown_suggestion(participant.member.user, study, shown),
    }


def item_fragment(
    request: HttpRequest, participant: Participant, link: ParticipantLink, assignment: Assignment, counts: dict
) -> dict:
    """An item claimed ahead, as workbench.js keeps it: its id and its rendered item."""
    form = answer_form(participant, assignment.item, left_system=assignment.left_system)
    context = item_context(participant, link, assignment, form, check=False, counts=counts)
    return {"id": assignment.pk, "html": render_to_string("annotation/participant/_item.html", context, request)}
