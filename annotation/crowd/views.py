"""The crowd participant's pages: /p/<token>/ (arrival) and /crowd/<slug>/ (every step after it).

Participants are never logged in: the signed session cookie maps a study to their
Participant (crowd/session.py), so every researcher page and the API treat them as
anonymous (login page, 401/403). Each step's POST moves them on through
crowd/services.py and redirects back (post/redirect/get), so the pages work without
JavaScript. With it, an item page keeps the next item claimed ahead and sends answers to the
step in the background (crowd/ahead_views.py), which answers those in JSON.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.cache import never_cache

from annotation.crowd import services as crowd
from annotation.crowd.ahead_views import (
    ENDED_REASONS,
    NOT_YOURS,
    answered_in_background,
    refused_for_good,
    refused_in_background,
)
from annotation.crowd.render import answer_form, item_context, no_places, page, progress, stop
from annotation.crowd.session import UNKNOWN, arrived, remember, their_assignment
from annotation.errors import ServiceError
from annotation.models import Annotation, Assignment, Participant, ParticipantLink
from annotation.questions.forms import posted_answers
from annotation.questions.questionnaires import questions_of
from annotation.workbench import questionnaires, training
from annotation.workbench.prefetch import form_refusal, in_background
from annotation.workbench.questionnaire_views import questionnaire_context
from annotation.workbench.services import ClaimContention, LeaseLost, NotAllowed, submit

Status = Participant.Status


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
        return stop(request, "This link does not work", reason, status=404)
    try:
        ids = crowd.panel_ids_from(link, request.GET)
        participant = crowd.arrive(link=link, ids=ids)
    except crowd.BadPanelId as exc:
        return stop(request, "Your participant ID is missing", f"We cannot start: {exc}.", status=400)
    except crowd.LinkFull:
        return no_places(request, link)
    except crowd.LinkUnusable as exc:
        return stop(request, "This study is not taking participants", str(exc), status=410)
    except ServiceError as exc:
        return stop(request, "Please try again", f"{exc}.", status=503)
    remember(request, participant)
    return redirect("annotation:participant_step", slug=link.study.slug)


#: The step page's actions that carry an answer (an item's, or a check's).
ANSWERING = ("answer", "check")


@never_cache
def step(request: HttpRequest, slug: str) -> HttpResponse:
    """Whatever comes next for this participant: consent, instructions, a check, an item, or the end.

    An answer sent by workbench.js in the background (its header) is answered in JSON instead.
    """
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    background = request.method == "POST" and in_background(request)
    found = arrived(request, slug)
    if found is None:
        if background:  # 401: workbench.js keeps the answer until the participant is back through the link
            return JsonResponse({"saved": False, "error": UNKNOWN}, status=401)
        return stop(request, "Open the study from the panel", UNKNOWN, status=404)
    participant, link = found
    if background and (participant.status != Status.WORKING or request.POST.get("action") != "answer"):
        return refused_for_good(request, participant)
    if request.method == "POST" and not participant.ended:
        crowd.seen(participant)
        return _act(request, participant, link)
    if request.method == "POST" and request.POST.get("action") == "questionnaire":
        # The post-study questionnaire comes after the session ended (completed): before the end page.
        return _questionnaire(request, participant, link) or redirect("annotation:participant_step", slug=slug)
    if request.method == "POST" and request.POST.get("action") in ANSWERING:
        # An answer from a page loaded before the session ended (time up, withdrawn in another tab): said, not dropped.
        reason = ENDED_REASONS.get(participant.status, "this page is out of date")
        return _show(request, participant, link, error=f"Your last answer was not saved: {reason}.")
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
        form = answer_form(participant, item, request.POST)
        if not form.is_valid():
            return _show(request, participant, link, form=form, status=400)
        try:
            crowd.answer_check(participant=participant, link=link, item=item, answer=form.to_answer())
        except ServiceError as exc:
            form.add_error(None, str(exc))
            return _show(request, participant, link, form=form, status=400)
    elif action == "answer" and participant.status == Status.WORKING:
        return _answer(request, participant, link)
    elif action == "training" and participant.status == Status.WORKING:
        return _train(request, participant, link) or again
    elif action == "questionnaire":
        return _questionnaire(request, participant, link) or again
    return again


def _questionnaire(request: HttpRequest, participant: Participant, link: ParticipantLink) -> HttpResponse | None:
    """Answer the questionnaire due (pre, quiz, post); the quiz's feedback when an attempt failed with some left."""
    study, user, kind = participant.study, participant.member.user, request.POST.get("kind", "")
    if kind != _questionnaire_due(participant):
        return None  # answered already (a second tab), or not this one's turn
    questions = questions_of(study.questionnaires, kind)
    try:
        outcome = questionnaires.answer_questionnaire(
            user=user, study=study, kind=kind, given=posted_answers(questions, request.POST)
        )
    except ServiceError as exc:
        return _questionnaire_page(request, participant, kind, posted=request.POST, error=str(exc), status=400)
    if outcome.wrong and outcome.attempts_left > 0:
        return _questionnaire_page(request, participant, kind, wrong=outcome.wrong, attempts_left=outcome.attempts_left)
    return None


def _questionnaire_due(participant: Participant) -> str | None:
    """The questionnaire the participant is at: pre or quiz before their items, post after a completed session."""
    study, user = participant.study, participant.member.user
    if not study.questionnaires:
        return None
    if participant.status == Status.COMPLETED:
        return "post" if questionnaires.post_due(user, study) else None
    if participant.status == Status.WORKING:
        return questionnaires.due_before_items(user, study)
    return None


