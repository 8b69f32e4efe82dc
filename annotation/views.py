"""HTML pages: parse input, call access + service/selector, render."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from . import selectors
from .access import (
    Annotator,
    Researcher,
    access_export_job,
    access_item,
    access_study,
    may_adjudicate,
    may_create_studies,
)
from .adapters.labelstudio_export import labelstudio_response
from .adapters.uploads import import_upload_from, system_names
from .exports import CONTENT_TYPES, export_chunks, export_file_response, export_filename
from .forms import AddMembersForm, ImportForm
from .http import AuthenticatedHttpRequest
from .models import ImportJob, Study
from .selectors import progress as progress_selectors
from .selectors import progress_cache
from .selectors.workbench import annotator_progress
from .services import ServiceError
from .services.export_jobs import request_export
from .services.import_jobs import submit_import
from .study_forms import status_actions


@login_required
@require_GET
def my_studies(request: AuthenticatedHttpRequest) -> HttpResponse:
    context = {"rows": selectors.my_studies(request.user), "can_create": may_create_studies(request.user)}
    return render(request, "annotation/my_studies.html", context)


@login_required
@require_GET
def study_detail(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug)
    if study.user_role != Researcher:
        progress = annotator_progress(request.user, study) if study.user_role == Annotator else None
        annotator_context = {
            "study": study,
            "progress": progress,
            "can_adjudicate": may_adjudicate(request.user, study),
        }
        return render(request, "annotation/study_annotator.html", annotator_context)
    context = {
        "study": study,
        "counts": selectors.study_counts(study),
        "domains": selectors.items_by_domain(study),
        "members": selectors.study_members(study),
        "imports": selectors.recent_imports(study),
        "exports": selectors.recent_exports(study),
        "export_in_background": selectors.export_runs_in_background(study),
        "import_form": ImportForm(),
        "members_form": AddMembersForm(),
        "status_actions": status_actions(study),
    }
    return render(request, "annotation/study_detail.html", context)


@login_required
@require_GET
def item_list(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    domain = request.GET.get("domain") or None  # "" is the form's "all domains", not "no domain"
    query = request.GET.get("q", "").strip()
    pseudonym = request.GET.get("annotator", "").strip()
    member = selectors.study_annotator(study, pseudonym) if pseudonym else None
    if pseudonym and member is None:
        messages.error(request, f"No annotator called {pseudonym!r} in this study; showing every item.")
    items = selectors.study_items(
        study, domain=domain, query=query, annotator_id=member.user_id if member is not None else None
    )
    page = Paginator(items, 50).get_page(request.GET.get("page"))
    context = {
        "study": study,
        "page": page,
        "domain": domain,
        "q": query,
        "annotator": member.pseudonym if member is not None else "",
        "domains": selectors.items_by_domain(study),
    }
    return render(request, "annotation/item_list.html", context)


@login_required
@require_GET
def item_detail(request: AuthenticatedHttpRequest, slug: str, external_id: str) -> HttpResponse:
    item = access_item(request.user, slug, external_id, role=Researcher)
    return render(
        request,
        "annotation/item_detail.html",
        {
            "study": item.study,
            "item": item,
            "annotations": selectors.item_annotations(item),
        },
    )


@login_required
@require_POST
def study_import(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(
            request,
            "Choose what to import and a file: "
            + "; ".join(
                f"{field}: {' '.join(str(error) for error in errors)}" for field, errors in form.errors.items()
            ),
        )
        return redirect("annotation:study_detail", slug=study.slug)
    try:
        if form.cleaned_data["source"]:
            job = import_upload_from(
                study=study,
                what=form.cleaned_data["what"],
                source=form.cleaned_data["source"],
                upload=form.cleaned_data["file"],
                pair=form.cleaned_data["pair"],
                systems=system_names(form.cleaned_data["systems"]),
                update=form.cleaned_data["update"],
                created_by=request.user,
                source_labels=_items_source_labels(form.cleaned_data),
            )
            for note in job.notes:
                messages.info(request, note)
        else:
            job = submit_import(
                study=study,
                what=form.cleaned_data["what"],
                upload=form.cleaned_data["file"],
                file_format=form.cleaned_data["file_format"] or None,
                update=form.cleaned_data["update"],
                created_by=request.user,
            )
    except ServiceError as exc:
        messages.error(request, str(exc))
        return redirect("annotation:study_detail", slug=study.slug)
    return redirect("annotation:import_job", slug=study.slug, pk=job.pk)


def _items_source_labels(cleaned: dict) -> str | None:
    """The form's choice for the labels a pipeline's file carries beside its items; an annotations import
    keeps the file's labels as annotators' labels, so it takes none."""
    return (cleaned["source_labels"] or None) if cleaned["what"] == ImportJob.What.ITEMS else None


@login_required
@require_GET
def import_job(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    job = get_object_or_404(ImportJob, study=study, pk=pk)
    return render(request, "annotation/import_job.html", {"study": study, "job": job})


@login_required
@require_GET
def study_export(request: AuthenticatedHttpRequest, slug: str, fmt: str) -> HttpResponse | StreamingHttpResponse:
    """The export, streamed; a study too big for that is exported in the background instead."""
    study = access_study(request.user, slug, role=Researcher)
    if selectors.export_runs_in_background(study):
        messages.info(
            request,
            f"This study has more than {selectors.export_inline_limit():,} annotations: "
            "prepare the export below; it is written in the background and downloaded when ready.",
        )
        return redirect("annotation:study_detail", slug=study.slug)
    response = StreamingHttpResponse(
        (chunk.encode("utf-8") for chunk in export_chunks(study, fmt)), content_type=CONTENT_TYPES[fmt]
    )
    response["Content-Disposition"] = f'attachment; filename="{export_filename(study, fmt)}"'
    return response


@login_required
@require_GET
def study_export_labelstudio(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse | StreamingHttpResponse:
    """The study as Label Studio tasks (docs/importing.md), streamed; a big study: the command."""
    study = access_study(request.user, slug, role=Researcher)
    if selectors.export_runs_in_background(study):
        messages.info(
            request,
            f"This study has more than {selectors.export_inline_limit():,} annotations: export it for Label Studio "
            "with manage.py export_annotations --format labelstudio.",
        )
        return redirect("annotation:study_detail", slug=study.slug)
    return labelstudio_response(study)


@login_required
@require_POST
def study_export_request(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    try:
        job = request_export(study=study, file_format=request.POST.get("format", ""), created_by=request.user)
    except ServiceError as exc:
        messages.error(request, f"No export started: {exc}.")
        return redirect("annotation:study_detail", slug=study.slug)
    return redirect("annotation:export_job", slug=study.slug, export_id=job.pk)


@login_required
@require_GET
def export_job(request: AuthenticatedHttpRequest, slug: str, export_id: int) -> HttpResponse:
    job = access_export_job(request.user, slug, export_id)
    return render(request, "annotation/export_job.html", {"study": job.study, "job": job, "stuck": job.looks_stuck()})


@login_required
@require_GET
def export_job_download(request: AuthenticatedHttpRequest, slug: str, export_id: int) -> HttpResponseBase:
    job = access_export_job(request.user, slug, export_id)
    return export_file_response(job)


# --- researcher: progress and quality control ------------------------------------


def _progress_live_context(study: Study, *, compute: bool) -> dict:
    """The parts of the progress page that change while a study runs (refreshed by static/js/progress.js).

    The annotator table and throughput come from the cache (selectors.progress_cache): computed
    from every label only when `compute` (the live fragment, or the page asked with ?quality=now)
    and the kept table is missing or too old; the page alone never waits for them.
    """
    counts = selectors.study_counts(study)
    flags, flag_total = progress_selectors.flagged(study)
    quality = (progress_cache.current_quality if compute else progress_cache.peek_quality)(study, counts=counts)
    return {
        "study": study,
        "counts": counts,
        "labels_left": max(0, counts["expected"] - counts["annotations"]),
        "quality": quality,
        "flags": flags,
        "flag_total": flag_total,
        "speeder_rule": progress_selectors.SPEEDER_RULE,
        "low_gold_rule": progress_selectors.LOW_GOLD_RULE,
        "abstain_label": "both bad" if study.is_preference else "inconclusive",
        "refreshed_at": timezone.now(),
    }


class CountedPaginator(Paginator):
    """A paginator told how many rows there are (the counter rows, or `progress.items_in_state` for a
    filter) instead of counting its rows: COUNT(*) over a study's items grows with the study (issue 15)."""

    def __init__(self, object_list: Any, per_page: int, *, count: int) -> None:
        super().__init__(object_list, per_page)
        self.known_count = count

    @cached_property
    def count(self) -> int:
        return self.known_count


