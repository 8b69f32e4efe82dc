"""The Prolific page of a study (issue 34): connect, review the submissions with Claimlab's record beside
them, approve or reject, pay bonuses after a preview, and read the log of calls.

Researchers and staff only (access_study_to_manage: 404 for everyone else); every form posts with
its CSRF token. The token a researcher gives is written to no page: the connect form never shows it
back. Thin: the rules are in prolific_services.py, the reads in prolific_selectors.py.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_GET, require_POST

from annotation.access import access_study_to_manage
from annotation.crowd import prolific_services as prolific
from annotation.crowd.prolific_client import MIN_REJECTION_MESSAGE, REJECTION_CATEGORIES, ProlificError
from annotation.crowd.prolific_forms import ProlificBonusForm, ProlificConnectForm, ProlificReviewForm
from annotation.crowd.prolific_selectors import SubmissionTable, connection, prolific_calls
from annotation.crowd.services import link_for
from annotation.errors import ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.models import Study

PAGE = "annotation:participants_prolific"


def _page(
    request: AuthenticatedHttpRequest,
    study: Study,
    *,
    status: int = 200,
    table: SubmissionTable | None = None,
    **forms: Any,
) -> HttpResponse:
    """The page; the submissions are read from Prolific (one logged call) unless the caller has them."""
    link = link_for(study)
    state = connection(link)
    error = None
    if state.connected and table is None:
        try:
            table = prolific.fetch_submissions(study=study, user=request.user)
        except ServiceError as exc:
            error = str(exc)
    context = {
        "study": study,
        "link": link,
        "connection": state,
        "table": table,
        "fetch_error": error,
        "connect_form": forms.get("connect_form") or ProlificConnectForm(),
        "review_form": forms.get("review_form") or ProlificReviewForm(),
        "bonus_form": forms.get("bonus_form") or ProlificBonusForm(),
        "preview": forms.get("preview"),
        "bonus_ids": " ".join(forms.get("bonus_ids") or ()),  # the confirm form's copy of the IDs typed
        "calls": prolific_calls(study),
        "categories": REJECTION_CATEGORIES,
        "min_message": MIN_REJECTION_MESSAGE,
    }
    return render(request, "annotation/participants_prolific.html", context, status=status)


@login_required
@require_GET
def prolific_page(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    return _page(request, access_study_to_manage(request.user, slug))


@login_required
@require_POST
def prolific_connect(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study_to_manage(request.user, slug)
    form = ProlificConnectForm(request.POST)
    if form.is_valid():
        try:
            check = prolific.connect(
                study=study, user=request.user, study_id=form.cleaned_data["study_id"], token=form.cleaned_data["token"]
            )
        except ServiceError as exc:
            form.add_error(None, f"Not connected: {exc}")
        else:
            messages.success(request, f"Connected to the Prolific study “{check.name}” ({check.status.lower()}).")
            return redirect(PAGE, slug=study.slug)
    return _page(request, study, status=400, connect_form=form)


@login_required
@require_POST
def prolific_disconnect(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study_to_manage(request.user, slug)
    prolific.disconnect(study=study)
    messages.success(request, "Disconnected from Prolific: the token is deleted. The log of calls stays.")
    return redirect(PAGE, slug=study.slug)


@login_required
@require_POST
def prolific_test(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study_to_manage(request.user, slug)
    try:
        check = prolific.check_connection(study=study, user=request.user)
    except ServiceError as exc:
        messages.error(request, f"The connection does not work: {exc}")
    else:
        messages.success(request, f"The connection works: “{check.name}” is {check.status.lower()} on Prolific.")
    return redirect(PAGE, slug=study.slug)


@login_required
@require_POST
def prolific_review(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Approve or reject the ticked submissions; a refusal keeps what was typed on the page."""
    study = access_study_to_manage(request.user, slug)
    form = ProlificReviewForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            result = prolific.review(
                study=study,
                user=request.user,
                action=data["action"],
                submission_ids=request.POST.getlist("submission"),
                category=data["rejection_category"],
                message=data["message"],
            )
        except ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            verb = "Approved" if result.action == "approve" else "Rejected"
            if result.done:
                messages.success(request, f"{verb} {len(result.done)} submission(s) on Prolific.")
            for submission_id, why in result.failed:
                messages.error(request, f"{submission_id}: {why}")
            if result.not_sent:
                messages.error(request, f"Not sent, after that failure: {', '.join(result.not_sent)}.")
            return redirect(PAGE, slug=study.slug)
    return _page(request, study, status=400, review_form=form)


@login_required
@require_POST
def prolific_bonuses(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """`step=preview`: the exact set, its total and a confirmation; `step=pay`: pay that set, if still exact."""
    study = access_study_to_manage(request.user, slug)
    form = ProlificBonusForm(request.POST)
    if not form.is_valid():
        return _page(request, study, status=400, bonus_form=form)
    data = form.cleaned_data
    try:
        rule = prolific.check_rule(data["basis"], data["amount"], form.chosen_ids())
        if request.POST.get("step") == "pay":
            payment = prolific.pay_bonuses(study=study, user=request.user, rule=rule, confirmation=data["confirmation"])
            messages.success(
                request,
                f"Paid bonuses to {payment.preview.count} participant(s), {payment.preview.total} "
                f"{payment.preview.currency} (Prolific's bulk payment {payment.bulk_id}; its fees come on top). "
                f"{payment.note}",
            )
            return redirect(PAGE, slug=study.slug)
        table = prolific.fetch_submissions(study=study, user=request.user)
        preview = prolific.bonus_preview(study=study, user=request.user, rule=rule, table=table)
    except prolific.StaleConfirmation as exc:
        form.add_error(None, str(exc))
        return _page(request, study, status=409, bonus_form=form)
    except ServiceError as exc:
        form.add_error(None, str(exc))
        return _page(request, study, status=502 if isinstance(exc, ProlificError) else 400, bonus_form=form)
    return _page(request, study, table=table, bonus_form=form, preview=preview, bonus_ids=rule.panel_ids)


#: The page's routes, spread into annotation/urls.py (names in the "annotation" namespace).
urlpatterns = [
    path("studies/<slug:slug>/participants/prolific/", prolific_page, name="participants_prolific"),
    path("studies/<slug:slug>/participants/prolific/connect/", prolific_connect, name="prolific_connect"),
    path("studies/<slug:slug>/participants/prolific/disconnect/", prolific_disconnect, name="prolific_disconnect"),
    path("studies/<slug:slug>/participants/prolific/test/", prolific_test, name="prolific_test"),
    path("studies/<slug:slug>/participants/prolific/review/", prolific_review, name="prolific_review"),
    path("studies/<slug:slug>/participants/prolific/bonuses/", prolific_bonuses, name="prolific_bonuses"),
]
