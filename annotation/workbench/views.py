"""The annotator's workbench pages: parse input, call access + service/selector, render.

Plain forms posted with CSRF, redirect after every successful POST (PRG), so
the page works without JavaScript. static/js/workbench.js adds shortcuts, the
active-time timer and hints, and (issue 15) keeps the next item fetched ahead:
it asks `annotate_ahead` for it, shows it the moment an answer is given, and
posts the answer to `annotate_submit` in the background with the header
`X-Claimlab-Workbench`, which answers in JSON and carries the item after that.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation.access import access_study
from annotation.conditions.services import shown_suggestion
from annotation.errors import ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.lib.dblocks import repeat_safe
from annotation.models import Annotation, Assignment, Study
from annotation.progress import selectors as progress_selectors
from annotation.workbench import questionnaires
from annotation.workbench.forms import FlagForm, answer_form
from annotation.workbench.prefetch import (
    STAMP_MISSING,
    form_refusal,
    holding,
    in_background,
    lost_or_answered,
    prefetch_config,
    release_stamp,
)
from annotation.workbench.selectors import annotator_progress, display_payload, previous_answer
from annotation.workbench.services import (
    ClaimContention,
    LeaseLost,
    NotAllowed,
    claim_next,
    flag,
    next_after_submit,
    release_ahead,
    skip,
    submit,
    submit_with_progress,
)
from annotation.workbench.training import next_training_item

#: Shown when a POST names an assignment the user no longer holds (its lease ran out and
#: someone else took it over), or never held: the same words either way.
NOT_YOURS = "that item is no longer assigned to you (it was open for too long and went to another annotator)"


def _not_yours(request: HttpRequest, study: Study, what: str) -> HttpResponse:
    messages.error(request, f"{what}: {NOT_YOURS}.")
    return redirect("annotation:annotate", slug=study.slug)


def _refused(request: HttpRequest, study: Study, reason: str) -> HttpResponse:
    return render(request, "annotation/annotate_refused.html", {"study": study, "reason": reason}, status=403)


def _workbench_context(
    request: AuthenticatedHttpRequest,
    study: Study,
    assignment: Assignment,
    form,
    *,
    revising: bool,
    back: Assignment | None = None,
) -> dict:
    """What the workbench template needs for one assignment; `back` defaults to the previous answer."""
    assignment.study = study
    annotation = getattr(assignment, "annotation", None) if revising else None
    item = display_payload(assignment)
    progress = annotator_progress(request.user, study)
    config: dict = {
        "study": study.slug,
        "assignment": assignment.pk,
        "base_ms": (annotation.active_ms or 0) if annotation is not None else 0,
        "persist": not revising,
        "submit_on_label": study.submit_on_label and not revising,
    }
    if not revising:
        # What workbench.js needs to keep the next item ready (absent: the page works as plain forms).
        config["prefetch"] = prefetch_config(
            assignment,
            ahead_url=reverse("annotation:annotate_ahead", args=[study.slug, assignment.pk]),
            release_url=reverse("annotation:annotate_release", args=[study.slug, assignment.pk]),
            annotate_url=reverse("annotation:annotate", args=[study.slug]),
            progress=progress,
        )
    return {
        "study": study,
        "assignment": assignment,
        "item": item,
        "form": form,
        "passages": [] if study.is_preference else form.passage_rows(item["evidence"]),
        "revising": revising,
        "progress": progress,
        "back": back
        if back is not None
        else previous_answer(request.user, study, before=assignment if revising else None),
        "timer": config,
        "suggestion": shown_suggestion(request.user, study, assignment),
    }


def _workbench(
    request: AuthenticatedHttpRequest, study: Study, assignment: Assignment, form, *, revising: bool, status: int = 200
) -> HttpResponse:
    """The annotate page (or the revise page) for one assignment."""
    context = _workbench_context(request, study, assignment, form, revising=revising)
    return render(request, "annotation/annotate.html", context, status=status)


def _form_for(study: Study, assignment: Assignment, data=None, *, prefill: bool = False):
    passages = 0 if study.is_preference else len(assignment.item.payload.get("evidence", []))
    annotation = getattr(assignment, "annotation", None) if prefill else None
    return answer_form(study, passages=passages, data=data, annotation=annotation, assignment=assignment)


def _ahead_payload(
    request: AuthenticatedHttpRequest, study: Study, assignment: Assignment | None, *, behind: Assignment | None
) -> dict | None:
    """An assignment fetched ahead, as workbench.js keeps it: its id and its rendered workbench.

    `behind` is the item shown before it, which its "back" key will revise once answered.
    """
    if assignment is None:
        return None
    context = _workbench_context(request, study, assignment, _form_for(study, assignment), revising=False, back=behind)
    return {"id": assignment.pk, "html": render_to_string("annotation/_workbench.html", context, request=request)}


@repeat_safe
@login_required
@require_GET
def annotate(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The annotator's current item (the same one until answered or skipped), or the finish page."""
    study = access_study(request.user, slug)
    # Before any item: the pre-study questionnaire, the quiz, then the training (workbench/questionnaires.py).
    due = questionnaires.due_before_items(request.user, study) if study.questionnaires else None
    if due == questionnaires.FAILED_QUIZ:
        return _refused(request, study, "the comprehension quiz was not passed within its attempts")
    if due is not None:
        return redirect("annotation:questionnaire", slug=study.slug, kind=due)
    if study.training and next_training_item(request.user, study) is not None:
        return redirect("annotation:annotate_training", slug=study.slug)  # training comes first
    try:
        assignment = claim_next(user=request.user, study=study)
    except NotAllowed as exc:
        return _refused(request, study, str(exc))
    except ClaimContention as exc:
        return render(request, "annotation/annotate_busy.html", {"study": study, "reason": str(exc)}, status=503)
    if assignment is None:
        if study.questionnaires and questionnaires.post_due(request.user, study):
            return redirect("annotation:questionnaire", slug=study.slug, kind="post")
        context = {
            "study": study,
            "progress": annotator_progress(request.user, study),
            "back": previous_answer(request.user, study),
        }
        return render(request, "annotation/annotate_done.html", context)
    return _workbench(request, study, assignment, _form_for(study, assignment), revising=False)


