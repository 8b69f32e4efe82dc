"""HTML pages: parse input, call access + service/selector, render."""

# Pages that make and run studies: new study, settings and lifecycle, duplicate, previews, format help.
#
# Thin like views.py: forms parse, `services.studies` decides, access helpers fetch.

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import Annotator, Researcher, access_item, access_study, may_adjudicate, may_create_studies
from annotation.errors import ServiceError
from annotation.http import AuthenticatedHttpRequest
from annotation.lib.markdown import render_markdown
from annotation.members.forms import AddMembersForm
from annotation.models import Assignment, Item, Study, StudyChange
from annotation.progress import selectors as study_progress
from annotation.questions.definitions import parse_questions
from annotation.questions.forms import page_questions
from annotation.studies import selectors
from annotation.studies.examples import FORMATS, WHATS, example_file, example_filename, example_items, example_systems
from annotation.studies.forms import (
    DuplicateForm,
    NewStudyForm,
    StatusForm,
    StudySettingsForm,
    status_actions,
    status_confirmation,
)
from annotation.studies.services import (
    MAX_INSTRUCTIONS,
    change_status,
    create_study,
    duplicate_study,
    frozen_settings,
    has_annotations,
    update_study,
)
from annotation.transfer import selectors as transfer_selectors
from annotation.transfer.exports import CONTENT_TYPES
from annotation.transfer.forms import ImportForm
from annotation.workbench.forms import VerificationAnswerForm, answer_form
from annotation.workbench.selectors import annotator_progress, display_payload


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
        "counts": study_progress.study_counts(study),
        "domains": selectors.items_by_domain(study),
        "members": selectors.study_members(study),
        "imports": transfer_selectors.recent_imports(study),
        "exports": transfer_selectors.recent_exports(study),
        "export_in_background": transfer_selectors.export_runs_in_background(study),
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
    gold = request.GET.get("gold", "")  # "yes": items with a gold label, "no": without, else all
    gold = gold if gold in ("yes", "no") else ""
    items = selectors.paged_study_items(
        study,
        domain=domain,
        query=query,
        annotator_id=member.user_id if member is not None else None,
        has_gold={"yes": True, "no": False}.get(gold),
    )
    page = Paginator(items, 50).get_page(request.GET.get("page"))
    context = {
        "study": study,
        "page": page,
        "domain": domain,
        "q": query,
        "gold": gold,
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


def _check_may_create(request: AuthenticatedHttpRequest) -> None:
    if not may_create_studies(request.user):
        raise PermissionDenied(
            "Creating studies is for researchers and staff: ask an administrator for the permission "
            "'annotation.add_study' (or to join the researchers group)."
        )


def _preview(form: StudySettingsForm) -> Any:
    """The instructions as annotators will see them, for the no-JavaScript "Preview" button."""
    return render_markdown(form.data.get("instructions", ""))


@login_required
@require_http_methods(["GET", "POST"])
def study_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    """A new study, made as a draft; its creator becomes its researcher."""
    _check_may_create(request)
    if request.method == "GET":
        form = NewStudyForm(initial={"kind": Study.Kind.VERIFICATION, "annotators_per_item": 3, "tie_allowed": True})
        return render(request, "annotation/study_new.html", {"form": form, "preview": None})
    form = NewStudyForm(request.POST)
    if "preview" in request.POST:
        form.is_valid()
        return render(request, "annotation/study_new.html", {"form": form, "preview": _preview(form)})
    if form.is_valid():
        try:
            study = create_study(
                slug=form.cleaned_data["slug"],
                **form.settings(),
                status=Study.Status.DRAFT,
                created_by=request.user,
            )
        except ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(
                request,
                f"Created the draft study {study.name}. Import items and add members, then open it for annotation.",
            )
            return redirect("annotation:study_detail", slug=study.slug)
    return render(request, "annotation/study_new.html", {"form": form, "preview": None}, status=400)


def _settings_page(
    request: AuthenticatedHttpRequest,
    study: Study,
    form: StudySettingsForm,
    *,
    preview: Any = None,
    duplicate: DuplicateForm | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "study": study,
        "form": form,
        "preview": preview,
        "actions": status_actions(study),
        "duplicate_form": duplicate or DuplicateForm(initial={"slug": f"{study.slug}-copy"[:64]}),
        "changes": StudyChange.objects.filter(study=study).select_related("changed_by")[:200],
        "annotated": has_annotations(study),
        "crumb": "Settings",
    }
    return render(request, "annotation/study_settings.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def study_settings(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Edit a study's settings (refusals say why), change its status, duplicate it, see its change log."""
    study = access_study(request.user, slug, role=Researcher)
    frozen = frozen_settings(study)
    if request.method == "GET":
        form = StudySettingsForm(initial=StudySettingsForm.initial_for(study), frozen=frozen)
        return _settings_page(request, study, form, preview=render_markdown(study.instructions))
    form = StudySettingsForm(request.POST, frozen=frozen)
    if "preview" in request.POST:
        form.is_valid()
        return _settings_page(request, study, form, preview=_preview(form))
    if form.is_valid():
        current = StudySettingsForm.initial_for(study)
        unchanged = StudySettingsForm(current)
        unchanged.is_valid()
        # Only what the researcher changed goes to the service (a preference study's
        # labels follow its tie / both-bad options unless edited themselves).
        changes = {
            name: value
            for name, value in form.settings().items()
            if name not in unchanged.cleaned_data or unchanged.cleaned_data[name] != value
        }
        try:
            recorded = update_study(study=study, changes=changes, user=request.user)
        except ServiceError as exc:
            form.add_error(None, f"Nothing was changed: {exc}.")
        else:
            note = f" ({len(recorded)} change(s) recorded in the log below)" if recorded else ""
            messages.success(request, f"Settings saved{note}." if changes else "Nothing to change.")
            return redirect("annotation:study_settings", slug=study.slug)
    return _settings_page(request, study, form, status=400)


@login_required
@require_POST
def study_status(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    study = access_study(request.user, slug, role=Researcher)
    form = StatusForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a status: " + ", ".join(Study.Status.values) + ".")
        return redirect("annotation:study_settings", slug=study.slug)
    question = status_confirmation(study, form.cleaned_data["status"])
    if question and not form.cleaned_data["confirm"]:  # Close and Pause: asked first (the page's dialog, or this page)
        context = {
            "study": study,
            "question": question,
            "status": form.cleaned_data["status"],
            "button": {value: text for value, text, _ in status_actions(study)}[form.cleaned_data["status"]],
            "next": "detail" if request.POST.get("next") == "detail" else "",
            "crumb": "Status",
        }
        return render(request, "annotation/study_status_confirm.html", context)
    try:
        change_status(study=study, status=form.cleaned_data["status"], user=request.user)
    except ServiceError as exc:
        messages.error(request, f"The status was not changed: {exc}.")
    else:
        messages.success(request, f"The study is now {study.get_status_display().lower()}.")
    target = "annotation:study_detail" if request.POST.get("next") == "detail" else "annotation:study_settings"
    return redirect(target, slug=study.slug)


@login_required
@require_POST
def study_duplicate(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """A draft copy (settings, instructions, optionally items), e.g. the main run after a pilot."""
    study = access_study(request.user, slug, role=Researcher)
    _check_may_create(request)
    form = DuplicateForm(request.POST)
    if form.is_valid():
        try:
            copy = duplicate_study(
                study=study,
                slug=form.cleaned_data["slug"],
                name=form.cleaned_data["name"] or None,
                copy_items=form.cleaned_data["copy_items"],
                user=request.user,
            )
        except ServiceError as exc:
            form.add_error("slug", str(exc))
        else:
            messages.success(request, f"Created the draft {copy.name} from {study.name}.")
            return redirect("annotation:study_detail", slug=copy.slug)
    settings_form = StudySettingsForm(initial=StudySettingsForm.initial_for(study), frozen=frozen_settings(study))
    return _settings_page(request, study, settings_form, duplicate=form, status=400)


@login_required
@require_POST
def markdown_preview(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The instructions editor's live preview: the same sanitised renderer as the study and annotate pages."""
    text = request.POST.get("text", "")
    if len(text) > MAX_INSTRUCTIONS:
        return HttpResponse(
            f"Instructions are too long to preview (limit {MAX_INSTRUCTIONS:,} characters).",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    return HttpResponse(render_markdown(text), content_type="text/html; charset=utf-8")


#: The longest questions text the live preview reads (twenty full definitions fit many times over).
MAX_QUESTIONS_TEXT = 50_000


@login_required
@require_POST
def questions_preview(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The extra questions' live preview: the definitions checked by the study service's own checker and
    rendered with the annotate page's own partials (claim questions on a two-claim example), or the
    checker's error as plain text."""
    text, kind = request.POST.get("text", ""), request.POST.get("kind", "verification")
    plain = "text/plain; charset=utf-8"
    if len(text) > MAX_QUESTIONS_TEXT:
        return HttpResponse(
            f"Too long to preview (limit {MAX_QUESTIONS_TEXT:,} characters).", status=400, content_type=plain
        )
    try:
        questions = parse_questions(text.strip() or [], kind=kind if kind in Study.Kind.values else "verification")
    except ServiceError as exc:
        return HttpResponse(str(exc), status=400, content_type=plain)
    return render(request, "annotation/_questions_preview.html", {"questions": page_questions(questions, {}, (2, 2))})


@login_required
@require_GET
def annotate_preview(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The annotate page with a real item of the study, read-only: nothing is leased or stored."""
    study = access_study(request.user, slug, role=Researcher)
    items = Item.objects.filter(study=study).order_by("position", "pk")
    wanted = request.GET.get("item")
    item = items.filter(external_id=wanted).first() if wanted else items.first()
    if wanted and item is None:
        raise Http404("No such item in this study.")
    context: dict[str, Any] = {"study": study, "item": None, "crumb": "Annotator's view"}
    if item is not None:
        systems = study.systems or list(item.payload.get("lists", {}))[:2]
        # An unsaved assignment: display_payload is the one place that decides what annotators see.
        assignment = Assignment(study=study, item=item, left_system=systems[0] if systems else "")
        shown = display_payload(assignment)
        form = answer_form(study, passages=len(shown.get("evidence", [])), assignment=assignment)
        context.update(
            {
                "item": shown,
                "item_id": item.external_id,
                "form": form,
                "passages": form.passage_rows(shown["evidence"]) if isinstance(form, VerificationAnswerForm) else [],
                "next_item": items.filter(position__gt=item.position).values_list("external_id", flat=True).first(),
            }
        )
    return render(request, "annotation/annotate_preview.html", context)


@login_required
@require_GET
def formats_help(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """How import files look for this study, with example files made from its settings."""
    study = access_study(request.user, slug, role=Researcher)
    examples = {(what, fmt): example_file(study.kind, what, fmt, study) for what in WHATS for fmt in FORMATS}
    context = {
        "study": study,
        "crumb": "File formats",
        "systems": example_systems(study),
        "items_jsonl": examples[("items", "jsonl")],
        "annotations_jsonl": examples[("annotations", "jsonl")],
        "items_csv": examples[("items", "csv")],
        "annotations_csv": examples[("annotations", "csv")],
        "item_readable": json.dumps(example_items(study.kind, study)[0], indent=2, ensure_ascii=False),
    }
    return render(request, "annotation/formats.html", context)


@login_required
@require_GET
def format_example(request: AuthenticatedHttpRequest, slug: str, what: str, fmt: str) -> HttpResponse:
    """An example file to download, generated from the study's labels and systems."""
    study = access_study(request.user, slug, role=Researcher)
    if what not in WHATS or fmt not in FORMATS:
        raise Http404("No such example file.")
    response = HttpResponse(example_file(study.kind, what, fmt, study), content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{example_filename(study.kind, what, fmt, study)}"'
    return response
