"""HTML pages: parse input, call access + service/selector, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, StreamingHttpResponse
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
from .forms import AddMembersForm, FlagForm, ImportForm, answer_form
from .http import AuthenticatedHttpRequest
from .models import Annotation, Assignment, ImportJob, Study
from .selectors import progress as progress_selectors
from .selectors.workbench import annotator_progress, display_payload, previous_answer
from .services import ServiceError
from .services.assignments import ClaimContention, LeaseLost, NotAllowed, claim_next, flag, skip, submit
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


# --- annotator workbench ------------------------------------------------------
# Plain forms posted with CSRF, redirect after every successful POST (PRG);
# static/js/workbench.js only adds shortcuts, the active-time timer and hints.

#: Shown when a POST names an assignment the user no longer holds (its lease ran out and
#: someone else took it over), or never held: the same words either way.
NOT_YOURS = "that item is no longer assigned to you (it was open for too long and went to another annotator)"


def _not_yours(request: HttpRequest, study: Study, what: str) -> HttpResponse:
    messages.error(request, f"{what}: {NOT_YOURS}.")
    return redirect("annotation:annotate", slug=study.slug)


def _refused(request: HttpRequest, study: Study, reason: str) -> HttpResponse:
    return render(request, "annotation/annotate_refused.html", {"study": study, "reason": reason}, status=403)


def _workbench(
    request: AuthenticatedHttpRequest, study: Study, assignment: Assignment, form, *, revising: bool, status: int = 200
) -> HttpResponse:
    """The annotate page (or the revise page) for one assignment."""
    assignment.study = study
    annotation = getattr(assignment, "annotation", None) if revising else None
    back = previous_answer(request.user, study, before=assignment if revising else None)
    item = display_payload(assignment)
    context = {
        "study": study,
        "assignment": assignment,
        "item": item,
        "form": form,
        "passages": [] if study.is_preference else form.passage_rows(item["evidence"]),
        "revising": revising,
        "progress": annotator_progress(request.user, study),
        "back": back,
        "timer": {
            "study": study.slug,
            "assignment": assignment.pk,
            "base_ms": (annotation.active_ms or 0) if annotation is not None else 0,
            "persist": not revising,
        },
    }
    return render(request, "annotation/annotate.html", context, status=status)


def _form_for(study: Study, assignment: Assignment, data=None, *, prefill: bool = False):
    passages = 0 if study.is_preference else len(assignment.item.payload.get("evidence", []))
    annotation = getattr(assignment, "annotation", None) if prefill else None
    return answer_form(study, passages=passages, data=data, annotation=annotation)


@login_required
@require_GET
def annotate(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The annotator's current item (the same one until answered or skipped), or the finish page."""
    study = access_study(request.user, slug)
    try:
        assignment = claim_next(user=request.user, study=study)
    except NotAllowed as exc:
        return _refused(request, study, str(exc))
    except ClaimContention as exc:
        return render(request, "annotation/annotate_busy.html", {"study": study, "reason": str(exc)}, status=503)
    if assignment is None:
        context = {
            "study": study,
            "progress": annotator_progress(request.user, study),
            "back": previous_answer(request.user, study),
        }
        return render(request, "annotation/annotate_done.html", context)
    return _workbench(request, study, assignment, _form_for(study, assignment), revising=False)


def _save_answer(
    request: AuthenticatedHttpRequest, study: Study, assignment: Assignment, *, revising: bool
) -> HttpResponse:
    form = _form_for(study, assignment, request.POST)
    if form.is_valid():
        try:
            submit(
                user=request.user,
                study=study,
                assignment_id=assignment.pk,
                answer=form.to_answer(),
                source=Annotation.Source.WEB,
            )
        except (LeaseLost, NotAllowed) as exc:
            messages.error(request, f"Your answer was not saved: {exc}.")
            return redirect("annotation:annotate", slug=study.slug)
        except ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "Your answer to the earlier item was changed." if revising else "Saved.")
            return redirect("annotation:annotate", slug=study.slug)
    return _workbench(request, study, assignment, form, revising=revising, status=400)


@login_required
@require_POST
def annotate_submit(request: AuthenticatedHttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """Answer the current item; a repeated POST (double click) changes nothing."""
    study = access_study(request.user, slug)
    assignment = progress_selectors.own_assignment(request.user, study, assignment_id)
    if assignment is None:
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


# --- researcher: progress and quality control ------------------------------------


def _progress_live_context(study: Study) -> dict:
    """The parts of the progress page that change while a study runs (refreshed by static/js/progress.js)."""
    counts = selectors.study_counts(study)
    flags, flag_total = progress_selectors.flagged(study)
    return {
        "study": study,
        "counts": counts,
        "throughput": progress_selectors.throughput(
            study, expected=counts["expected"], collected_total=counts["annotations"]
        ),
        "annotators": progress_selectors.annotator_quality(study),
        "flags": flags,
        "flag_total": flag_total,
        "speeder_rule": progress_selectors.SPEEDER_RULE,
        "low_gold_rule": progress_selectors.LOW_GOLD_RULE,
        "abstain_label": "both bad" if study.is_preference else "inconclusive",
        "refreshed_at": timezone.now(),
    }


@login_required
@require_GET
def study_progress(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    state = request.GET.get("state", "")
    state = state if state in progress_selectors.ITEM_STATES else ""
    page = Paginator(progress_selectors.items_with_slots(study, state), 50).get_page(request.GET.get("page"))
    context = {
        **_progress_live_context(study),
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
    response = render(request, "annotation/_progress_live.html", _progress_live_context(study))
    response["Cache-Control"] = "no-store"
    return response
