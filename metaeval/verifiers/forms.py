"""Forms of the verifiers page: they parse what was typed; the verifier services decide if it is acceptable."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from annotation.lib.formats import nul_error
from annotation.transfer.adapters import ADAPTERS
from annotation.transfer.adapters.base import PREDICTIONS

from .endpoints import endpoint_names
from .presets import PRESETS
from .presets.pairwise import PAIRWISE_JUDGE

LABEL_MAP_HELP = 'Only if the preset\'s labels are not the study\'s, as JSON: {"unsupported": "not_supported"}.'


class VerifierForm(forms.Form):
    """An LLM verifier on an operator endpoint (or, where allowed, the researcher's own URL and key)."""

    name = forms.CharField(max_length=100)
    preset = forms.ChoiceField(choices=[(preset_id, preset_id) for preset_id in PRESETS], initial="veriscore_ternary")
    model = forms.CharField(max_length=200, help_text="The model name the endpoint expects, e.g. gpt-4o-mini.")
    endpoint = forms.ChoiceField(
        required=False, help_text="An endpoint of this server; empty to use your own URL and key (where allowed)."
    )
    base_url = forms.CharField(
        max_length=500,
        required=False,
        label="Own endpoint URL",
        help_text="Only without an endpoint, where the server allows it: a public OpenAI-compatible base URL.",
    )
    api_key = forms.CharField(
        max_length=500,
        required=False,
        label="Own endpoint API key",
        widget=forms.PasswordInput(render_value=False),
        help_text="Stored encrypted and never shown again.",
    )
    temperature = forms.FloatField(initial=0.0, min_value=0.0, max_value=2.0)
    max_tokens = forms.IntegerField(initial=512, min_value=1)
    concurrency = forms.IntegerField(initial=8, min_value=1, help_text="Requests in flight at once.")
    timeout = forms.FloatField(initial=60.0, min_value=0.001, help_text="Seconds per attempt.")
    retries = forms.IntegerField(initial=2, min_value=0, help_text="On 429, 5xx and timeouts.")
    template = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text="Custom preset only: a Django template over claim, context and evidence.",
    )
    system_prompt = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), help_text="Custom preset only."
    )
    custom_labels = forms.CharField(required=False, help_text="Custom preset only: its labels, comma-separated.")
    label_map = forms.CharField(required=False, help_text=LABEL_MAP_HELP)
    price_input_per_1k = forms.DecimalField(
        required=False, min_value=0, decimal_places=6, max_digits=12, label="Price per 1k input tokens"
    )
    price_output_per_1k = forms.DecimalField(
        required=False, min_value=0, decimal_places=6, max_digits=12, label="Price per 1k output tokens"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = endpoint_names()
        field = self.fields["endpoint"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "— my own URL and key —"), *((name, name) for name in names)]
        field.initial = names[0] if names else ""

    def clean_custom_labels(self) -> list[str]:
        return [part.strip() for part in self.cleaned_data["custom_labels"].split(",") if part.strip()]

    def clean_label_map(self) -> dict[str, str]:
        text = self.cleaned_data["label_map"].strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not valid JSON ({exc.msg}); {LABEL_MAP_HELP}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError(LABEL_MAP_HELP)
        refused = nul_error(None, value)  # the one rule for control characters (annotation/lib/formats.py)
        if refused is not None:
            raise forms.ValidationError(
                f"at {refused.field!r}: {refused.message}" if refused.field else refused.message
            )
        return value

    def service_fields(self) -> dict[str, Any]:
        """The cleaned values as create_verifier keywords."""
        return dict(self.cleaned_data)


class PairwiseJudgeForm(VerifierForm):
    """A pairwise judge of a preference study: the verifier form without what only claim presets take."""

    CLAIM_ONLY = ("template", "system_prompt", "custom_labels", "label_map")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in self.CLAIM_ONLY:
            del self.fields[name]
        preset = self.fields["preset"]
        assert isinstance(preset, forms.ChoiceField)
        preset.choices = [(PAIRWISE_JUDGE.id, PAIRWISE_JUDGE.id)]
        preset.initial = PAIRWISE_JUDGE.id
        preset.widget = forms.HiddenInput()
        preset.disabled = True  # whatever is posted, the judge is a pairwise_judge
        self.fields["name"].initial = "pairwise-judge"

    def service_fields(self) -> dict[str, Any]:
        return {**super().service_fields(), "preset": PAIRWISE_JUDGE.id}


class StartRunForm(forms.Form):
    limit = forms.IntegerField(required=False, min_value=1, help_text="Only the first N items.")


def prediction_sources() -> list[tuple[str, str]]:
    """Claimlab's format, then the pipelines whose verdict files the adapters read (docs/importing.md)."""
    return [
        ("", "Claimlab JSON Lines / CSV"),
        *((adapter.name, adapter.title) for adapter in ADAPTERS.values() if PREDICTIONS in adapter.targets),
    ]


class PredictionImportForm(forms.Form):
    source = forms.ChoiceField(choices=prediction_sources, required=False, label="From")
    file = forms.FileField(
        help_text="JSON Lines or CSV: item, verifier, label, optional score and rationale; or the chosen pipeline's file."
    )
    verifier = forms.CharField(
        required=False, max_length=100, help_text="From a pipeline: the verifier's name (default: the pipeline's)."
    )
    update = forms.BooleanField(required=False, label="Replace predictions that exist")
