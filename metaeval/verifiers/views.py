"""The verifiers page of a study (researchers): define verifiers, start and stop runs, watch them progress.

Thin: every object comes through an access helper, every write through a
service. The live progress is static/js/verifier_runs.js polling
``run_status`` (JSON); the page works without it (reload to refresh).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import Researcher, access_study
from annotation.errors import ImportFailed, ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.lib.formats import detect_format
from annotation.models import ExportJob, Study
from annotation.transfer.faces import PAGE
from annotation.transfer.selectors import latest_export

from ..models import Verifier
from .access import access_run, access_verifier
from .forms import PairwiseJudgeForm, PredictionImportForm, StartRunForm, VerifierForm
from .selectors import fitting_presets, missing_baselines, recent_runs, run_status, study_verifiers
from .services import create_verifier, ensure_baselines, import_predictions, start_run, stop_run
from .services.prediction_import import import_predictions_from
from .services.verifiers import VerifierInvalid


def _page(
    request: AuthenticatedHttpRequest,
    study,
    form: VerifierForm,
    import_form: PredictionImportForm | None = None,
    import_errors: list | None = None,
    status: int = 200,
    judge_form: PairwiseJudgeForm | None = None,
) -> HttpResponse:
    context = {
        "study": study,
        # Verifiers judge single claims: a preference study is told so instead of offered forms that refuse.
        "applies": not study.is_preference,
        "missing_baselines": missing_baselines(study),
        "verifiers": study_verifiers(study),
        "runs": recent_runs(study),
        "form": form,
        "run_form": StartRunForm(),
        "import_form": import_form or PredictionImportForm(),
        "import_errors": import_errors or [],
        "crumb": "Verifiers",
        "judge_form": (judge_form or PairwiseJudgeForm()) if study.is_preference else None,
        "prediction_exports": [
            job
            for job in (
                latest_export(study, fmt)
                for fmt in (ExportJob.Format.PREDICTIONS_CSV, ExportJob.Format.PREDICTIONS_JSONL)
            )
            if job is not None
        ],
    }
    return render(request, "metaeval/verifiers/verifiers.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def verifiers_page(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """GET: the study's verifiers and runs. POST: define a new LLM verifier."""
    study = access_study(request.user, slug, role=Researcher)
    if request.method == "GET":
        fitting = fitting_presets(study)
        return _page(request, study, VerifierForm(initial={"preset": fitting[0]} if fitting else None))
    form = VerifierForm(request.POST)
    verifier = _create_from(form, study, request.user)
    if verifier is None:
        return _page(request, study, form, status=400)
    messages.success(request, f"Verifier {verifier.name!r} defined. Start a run below.")
    return redirect("verifiers:list", slug=study.slug)


def _create_from(form: VerifierForm | PairwiseJudgeForm, study: Study, user: User) -> Verifier | None:
    """The verifier a valid form defines, or None with the service's refusals put on the form."""
    if not form.is_valid():
        return None
    try:
        return create_verifier(study=study, created_by=user, **form.service_fields())
    except VerifierInvalid as exc:
        for field, message in exc.errors.items():
            form.add_error(field if field in form.fields else None, message)
    except ServiceError as exc:
        form.add_error(None, str(exc))
    return None


@login_required
@require_POST
def add_pairwise_judge(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Define a pairwise LLM judge of a preference study (the page's own block for it)."""
    study = access_study(request.user, slug, role=Researcher)
    form = PairwiseJudgeForm(request.POST)
    judge = _create_from(form, study, request.user)
    if judge is None:
        return _page(request, study, VerifierForm(), judge_form=form, status=400)
    messages.success(request, f"Pairwise judge {judge.name!r} defined. Run it below.")
    return redirect("verifiers:list", slug=study.slug)


@login_required
@require_POST
def add_baselines(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    try:
        found = ensure_baselines(study=study, created_by=request.user)
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Baselines ready: {', '.join(v.name for v in found)}. Run them like any verifier.")
    return redirect("verifiers:list", slug=study.slug)


@login_required
@require_POST
def start_verifier_run(request: AuthenticatedHttpRequest, slug: str, verifier_id: int) -> HttpResponse:
    verifier = access_verifier(request.user, slug, verifier_id)
    form = StartRunForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Limit must be a whole number of items, at least 1.")
        return redirect("verifiers:list", slug=slug)
    try:
        run = start_run(verifier=verifier, limit=form.cleaned_data.get("limit"), created_by=request.user)
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run {run.pk} of {verifier.name!r} queued for the background worker.")
    return redirect("verifiers:list", slug=slug)


@login_required
@require_POST
def stop_verifier_run(request: AuthenticatedHttpRequest, slug: str, run_id: int) -> HttpResponse:
    run = access_run(request.user, slug, run_id)
    try:
        run = stop_run(run=run)
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run {run.pk} is {run.get_status_display().lower()}.")
    return redirect("verifiers:list", slug=slug)


@login_required
@require_GET
def run_status_json(request: AuthenticatedHttpRequest, slug: str, run_id: int) -> JsonResponse:
    """What the page's poller reads."""
    run = access_run(request.user, slug, run_id)
    return JsonResponse(run_status(run))


@login_required
@require_POST
def import_predictions_upload(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Predictions made elsewhere, imported during the request (such files are small; bigger: the CLI)."""
    study = access_study(request.user, slug, role=Researcher)
    form = PredictionImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, study, VerifierForm(), import_form=form, status=400)
    upload = form.cleaned_data["file"]
    problems: list = []
    try:
        if form.cleaned_data["source"]:
            result = import_predictions_from(
                study=study,
                source=form.cleaned_data["source"],
                upload=upload,
                verifier=form.cleaned_data["verifier"],
                update=form.cleaned_data["update"],
            )
        else:
            fmt = detect_format(upload.name or "")
            limit = settings.PREDICTION_UPLOAD_MAX_BYTES
            if upload.size and upload.size > limit:
                raise ServiceError(
                    f"the file is {upload.size:,} bytes; upload at most {limit:,} here, "
                    "or use manage.py import_predictions"
                )
            result = import_predictions(
                study=study, stream=upload, fmt=fmt, update=form.cleaned_data["update"], face=PAGE
            )
    except ImportFailed as exc:
        problems = [error.as_dict() for error in exc.errors]
        messages.error(request, f"Nothing was imported: the file has {exc.total} problem(s).")
    except (ServiceError, ValueError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Imported {result.created} new and {result.updated} updated prediction(s).")
        for note in result.notes:
            messages.info(request, note)
        return redirect(reverse("verifiers:list", kwargs={"slug": study.slug}))
    return _page(request, study, VerifierForm(), import_form=form, import_errors=problems, status=400)