def _questionnaire_page(
    request: HttpRequest, participant: Participant, kind: str, *, posted=None, status: int = 200, **extra
) -> HttpResponse:
    study = participant.study
    made, _ = questionnaires.quiz_attempts(participant.member.user, study)
    context = questionnaire_context(
        study,
        kind,
        posted,
        action=reverse("annotation:participant_step", args=[study.slug]),
        hidden={"action": "questionnaire", "kind": kind},
        attempt=made + 1,
        participant=participant,
        **extra,
    )
    return page(request, "questionnaire.html", context, status=status)


def _train(request: HttpRequest, participant: Participant, link: ParticipantLink) -> HttpResponse | None:
    """Answer the current training item and show its feedback; None when it is answered already (a second tab)."""
    study, user = participant.study, participant.member.user
    item = training.next_training_item(user, study)
    if item is None or str(item.pk) != request.POST.get("item"):
        return None
    shown = training.training_assignment(study, item, user)
    form = answer_form(participant, item, request.POST, left_system=shown.left_system)
    if not form.is_valid():
        return _show(request, participant, link, form=form, status=400)
    try:
        feedback = training.answer_training(user=user, study=study, item=item, answer=form.to_answer())
    except ServiceError as exc:
        form.add_error(None, str(exc))
        return _show(request, participant, link, form=form, status=400)
    context = {"study": study, "participant": participant, "feedback": feedback}
    context["continue_url"] = reverse("annotation:participant_step", args=[study.slug])
    return page(request, "training_feedback.html", context)


def _posted_assignment(request: HttpRequest, participant: Participant) -> Assignment | None:
    """The participant's own assignment named by the form; None for anyone else's (or none)."""
    value = request.POST.get("assignment") or ""
    if not value.isdigit() or len(value) > 18:
        return None
    return their_assignment(participant, int(value))


def _answer(request: HttpRequest, participant: Participant, link: ParticipantLink) -> HttpResponse:
    """Answer an item: through the annotators' `submit`, then `after_item` (quota, budget)."""
    study = participant.study
    background = in_background(request)
    assignment = _posted_assignment(request, participant)
    if assignment is None:
        if background:
            return JsonResponse({"saved": False, "error": NOT_YOURS}, status=404)
        return redirect("annotation:participant_step", slug=study.slug)
    form = answer_form(participant, assignment.item, request.POST, left_system=assignment.left_system)
    if not form.is_valid():
        return form_refusal(form) if background else _show(request, participant, link, form=form, status=400)
    try:
        submit(
            user=participant.member.user,
            study=study,
            assignment_id=assignment.pk,
            answer=form.to_answer(),
            source=Annotation.Source.WEB,
            shown_left=assignment.left_system,
        )
    except ServiceError as exc:
        if background:
            return refused_in_background(request, participant, exc)
        if isinstance(exc, LeaseLost | NotAllowed):
            return _show(request, participant, link, error=f"Your answer was not saved: {exc}.")
        form.add_error(None, str(exc))
        return _show(request, participant, link, form=form, status=400)
    crowd.after_item(participant=participant, link=link)
    if background:
        return answered_in_background(request, participant, link)
    return redirect("annotation:participant_step", slug=study.slug)


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
    due = _questionnaire_due(participant)
    if due == questionnaires.FAILED_QUIZ:  # the quiz's attempts ran out: screened out, the failures kept
        crowd.end(participant=participant, status=Status.SCREENED_OUT)
        return redirect("annotation:participant_step", slug=study.slug)
    if due is not None:
        return _questionnaire_page(request, participant, due)
    if participant.ended:
        context.update(code=crowd.code_for(participant, link), redirect_url=crowd.redirect_for(participant, link))
        return page(request, "end.html", context)
    if participant.status == Status.CONSENT:
        return page(request, "consent.html", context, status=400 if error else 200)
    if participant.status == Status.INSTRUCTIONS:
        return page(request, "instructions.html", context)
    counts = progress(participant, link)
    if participant.status == Status.WORKING and study.training:
        pending = training.next_training_item(participant.member.user, study)
        if pending is not None:  # training comes before the study's items (no checks beside it)
            shown = training.training_assignment(study, pending, participant.member.user)
            form = form or answer_form(participant, pending, left_system=shown.left_system)
            context.update(item_context(participant, link, shown, form, check=True, counts=counts), training=True)
            return page(request, "item.html", context, status=status)
    check = crowd.next_check(participant, link)
    if check is not None:
        shown = Assignment(study=study, item=check, left_system=(study.systems or [""])[0])
        context.update(
            item_context(participant, link, shown, form or answer_form(participant, check), check=True, counts=counts)
        )
        return page(request, "item.html", context, status=status)
    if participant.status != Status.WORKING:  # qualifying with nothing left to ask: the service has moved them on
        return redirect("annotation:participant_step", slug=study.slug)
    try:
        assignment = crowd.claim_for(participant)
    except NotAllowed as exc:
        reason = f"No items are handed out right now ({exc}). Your answers so far are saved; come back later."
        return stop(request, "No items right now", reason, status=503)
    except ClaimContention as exc:
        return stop(request, "Busy", f"{exc}.", status=503)
    if assignment is None:
        crowd.end(participant=participant, status=Status.COMPLETED)
        return redirect("annotation:participant_step", slug=study.slug)
    form = form or answer_form(participant, assignment.item, left_system=assignment.left_system)
    context.update(item_context(participant, link, assignment, form, check=False, counts=counts))
    return page(request, "item.html", context, status=status)
