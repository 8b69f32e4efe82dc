"""Django admin for verifiers, runs and predictions: researchers' settings go through the services' checks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from annotation.errors import ServiceError
from annotation.http import logged_in_user

from .models import Prediction, Verifier, VerifierRun
from .verifiers.services import start_run, stop_run
from .verifiers.services.verifiers import EDITABLE, VerifierInvalid, stored_fields, validated_fields

if TYPE_CHECKING:  # django-stubs-ext is a development dependency
    from django_stubs_ext import WithAnnotations


class PredictionCount(TypedDict):
    n_predictions: int


class VerifierAdminForm(forms.ModelForm):
    """Runs the same validation as the page and the API (endpoint, address policy, preset, labels).

    A researcher endpoint's key is typed into ``api_key`` (never shown again) and stored encrypted.
    """

    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Own endpoint only: stored encrypted, never shown; leave empty to keep the stored key.",
    )

    class Meta:
        model = Verifier
        fields = "__all__"

    def clean(self) -> dict[str, Any]:
        super().clean()  # a ModelForm's clean() returns self.cleaned_data itself (a form's may return None)
        cleaned = self.cleaned_data
        study = cleaned.get("study")
        kind = cleaned.get("kind")
        if study is None or kind is None:
            return cleaned
        values = {field: cleaned.get(field) for field in EDITABLE}
        for field in ("custom_labels", "label_map", "options"):
            values[field] = values[field] or ([] if field == "custom_labels" else {})
        try:
            if not values["api_key"]:
                values.pop("api_key")  # keep the stored key
            valid = validated_fields(study, kind, values, exclude_pk=self.instance.pk)
            if valid["endpoint"] or "api_key" in valid:
                self.instance.api_key_encrypted = stored_fields(valid)["api_key_encrypted"]
            cleaned.update({field: value for field, value in valid.items() if field != "api_key"})
        except VerifierInvalid as exc:
            for field, message in exc.errors.items():
                self.add_error(field if field in self.fields else None, message)
        except ServiceError as exc:
            self.add_error(None, str(exc))
        return cleaned


@admin.register(Verifier)
class VerifierAdmin(admin.ModelAdmin):
    form = VerifierAdminForm
    list_display = (
        "name",
        "study",
        "kind",
        "preset",
        "model",
        "endpoint",
        "base_url",
        "concurrency",
        "prediction_count",
        "created_at",
    )
    list_filter = ("kind", "preset", "study")
    search_fields = ("name", "model", "study__slug")
    readonly_fields = ("created_by", "created_at", "updated_at")
    list_select_related = ("study",)
    actions = ["start_runs"]
    fieldsets = (
        (None, {"fields": ("study", "name", "kind")}),
        (
            "Model and endpoint",
            {
                "fields": (
                    "preset",
                    "model",
                    "endpoint",
                    "base_url",
                    "api_key",
                    "temperature",
                    "max_tokens",
                    "concurrency",
                    "timeout",
                    "retries",
                )
            },
        ),
        ("Custom preset", {"fields": ("template", "system_prompt", "custom_labels"), "classes": ("collapse",)}),
        ("Labels and options", {"fields": ("label_map", "options")}),
        ("Cost estimate", {"fields": ("price_input_per_1k", "price_output_per_1k")}),
        ("History", {"fields": ("created_by", "created_at", "updated_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Verifier]:
        return super().get_queryset(request).annotate(n_predictions=Count("predictions"))

    @admin.display(description="predictions", ordering="n_predictions")
    def prediction_count(self, verifier: WithAnnotations[Verifier, PredictionCount]) -> int:
        """`verifier` comes from get_queryset, which counts its predictions."""
        return verifier.n_predictions

    @admin.action(description="Start a run of the selected verifiers (background worker)")
    def start_runs(self, request: HttpRequest, queryset: QuerySet[Verifier]) -> None:
        for verifier in queryset:
            try:
                run = start_run(verifier=verifier, created_by=logged_in_user(request))
            except ServiceError as exc:
                self.message_user(request, f"{verifier.name}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{verifier.name}: run {run.pk} queued", messages.SUCCESS)


@admin.register(VerifierRun)
class VerifierRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "verifier",
        "status",
        "done",
        "total",
        "cached",
        "errors",
        "unparseable",
        "tokens_in",
        "tokens_out",
        "estimated_cost",
        "heartbeat_at",
        "created_at",
    )
    list_filter = ("status", "verifier__study")
    search_fields = ("verifier__name", "verifier__study__slug")
    list_select_related = ("verifier",)
    actions = ["stop_runs"]

    def get_readonly_fields(self, request: HttpRequest, obj: VerifierRun | None = None) -> list[str]:
        return [field.name for field in VerifierRun._meta.fields]  # runs change through the runner only

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Stop the selected runs")
    def stop_runs(self, request: HttpRequest, queryset: QuerySet[VerifierRun]) -> None:
        for run in queryset:
            try:
                stop_run(run=run)
            except ServiceError as exc:
                self.message_user(request, f"run {run.pk}: {exc}", messages.WARNING)


@admin.register(Prediction)
class PredictionAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "verifier",
        "item",
        "label",
        "raw_label",
        "parse_status",
        "score",
        "latency_ms",
        "tokens_in",
        "tokens_out",
        "short_error",
        "created_at",
    )
    list_filter = ("parse_status", "verifier__kind", "verifier__study")
    search_fields = ("item__external_id", "verifier__name", "rationale", "error")
    list_select_related = ("verifier", "item")
    raw_id_fields = ("item", "run", "verifier")

    def get_readonly_fields(self, request: HttpRequest, obj: Prediction | None = None) -> list[str]:
        return [field.name for field in Prediction._meta.fields]  # predictions are evidence; never edited by hand

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="error")
    def short_error(self, prediction: Prediction) -> str:
        return prediction.error[:80]
