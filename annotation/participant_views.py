"""The crowd participant's pages: /p/<token>/ (arrival) and /crowd/<slug>/ (every step after it).

Participants are never logged in: the signed session cookie maps a study to their
Participant, so every researcher page and the API treat them as anonymous (login
page, 401/403). A different panel ID in the same browser replaces the session's
participant for that study, so it is a different person. Each step's POST moves them
on through services/participants.py and redirects back (post/redirect/get).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache

from .forms import answer_form
from .models import Annotation, Assignment, Item, Participant, ParticipantLink
from .selectors.workbench import display_payload
from .services import ServiceError
from .services import participants as crowd
from .services.assignments import ClaimContention, LeaseLost, NotAllowed, submit

SESSION_KEY = "crowd_participants"
Status = Participant.Status


def _page(request: HttpRequest, template: str, context: dict, *, status: int = 200) -> HttpResponse:
    response = render(request, f"annotation/participant/{template}", context, status=status)
    response["X-Robots-Tag"] = "noindex"
    return response


def _stop(request: HttpRequest, title: str, reason: str, *, status: int) -> HttpResponse:
    return _page(request, "stop.html", {"title": title, "reason": reason}, status=status)


def _remember(request: HttpRequest, participant: Participant) -> None:
    held = dict(request.session.get(SESSION_KEY, {}))
    held[str(participant.study_id)] = participant.pk
    request.session[SESSION_KEY] = held
    request.session.cycle_key()  # a new participant (or a returning one) gets a fresh session id


def _current(request: HttpRequest, slug: str) -> Participant | None:
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


@never_cache
def arrive(request: HttpRequest, token: str) -> HttpResponse:
    """The link a panel sends people to, with their panel ID in the query string."""
    if request.method != "GET":
        return HttpResponseNotAllowed(["GET"])
    link = crowd.find_link(token)
    if link is None:
        reason = (
            "This study link is not valid (it may have been replaced). Go back to the panel and open the study again."
        )
        return _stop(request, "This link does not work", reason, status=404)
    try:
        ids = crowd.panel_ids_from(link, request.GET)
        participant = crowd.arrive(link=link, ids=ids)
    except crowd.BadPanelId as exc:
        return _stop(request, "Your participant ID is missing", f"We cannot start: {exc}.", status=400)
    except crowd.LinkUnusable as exc:
        return _stop(request, "This study is not taking participants", str(exc), status=410)
    except ServiceError as exc:
        return _stop(request, "Please try again", f"{exc}.", status=503)
    _remember(request, participant)
    return redirect("annotation:participant_step", slug=link.study.slug)


def _link(participant: Participant) -> ParticipantLink:
    return crowd.link_for(participant.study)


@never_cache
def step(request: HttpRequest, slug: str) -> HttpResponse:
    """Whatever comes next for this participant: consent, instructions, a check, an item, or the end."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    participant = _current(request, slug)
    if participant is None:
        reason = "We do not know who you are in this study. Go back to the panel and open the study link again."
        return _stop(request, "Open the study from the panel", reason, status=404)
    link = _link(participant)
    now = timezone.now()
    if not participant.ended and crowd.time_is_up(participant, link, now):
        crowd.end(participant=participant, status=Status.TIMED_OUT, now=now)
    if request.method == "POST" and not participant.ended:
        crowd.seen(participant, now)
        return _act(request, participant, link)
    return _show(request, participant, link)


def _act(request: HttpRequest, participant: Participant, link: ParticipantLink) -> HttpResponse:
    action = request.POST.get("action", "")
    again = redirect("annotation:participant_step", slug=participant.study.slug)
    if action == "withdraw":
        crowd.withdraw(participant=participant)
    elif action == "consent" and participant.status == Status.CONSENT:
        if request.POST.get("agree") != "yes":
            return _show(request, participant, link, error="Tick the box to say you agree, or close this page.")
        crowd.accept_consent(participant=participant)
    elif action == "start":
        crowd.start(participant=participant, link=link)
    elif action == "check":
        item = crowd.next_check(participant, link)
        if item is None or str(item.pk) != request.POST.get("item"):
            return again  # answered already (a second tab); show what comes next
        form = _form(participant, item, request.POST)
        if not form.is_valid():
            return _show(request, participant, link, form=form, status=400)
        try:
            crowd.answer_check(participant=participant, link=link, item=item, answer=form.to_answer())
        except ServiceError as exc:
            form.add_error(None, str(exc))
            return _show(request, participant, link, form=form, status=400)
    elif action == "answer" and participant.status == Status.WORKING:
        return _answer(request, participant, link)
    return again


