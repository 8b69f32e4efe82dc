"""HTML pages: parse input, call access + service/selector, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.access import Researcher, access_export_job, access_study
from annotation.errors import ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.lib.csvsafe import csv_text
from annotation.lib.export_formats import export_format
from annotation.models import ImportJob
from annotation.transfer import selectors
from annotation.transfer.adapters.base import PAGE
from annotation.transfer.adapters.labelstudio_export import labelstudio_response
from annotation.transfer.adapters.uploads import import_upload_from, system_names
from annotation.transfer.exports import CONTENT_TYPES, export_chunks, export_file_response, export_filename
from annotation.transfer.forms import ImportForm
from annotation.transfer.services.export_jobs import request_export
from annotation.transfer.services.import_jobs import submit_import
from annotation.workbench.questionnaires import questionnaire_columns, questionnaire_rows


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
                face=PAGE,
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
                face=PAGE,
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
        job = request_export(
            study=study,
            file_format=request.POST.get("format", ""),
            created_by=request.user,
            license=request.POST.get("license", "").strip(),
        )
    except ServiceError as exc:
        messages.error(request, f"No export started: {exc}.")
        return redirect("annotation:study_detail", slug=study.slug)
    return redirect("annotation:export_job", slug=study.slug, export_id=job.pk)


@login_required
@require_GET
def export_job(request: AuthenticatedHttpRequest, slug: str, export_id: int) -> HttpResponse:
    job = access_export_job(request.user, slug, export_id)
    context = {"study": job.study, "job": job, "stuck": job.looks_stuck(), "built_by": export_format(job.file_format)}
    return render(request, "annotation/export_job.html", context)


@login_required
@require_GET
def export_job_download(request: AuthenticatedHttpRequest, slug: str, export_id: int) -> HttpResponseBase:
    job = access_export_job(request.user, slug, export_id)
    return export_file_response(job)


@login_required
@require_GET
def questionnaire_export(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Every questionnaire response and quiz attempt, one row each, by pseudonym (researchers): the identity
    mapping stays on the crowd page's mapping CSV."""
    study = access_study(request.user, slug, role=Researcher)
    rows = questionnaire_rows(study)
    columns = questionnaire_columns(study)
    response = HttpResponse(
        csv_text(columns, ([row.get(column) for column in columns] for row in rows)), content_type=CONTENT_TYPES["csv"]
    )
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-questionnaires.csv"'
    return response