@repeat_safe
@login_required
@require_POST
def annotate_ahead(request: AuthenticatedHttpRequest, slug: str, assignment_id: int) -> JsonResponse:
    """The item after the one on screen (`assignment_id`), claimed and rendered for workbench.js.

    {"ahead": {"id", "html"}} or {"ahead": null} when nothing is left; {"ahead": null, "answered": true}
    when the item on screen was answered meanwhile (the answer's reply brings the next one); 409 when it
    is no longer the user's, 403 when they may not annotate, 503 under contention.
    """
    study = access_study(request.user, slug)
    shown = progress_selectors.own_assignment(request.user, study, assignment_id)
    if shown is None:
        return JsonResponse({"error": NOT_YOURS}, status=409)
    try:
        ahead = claim_next(user=request.user, study=study, ahead_of=shown.pk)
    except LeaseLost:
        return lost_or_answered(shown, NOT_YOURS)
    except NotAllowed as exc:
        return JsonResponse({"error": str(exc)}, status=403)
    except ClaimContention as exc:
        return JsonResponse({"error": str(exc)}, status=503, headers={"Retry-After": "1"})
    return JsonResponse({"ahead": _ahead_payload(request, study, ahead, behind=shown)})


@login_required
@require_POST
def annotate_release(request: AuthenticatedHttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """Give back an item fetched ahead that the annotator never saw (sent when they leave the page).

    `updated_at` (as handed out) guards against releasing one that another page of theirs renewed.
    Access before parsing: an assignment that is not the user's own is a 404, whatever was sent.
    """
    study = access_study(request.user, slug)
    if not Assignment.objects.filter(study=study, annotator=request.user, pk=assignment_id).exists():
        raise Http404("No such assignment of yours in this study.")
    stamp = release_stamp(request)
    if stamp is None:
        return JsonResponse({"error": STAMP_MISSING}, status=400)
    released = release_ahead(user=request.user, study=study, assignment_id=assignment_id, updated_at=stamp)
    return JsonResponse({"released": released})


def _background_result(
    request: AuthenticatedHttpRequest,
    study: Study,
    answered: Assignment,
    progress: dict[str, int | bool],
    *,
    revising: bool,
) -> JsonResponse:
    """After a background submit: the progress after it, and the item after the one now on screen."""
    body: dict = {"saved": True, "progress": progress}
    if revising:
        return JsonResponse(body)
    held = holding(request)
    try:
        following, holding_lost = next_after_submit(request.user, study, held)
    except (ClaimContention, NotAllowed):
        return JsonResponse(body)  # saved; the page asks again (annotate_ahead says why)
    if held is not None:
        behind = progress_selectors.own_assignment(request.user, study, held) if not holding_lost else answered
    else:
        behind = answered
    body["ahead"] = _ahead_payload(request, study, following, behind=behind)
    body["holding_lost"] = holding_lost
    return JsonResponse(body)


def _save_answer(
    request: AuthenticatedHttpRequest, study: Study, assignment: Assignment, *, revising: bool
) -> HttpResponse:
    background = in_background(request)
    form = _form_for(study, assignment, request.POST)
    if form.is_valid():
        answered = {
            "user": request.user,
            "study": study,
            "assignment_id": assignment.pk,
            "answer": form.to_answer(),
            "source": Annotation.Source.WEB,
            "shown_left": assignment.left_system,
        }
        progress = None
        try:
            if background:  # the page shows the progress after the answer (read with it on PostgreSQL)
                progress = submit_with_progress(**answered).progress
            else:
                submit(**answered)
        except (LeaseLost, NotAllowed) as exc:
            if background:
                return JsonResponse(
                    {"saved": False, "error": str(exc)}, status=409 if isinstance(exc, LeaseLost) else 403
                )
            messages.error(request, f"Your answer was not saved: {exc}.")
            return redirect("annotation:annotate", slug=study.slug)
        except ClaimContention as exc:
            if background:  # workbench.js keeps the answer and sends it again
                return JsonResponse({"saved": False, "error": str(exc)}, status=503, headers={"Retry-After": "1"})
            form.add_error(None, str(exc))
        except ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            if progress is not None:  # answered in the background
                return _background_result(request, study, assignment, progress, revising=revising)
            messages.success(request, "Your answer to the earlier item was changed." if revising else "Saved.")
            return redirect("annotation:annotate", slug=study.slug)
    if background:
        return form_refusal(form)
    return _workbench(request, study, assignment, form, revising=revising, status=400)


@repeat_safe
@login_required
@require_POST
def annotate_submit(request: AuthenticatedHttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """Answer the current item; a repeated POST (double click) changes nothing."""
    study = access_study(request.user, slug)
    assignment = progress_selectors.own_assignment(request.user, study, assignment_id)
    if assignment is None:
        if in_background(request):
            return JsonResponse({"saved": False, "error": NOT_YOURS}, status=409)
        return _not_yours(request, study, "Your answer was not saved")
    return _save_answer(request, study, assignment, revising=False)


@login_required
def annotate_revise(request: AuthenticatedHttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """An earlier answer, pre-filled, to change ("back"); the service keeps the revision."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    study = access_study(request.user, slug)
    assignment = progress_selectors.own_assignment(request.user, study, assignment_id)
    if assignment is None:
        raise Http404("No such answer of yours in this study.")
    if assignment.status == Assignment.Status.ACTIVE:
        return redirect("annotation:annotate", slug=study.slug)
    if assignment.status != Assignment.Status.SUBMITTED:
        messages.info(request, "That item has no answer of yours to change (it was skipped or timed out).")
        return redirect("annotation:annotate", slug=study.slug)
    if request.method == "POST":
        return _save_answer(request, study, assignment, revising=True)
    form = _form_for(study, assignment, prefill=True)
    return _workbench(request, study, assignment, form, revising=True)


@login_required
@require_POST
def annotate_skip(request: AuthenticatedHttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    study = access_study(request.user, slug)
    assignment = progress_selectors.own_assignment(request.user, study, assignment_id)
    if assignment is None:
        return _not_yours(request, study, "Not skipped")
    try:
        skip(user=request.user, study=study, assignment_id=assignment.pk)
    except ServiceError as exc:
        messages.error(request, f"Not skipped: {exc}.")
    else:
        messages.info(request, "Skipped. That item will not be shown to you again.")
    return redirect("annotation:annotate", slug=study.slug)


@login_required
@require_POST
def annotate_flag(request: AuthenticatedHttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """Flag an item with a reason; "flag and skip" also gives it back."""
    study = access_study(request.user, slug)
    assignment = progress_selectors.own_assignment(request.user, study, assignment_id)
    if assignment is None:
        return _not_yours(request, study, "Not flagged")
    form = FlagForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not flagged: say why the item is flagged.")
    else:
        try:
            flag(user=request.user, study=study, assignment_id=assignment.pk, reason=form.cleaned_data["reason"])
            if form.cleaned_data["then"] == "skip" and assignment.status == Assignment.Status.ACTIVE:
                skip(user=request.user, study=study, assignment_id=assignment.pk)
                messages.info(request, "Flagged and skipped. Thank you: the researchers will look at it.")
            else:
                messages.info(request, "Flagged. Thank you: the researchers will look at it. Answer it if you can.")
        except ServiceError as exc:
            messages.error(request, f"Not flagged: {exc}.")
    if assignment.status == Assignment.Status.SUBMITTED:
        return redirect("annotation:annotate_revise", slug=study.slug, assignment_id=assignment.pk)
    return redirect("annotation:annotate", slug=study.slug)