def _answer(request: HttpRequest, participant: Participant, link: ParticipantLink) -> HttpResponse:
    study = participant.study
    user = participant.member.user
    assignment = (
        Assignment.objects.select_related("item")
        .filter(pk=request.POST.get("assignment") or 0, study=study, annotator=user)
        .first()
        if (request.POST.get("assignment") or "").isdigit()
        else None
    )
    if assignment is None:
        return redirect("annotation:participant_step", slug=study.slug)
    assignment.study = study
    form = _form(participant, assignment.item, request.POST)
    if not form.is_valid():
        return _show(request, participant, link, form=form, status=400)
    try:
        submit(
            user=user, study=study, assignment_id=assignment.pk, answer=form.to_answer(), source=Annotation.Source.WEB
        )
    except (LeaseLost, NotAllowed) as exc:
        return _show(request, participant, link, error=f"Your answer was not saved: {exc}.")
    except ServiceError as exc:
        form.add_error(None, str(exc))
        return _show(request, participant, link, form=form, status=400)
    crowd.after_item(participant=participant, link=link)
    return redirect("annotation:participant_step", slug=study.slug)


def _form(participant: Participant, item: Item, data=None):
    study = participant.study
    passages = 0 if study.is_preference else len(item.payload.get("evidence", []))
    return answer_form(study, passages=passages, data=data)


def _show(
    request: HttpRequest,
    participant: Participant,
    link: ParticipantLink,
    *,
    form=None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    study = participant.study
    context: dict = {"study": study, "participant": participant, "link": link, "error": error}
    if participant.ended:
        context.update(code=crowd.code_for(participant, link), redirect_url=crowd.redirect_for(participant, link))
        return _page(request, "end.html", context)
    if participant.status == Status.CONSENT:
        return _page(request, "consent.html", context, status=400 if error else 200)
    if participant.status == Status.INSTRUCTIONS:
        return _page(request, "instructions.html", context)
    done = crowd.items_done(participant)
    context["progress"] = {"done": done, "total": link.items_per_participant}
    check = crowd.next_check(participant, link)
    if check is not None:
        shown = Assignment(study=study, item=check, left_system=(study.systems or [""])[0])
        return _item_page(request, context, shown, form or _form(participant, check), check=True, status=status)
    if participant.status != Status.WORKING:  # qualifying with nothing left to ask: the service has moved them on
        return redirect("annotation:participant_step", slug=study.slug)
    try:
        assignment = crowd.claim_for(participant)
    except NotAllowed as exc:
        reason = f"No items are handed out right now ({exc}). Your answers so far are saved; come back later."
        return _stop(request, "No items right now", reason, status=503)
    except ClaimContention as exc:
        return _stop(request, "Busy", f"{exc}.", status=503)
    if assignment is None:
        crowd.end(participant=participant, status=Status.COMPLETED)
        return redirect("annotation:participant_step", slug=study.slug)
    return _item_page(
        request, context, assignment, form or _form(participant, assignment.item), check=False, status=status
    )


def _item_page(
    request: HttpRequest, context: dict, shown: Assignment, form, *, check: bool, status: int
) -> HttpResponse:
    study = context["study"]
    item = display_payload(shown)
    context.update(
        assignment=shown,
        item=item,
        form=form,
        passages=[] if study.is_preference else form.passage_rows(item["evidence"]),
        check=check,
        check_item=shown.item_id if check else None,
        timer={
            "study": study.slug,
            "assignment": f"check-{context['participant'].pk}-{shown.item_id}" if check else shown.pk,
            "base_ms": 0,
            "persist": True,
        },
    )
    return _page(request, "item.html", context, status=status)
