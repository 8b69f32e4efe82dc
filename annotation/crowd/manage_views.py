"""The researcher's crowd page: the participant link, its settings, the payment table, withdrawals.

Researchers and staff only (access_study_to_manage: 404 for everyone else). Panel IDs
appear here and in the mapping export only; the payment CSV names participants by panel
ID too, because that is what the panel pays against.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation.access import access_study_to_manage
from annotation.crowd import services as crowd
from annotation.crowd.currencies import CURRENCIES
from annotation.crowd.forms import CheckPickForm, ParticipantLinkForm
from annotation.crowd.link_fields import help_text, label
from annotation.crowd.selectors import (
    GOLD_FILTERS,
    check_need,
    chosen_items,
    link_warnings,
    payment_rows,
    payment_summary,
    pickable_items,
)
from annotation.errors import ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.lib.csvsafe import csv_text
from annotation.models import Participant, ParticipantLink


@login_required
def participants_page(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """GET: the link and the payment table. POST: save the link's settings."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    study = access_study_to_manage(request.user, slug)
    link = crowd.link_for(study)
    crowd.close_overdue(study=study, link=link)
    form = ParticipantLinkForm.for_link(link, request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                crowd.configure_link(study=study, changes=form.cleaned_data)
            except ServiceError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, "Participant link settings saved.")
                return redirect("annotation:study_participants", slug=study.slug)
        status = 400
    rows = payment_rows(study, link)
    context = {
        "study": study,
        "link": link,
        "link_url": link_url(request, link),
        "form": form,
        "rows": rows,
        "summary": payment_summary(study, link, rows),
        "warnings": link_warnings(link),
        "check_lists": [_check_list(link, which) for which in crowd.CHECK_LISTS],
        "currencies": CURRENCIES.items(),
    }
    return render(request, "annotation/study_participants.html", context, status=status)


def link_url(request: HttpRequest, link: ParticipantLink) -> str:
    """The link to paste into the panel, with the panel's placeholders for the IDs it adds (Prolific's
    {{%PROLIFIC_PID%}} form)."""
    params = "&".join(
        f"{name}={{{{%{name}%}}}}" for name in (link.pid_param, link.study_param, link.session_param) if name
    )
    url = request.build_absolute_uri(reverse("annotation:participant_arrive", args=[link.token]))
    return f"{url}?{params}"


def _check_list(link: ParticipantLink, which: str) -> dict:
    """One check list as the settings page sums it up: its items, what it needs, and its picker's address."""
    field = crowd.CHECK_LISTS[which]
    return {
        "which": which,
        "label": label(field),
        "help": help_text(field),
        "ids": getattr(link, field),
        "need": check_need(link, which),
        "url": reverse("annotation:participant_checks", args=[link.study.slug, which]),
    }


#: Search results per page of the picker.
PICKER_PAGE = 25


@login_required
def check_items_page(request: AuthenticatedHttpRequest, slug: str, which: str) -> HttpResponse:
    """GET: one check list (qualification or attention) and a search of the study's items to add to it
    (`q`: id or text; `gold`: yes (default) or all; `page`). POST: take ticked-off items off the list and put
    the ticked results and pasted ids on its end, through the one service; back to the same search."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    study = access_study_to_manage(request.user, slug)
    if which not in crowd.CHECK_LISTS:
        raise Http404("No such check list: qualification or attention.")
    link = crowd.link_for(study)
    query = request.GET.get("q", "").strip()[:200]
    gold = request.GET.get("gold", "yes")
    gold = gold if gold in GOLD_FILTERS else "yes"
    form = CheckPickForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                link = crowd.edit_check_items(study=study, which=which, remove=form.removed(), add=form.added())
            except ServiceError as exc:
                form.add_error(None, str(exc))
            else:
                on_list = len(getattr(link, crowd.CHECK_LISTS[which]))
                messages.success(request, f"{label(crowd.CHECK_LISTS[which])} saved: {on_list} on the list.")
                return redirect(request.get_full_path())
        status = 400
    field = crowd.CHECK_LISTS[which]
    listed = getattr(link, field)
    other = "attention" if which == "qualification" else "qualification"
    page = Paginator(pickable_items(study, query=query, gold=gold), PICKER_PAGE).get_page(request.GET.get("page"))
    # A refused save keeps what was ticked to add, ticked again.
    pending = set(form.added()) if "pasted" in getattr(form, "cleaned_data", {}) else set()
    context = {
        "study": study,
        "link": link,
        "which": which,
        "title": label(field),
        "help": help_text(field),
        "listed": chosen_items(study, listed),
        "listed_ids": set(listed),
        "other_ids": set(getattr(link, crowd.CHECK_LISTS[other])),
        "other": other,
        "need": check_need(link, which),
        "page": page,
        "q": query,
        "gold": gold,
        "pending": pending,
        "form": form,
        "query_string": urlencode({"q": query, "gold": gold}),
        "settings_url": reverse("annotation:study_participants", args=[study.slug]) + "#link-settings",
    }
    return render(request, "annotation/participant_checks.html", context, status=status)


@login_required
@require_POST
def participants_rotate(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study_to_manage(request.user, slug)
    crowd.rotate_link(study=study)
    messages.success(request, "The participant link was replaced; the old one no longer works. Update it on the panel.")
    return redirect("annotation:study_participants", slug=study.slug)


@login_required
@require_POST
def participant_withdraw(request: AuthenticatedHttpRequest, slug: str, participant_id: int) -> HttpResponse:
    """A researcher records a participant's withdrawal (asked for on the panel, say)."""
    study = access_study_to_manage(request.user, slug)
    participant = (
        Participant.objects.select_related("member__user", "study").filter(study=study, pk=participant_id).first()
    )
    if participant is None:
        raise Http404("No such participant.")
    crowd.withdraw(participant=participant)
    messages.success(request, f"{participant.member.pseudonym} is withdrawn; their labels leave analysis and exports.")
    return redirect("annotation:study_participants", slug=study.slug)


def _csv(filename: str, header: list[str], rows: list[list]) -> HttpResponse:
    response = HttpResponse(csv_text(header, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def payments_csv(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The payment table as CSV, one row per participant, for paying and bonusing on the panel: both times, the
    pay on the link's basis (`pay_basis`: active or wall) and its currency on every row."""
    study = access_study_to_manage(request.user, slug)
    link = crowd.link_for(study)
    crowd.close_overdue(study=study, link=link)
    header = [
        "panel_id",
        "pseudonym",
        "status",
        "items_done",
        "checks_passed",
        "checks_failed",
        "active_minutes",
        "wall_minutes",
        "pay",
        "currency",
        "pay_basis",
        "code",
    ]
    rows = [
        [
            r.panel_id,
            r.pseudonym,
            r.status,
            r.items_done,
            r.checks_passed,
            r.checks_failed,
            r.active_minutes,
            r.wall_minutes,
            r.pay,
            r.currency,
            link.pay_basis,
            r.code,
        ]
        for r in payment_rows(study, link)
    ]
    return _csv(f"{study.slug}-payments.csv", header, rows)


@login_required
@require_GET
def mapping_csv(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Pseudonym -> panel IDs: the one researcher-only key from exports and reports back to people."""
    study = access_study_to_manage(request.user, slug)
    rows = [
        [p.member.pseudonym, p.panel_id, p.panel_study_id, p.panel_session_id, p.status]
        for p in Participant.objects.filter(study=study).select_related("member").order_by("created_at", "id")
    ]
    return _csv(
        f"{study.slug}-participant-mapping.csv",
        ["pseudonym", "panel_id", "panel_study_id", "panel_session_id", "status"],
        rows,
    )
