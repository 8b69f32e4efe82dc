"""The questionnaire pages: pre-study, quiz (with feedback on a failed attempt) and post-study
(annotation/workbench/questionnaires.py says the order)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotation.access import access_study
from annotation.errors import ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.models import Study
from annotation.questions.forms import page_questions, posted_answers
from annotation.questions.questionnaires import questions_of
from annotation.workbench import questionnaires
from annotation.workbench.services import NotAllowed
from annotation.workbench.training import check_can_train

TITLES = {"pre": "Before you start", "quiz": "A short quiz", "post": "Before you go"}


def questionnaire_context(study: Study, kind: str, posted: Any = None, **extra: Any) -> dict[str, Any]:
    """What templates/annotation/_questionnaire.html needs (also the crowd page's)."""
    questions = questions_of(study.questionnaires, kind)
    answers = posted_answers(questions, posted) if posted is not None else {}
    return {
        "study": study,
        "kind": kind,
        "title": TITLES[kind],
        "questions": page_questions(questions, answers),
        **extra,
    }


def _due(request: AuthenticatedHttpRequest, study: Study, kind: str) -> bool:
    if kind == "post":
        return questionnaires.post_due(request.user, study)
    return questionnaires.due_before_items(request.user, study) == kind


@login_required
@require_http_methods(["GET", "POST"])
def questionnaire_page(request: AuthenticatedHttpRequest, slug: str, kind: str) -> HttpResponse:
    """One questionnaire, when it is the one due; the annotate page (which says what comes next) otherwise."""
    study = access_study(request.user, slug)
    if kind not in TITLES:
        raise Http404("No such questionnaire.")
    try:
        check_can_train(request.user, study)
    except NotAllowed as exc:
        return render(request, "annotation/annotate_refused.html", {"study": study, "reason": str(exc)}, status=403)
    if not _due(request, study, kind):
        return redirect("annotation:annotate", slug=study.slug)
    made, _ = questionnaires.quiz_attempts(request.user, study)
    extra: dict[str, Any] = {"action": request.path, "attempt": made + 1}
    if request.method == "POST":
        questions = questions_of(study.questionnaires, kind)
        try:
            outcome = questionnaires.answer_questionnaire(
                user=request.user, study=study, kind=kind, given=posted_answers(questions, request.POST)
            )
        except ServiceError as exc:
            context = questionnaire_context(study, kind, request.POST, error=str(exc), **extra)
            return render(request, "annotation/questionnaire.html", context, status=400)
        if outcome.wrong:
            extra.update(wrong=outcome.wrong, attempts_left=outcome.attempts_left, attempt=made + 2)
            if outcome.attempts_left <= 0:
                return redirect("annotation:annotate", slug=study.slug)  # says the quiz was not passed
            return render(request, "annotation/questionnaire.html", questionnaire_context(study, kind, **extra))
        return redirect("annotation:annotate", slug=study.slug)
    return render(request, "annotation/questionnaire.html", questionnaire_context(study, kind, **extra))
