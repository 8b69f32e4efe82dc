"""Adjudication pages: the queue, one item to resolve (keyboard-driven, static/js/workbench.js),
and the researchers' settings and adjudicator flags."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import Researcher, access_item_to_adjudicate, access_member, access_study_to_adjudicate
from annotation.adjudication.forms import AdjudicationForm, AdjudicationSettingsForm, list_names
from annotation.adjudication.selectors import (
    adjudication_queue,
    adjudicator_choices,
    item_for_adjudication,
    next_to_adjudicate,
)
from annotation.adjudication.services import (
    adjudicate,
    import_adjudications,
    set_adjudication_settings,
    set_can_adjudicate,
)
from annotation.errors import ImportFailed, ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.lib.formats import detect_format
from annotation.models import Adjudication, Item, Study


@login_required
@require_GET
def adjudication_queue_page(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The queue under the study's rule; researchers also see the settings and who may adjudicate."""
    study = access_study_to_adjudicate(request.user, slug)
    queue = adjudication_queue(study, request.user)
    context = {
        "study": study,
        "queue": queue,
        "done": sum(1 for entry in queue if entry.mine),
        "next_item": next((entry.item for entry in queue if not entry.mine), None),
        "is_researcher": study.user_role == Researcher,
    }
    if study.user_role == Researcher:
        context["settings_form"] = AdjudicationSettingsForm(
            initial={name: getattr(study, name) for name in AdjudicationSettingsForm.base_fields}
        )
        context["members"] = adjudicator_choices(study)
    return render(request, "annotation/adjudication_queue.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def adjudicate_item(request: AuthenticatedHttpRequest, slug: str, external_id: str) -> HttpResponse:
    """GET: the item with every annotator's answer. POST: store the final label, then the next item."""
    item = access_item_to_adjudicate(request.user, slug, external_id)
    study = item.study
    mine = Adjudication.objects.filter(item=item, adjudicator=request.user).first()
    if request.method == "GET":
        initial = (
            {"label": mine.label, "note": mine.note, "guidelines_unclear": mine.guidelines_unclear} if mine else {}
        )
        return _page(request, study, item, AdjudicationForm(initial=initial, study=study), mine)
    form = AdjudicationForm(request.POST, study=study)
    if form.is_valid():
        try:
            adjudicate(
                item=item,
                adjudicator=request.user,
                verdict=form.verdict(),
                note=form.cleaned_data["note"],
                guidelines_unclear=form.cleaned_data["guidelines_unclear"],
            )
        except ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Adjudicated {item.external_id}.")
            following = next_to_adjudicate(study, request.user, after=item.external_id)
            if following is None:
                messages.info(request, "The queue is done: every item in it has your final label.")
                return redirect("annotation:adjudication_queue", slug=study.slug)
            return redirect("annotation:adjudicate_item", slug=study.slug, external_id=following)
    return _page(request, study, item, form, mine, status=400)


def _page(
    request: AuthenticatedHttpRequest,
    study: Study,
    item: Item,
    form: AdjudicationForm,
    mine: Adjudication | None,
    status: int = 200,
) -> HttpResponse:
    queue = adjudication_queue(study, request.user)
    position = next((i for i, entry in enumerate(queue, start=1) if entry.item == item.external_id), None)
    view = item_for_adjudication(item)
    others = [adj for adj in view["adjudications"] if adj["adjudicator_id"] != request.user.pk]
    context = {
        "study": study,
        "item": item,
        "view": view,
        "form": form,
        "mine": mine,
        "others": others,
        "list_names": list_names(study),
        "queue_size": len(queue),
        "queue_done": sum(1 for entry in queue if entry.mine),
        "position": position,
        "timer": {"study": study.slug, "assignment": f"adjudicate:{item.pk}", "base_ms": 0, "persist": False},
    }
    return render(request, "annotation/adjudicate.html", context, status=status)


@login_required
@require_POST
def adjudication_settings(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Researchers: change the queue rule, audit share, system names and the reference rule."""
    study = access_study_to_adjudicate(request.user, slug)
    if study.user_role != Researcher:  # an adjudicator: 403, before the form is read
        raise PermissionDenied("Only the study's researchers change how adjudication works.")
    form = AdjudicationSettingsForm(request.POST)
    if not form.is_valid():
        messages.error(
            request,
            "; ".join(f"{name}: {' '.join(str(error) for error in errors)}" for name, errors in form.errors.items()),
        )
        return redirect("annotation:adjudication_queue", slug=study.slug)
    data = form.cleaned_data
    try:
        changed = set_adjudication_settings(
            study=study,
            user=request.user,
            rule=data["adjudication_rule"],
            audit_share=data["adjudication_audit_share"],
            shows_systems=data["adjudication_shows_systems"],
            shows_verifiers=data["adjudication_shows_verifiers"],
            reference_rule=data["reference_rule"],
        )
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Saved ({len(changed)} setting(s) changed).")
    return redirect("annotation:adjudication_queue", slug=study.slug)


@login_required
@require_POST
def member_adjudicator(request: AuthenticatedHttpRequest, slug: str, member_id: int) -> HttpResponse:
    """Researchers: give a member the adjudicator flag, or take it back."""
    member = access_member(request.user, slug, member_id)
    allowed = request.POST.get("can_adjudicate") == "1"
    try:
        set_can_adjudicate(member=member, allowed=allowed)
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        verb = "may now adjudicate" if allowed else "no longer adjudicates"
        messages.success(request, f"{member.pseudonym} {verb}.")
    return redirect("annotation:adjudication_queue", slug=slug)


@login_required
@require_POST
def adjudication_import(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Researchers: import past adjudications from a JSON Lines or CSV file, all or nothing."""
    study = access_study_to_adjudicate(request.user, slug)
    if study.user_role != Researcher:  # an adjudicator: 403, before the upload is read
        raise PermissionDenied("Only the study's researchers import adjudications.")
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "A file is needed to import adjudications.")
        return redirect("annotation:adjudication_queue", slug=study.slug)
    try:
        result = import_adjudications(study=study, stream=upload, fmt=detect_format(upload.name or ""))
    except ImportFailed as exc:
        messages.error(request, str(exc))
    except (ServiceError, ValueError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Imported {result.created} adjudication(s), revised {result.updated}.")
    return redirect("annotation:adjudication_queue", slug=study.slug)
