"""HTML pages: parse input, call access + service/selector, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from . import selectors
from .access import Researcher, access_item, access_study
from .exports import CONTENT_TYPES, export_chunks, export_filename
from .forms import AddMembersForm, ImportForm
from .models import ImportJob
from .services import ServiceError, add_members
from .services.import_jobs import submit_import


@login_required
@require_GET
def my_studies(request: HttpRequest) -> HttpResponse:
    return render(request, "annotation/my_studies.html", {"rows": selectors.my_studies(request.user)})


@login_required
@require_GET
def study_detail(request: HttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug)
    if study.user_role != Researcher:
        return render(request, "annotation/study_annotator.html", {"study": study})
    context = {
        "study": study,
        "counts": selectors.study_counts(study),
        "domains": selectors.items_by_domain(study),
        "members": selectors.study_members(study),
        "imports": selectors.recent_imports(study),
        "import_form": ImportForm(),
        "members_form": AddMembersForm(),
    }
    return render(request, "annotation/study_detail.html", context)


@login_required
@require_GET
def item_list(request: HttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    domain = request.GET.get("domain")
    query = request.GET.get("q", "").strip()
    page = Paginator(selectors.study_items(study, domain=domain, query=query), 50).get_page(request.GET.get("page"))
    return render(
        request,
        "annotation/item_list.html",
        {"study": study, "page": page, "domain": domain, "q": query, "domains": selectors.items_by_domain(study)},
    )


@login_required
@require_GET
def item_detail(request: HttpRequest, slug: str, external_id: str) -> HttpResponse:
    item = access_item(request.user, slug, external_id, role=Researcher)
    return render(
        request,
        "annotation/item_detail.html",
        {
            "study": item.study,
            "item": item,
            "annotations": selectors.item_annotations(item),
            "names": selectors.pseudonyms(item.study),
        },
    )


@login_required
@require_POST
def study_import(request: HttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose what to import and a file: " + "; ".join(
            f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()
        ))
        return redirect("annotation:study_detail", slug=study.slug)
    try:
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
def import_job(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    job = get_object_or_404(ImportJob, study=study, pk=pk)
    return render(request, "annotation/import_job.html", {"study": study, "job": job})


@login_required
@require_POST
def study_add_members(request: HttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    form = AddMembersForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(" ".join(errors) for errors in form.errors.values()))
        return redirect("annotation:study_detail", slug=study.slug)
    try:
        outcomes = add_members(study=study, usernames=form.cleaned_data["usernames"], role=form.cleaned_data["role"])
    except ServiceError as exc:
        messages.error(request, str(exc))
        return redirect("annotation:study_detail", slug=study.slug)
    for outcome in outcomes:
        if outcome.already_member:
            messages.info(request, f"{outcome.username} is already in this study (as {outcome.role}); unchanged.")
        elif outcome.password:
            messages.warning(
                request,
                f"Created {outcome.username} ({outcome.role}) with password {outcome.password} — "
                "copy it now, it is shown only once.",
            )
        else:
            messages.success(request, f"Added {outcome.username} as {outcome.role}.")
    return redirect("annotation:study_detail", slug=study.slug)


@login_required
@require_GET
def study_export(request: HttpRequest, slug: str, fmt: str) -> StreamingHttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    response = StreamingHttpResponse(
        (chunk.encode("utf-8") for chunk in export_chunks(study, fmt)), content_type=CONTENT_TYPES[fmt]
    )
    response["Content-Disposition"] = f'attachment; filename="{export_filename(study, fmt)}"'
    return response