@login_required
@require_GET
def study_progress(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The progress page: live counts, the annotator table as last computed (loaded by progress.js
    when there is none or it is outdated; without JavaScript, ?quality=now computes it), and a page of items."""
    study = access_study(request.user, slug, role=Researcher)
    state = request.GET.get("state", "")
    state = state if state in progress_selectors.ITEM_STATES else ""
    live = _progress_live_context(study, compute=request.GET.get("quality") == "now")
    items = progress_selectors.items_with_slots(study, state)
    counts = live["counts"]
    count = (
        progress_selectors.items_in_state(study, state, complete=counts["items_complete"]) if state else counts["items"]
    )
    paginator = CountedPaginator(items if count else items.none(), 50, count=count)
    page = paginator.get_page(request.GET.get("page"))
    context = {
        **live,
        "page": page,
        "slots": progress_selectors.item_slot_status(study, page.object_list),
        "state": state,
        "state_label": progress_selectors.ITEM_STATES[state],
        "states": progress_selectors.ITEM_STATES,
        "refresh_seconds": PROGRESS_REFRESH_SECONDS,
    }
    return render(request, "annotation/study_progress.html", context)


#: How often the open progress page asks for fresh numbers (only while its tab is visible).
PROGRESS_REFRESH_SECONDS = 10


@login_required
@require_GET
def study_progress_live(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The changing part of the progress page as an HTML fragment, for static/js/progress.js to swap in."""
    study = access_study(request.user, slug, role=Researcher)
    response = render(request, "annotation/_progress_live.html", _progress_live_context(study, compute=True))
    response["Cache-Control"] = "no-store"
    return response
