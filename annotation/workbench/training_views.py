"""The training pages: a training item, then the feedback on the answer (annotation/workbench/training.py)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotation.access import access_study
from annotation.errors import ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.models import Item, Study
from annotation.workbench import questionnaires
from annotation.workbench.forms import answer_form
from annotation.workbench.selectors import display_payload
from annotation.workbench.services import NotAllowed
from annotation.workbench.training import (
    answer_training,
    check_can_train,
    next_training_item,
    training_assignment,
    training_left,
)


def _page(request: AuthenticatedHttpRequest, study: Study, item: Item, form, *, status: int = 200) -> HttpResponse:
    shown = training_assignment(study, item, request.user)
    payload = display_payload(shown)
    left = training_left(request.user, study)
    context = {
        "study": study,
        "item": payload,
        "training_item": item,
        "form": form,
        "passages": [] if study.is_preference else form.passage_rows(payload["evidence"]),
        "revising": False,
        "left": left,
        "total": len(study.training),
        "position": len(study.training) - left + 1,
        "timer": {"study": study.slug, "assignment": f"training-{item.pk}", "base_ms": 0, "persist": False},
    }
    return render(request, "annotation/annotate_training.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def annotate_training(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The next training item (GET), or the answer to it and its feedback (POST); the annotate page when none is left."""
    study = access_study(request.user, slug)
    try:
        check_can_train(request.user, study)
    except NotAllowed as exc:
        return render(request, "annotation/annotate_refused.html", {"study": study, "reason": str(exc)}, status=403)
    item = next_training_item(request.user, study)
    if item is None or (study.questionnaires and questionnaires.due_before_items(request.user, study)):
        return redirect("annotation:annotate", slug=study.slug)  # which says what comes first
    shown = training_assignment(study, item, request.user)
    passages = len(item.payload.get("evidence", [])) if not study.is_preference else 0
    if request.method == "GET":
        return _page(request, study, item, answer_form(study, passages=passages, assignment=shown))
    if request.POST.get("item") != str(item.pk):
        return redirect("annotation:annotate_training", slug=study.slug)  # answered already (a second tab)
    form = answer_form(study, passages=passages, data=request.POST, assignment=shown)
    if form.is_valid():
        try:
            feedback = answer_training(user=request.user, study=study, item=item, answer=form.to_answer())
        except NotAllowed as exc:
            return render(request, "annotation/annotate_refused.html", {"study": study, "reason": str(exc)}, status=403)
        except ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            return render(request, "annotation/training_feedback.html", {"study": study, "feedback": feedback})
    return _page(request, study, item, form, status=400)
