"""DRF shapes of the verifier API: no logic, the services validate (a researcher's key is write-only, never returned)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation.lib.strict import StrictSerializer
from annotation.transfer.adapters import ADAPTERS
from annotation.transfer.adapters.base import PREDICTIONS

from ..models import Verifier, VerifierRun
from .presets import PRESETS
from .services.verifiers import EDITABLE

KINDS = ", ".join(Verifier.Kind.values)
#: The most items one run may be limited to (a PositiveIntegerField).
MAX_RUN_LIMIT = 2_147_483_647


@extend_schema_field(OpenApiTypes.STR)
class KindField(serializers.ChoiceField):
    """A verifier kind; documented as a string so its enum does not collide with Study.kind's in the schema."""

    def __init__(self, **kwargs) -> None:
        super().__init__(choices=Verifier.Kind.choices, **kwargs)


class VerifierSerializer(serializers.ModelSerializer):
    kind = KindField(read_only=True, help_text=KINDS)
    n_predictions = serializers.IntegerField(read_only=True, default=None, allow_null=True)  # null: not counted
    is_baseline = serializers.BooleanField(read_only=True)
    has_api_key = serializers.BooleanField(read_only=True, help_text="Whether an own-endpoint key is stored.")

    class Meta:
        model = Verifier
        # Every field a researcher may edit, and what the server keeps about it; never the key itself.
        fields = [
            "id",
            "kind",
            "is_baseline",
            *(field for field in EDITABLE if field != "api_key"),
            "has_api_key",
            "n_predictions",
            "created_at",
        ]
        read_only_fields = fields


#: The highest price per 1,000 tokens a verifier's DecimalField(12, 6) holds (the service says "to 999,999").
MAX_PRICE = Decimal("999999.999999")


def _range_messages(low: object, high: object) -> dict[str, Any]:
    """DRF's min/max messages replaced by one that gives the whole allowed range (the field is named by the error)."""
    message = f"must be between {low} and {high}"
    return {"min_value": f"{message}, got a smaller number", "max_value": f"{message}, got a larger number"}


def whole(low: int, high: int, **kwargs: Any) -> serializers.IntegerField:
    """A whole number from ``low`` to ``high``, both included."""
    return serializers.IntegerField(min_value=low, max_value=high, error_messages=_range_messages(low, high), **kwargs)


def number(low: float, high: float, **kwargs: Any) -> serializers.FloatField:
    """A finite number from ``low`` to ``high``, both included."""
    return serializers.FloatField(
        min_value=low, max_value=high, error_messages=_range_messages(f"{low:g}", f"{high:g}"), **kwargs
    )


def price(**kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(
        max_digits=12,
        decimal_places=6,
        min_value=Decimal(0),
        max_value=MAX_PRICE,
        allow_null=True,
        error_messages={
            **_range_messages(0, MAX_PRICE),
            "max_digits": f"must be between 0 and {MAX_PRICE}, got a larger number",
            "max_whole_digits": f"must be between 0 and {MAX_PRICE}, got a larger number",
            "max_decimal_places": "must have at most 6 decimal places",
        },
        help_text="Price per 1,000 tokens, from 0 to 999999.999999 (null: unknown).",
        **kwargs,
    )


def bounded_numbers() -> dict[str, serializers.Field]:
    """The numeric settings with their ranges: the operator's limits as they are now (settings.VERIFIER_MAX_*).

    Built per request (and per schema), so the schema's minimum/maximum is the range this server checks.
    An operator endpoint may cap concurrency lower still; the service says so.
    """
    return {
        "temperature": number(0.0, 2.0, required=False),
        "max_tokens": whole(1, int(settings.VERIFIER_MAX_TOKENS), required=False),
        "concurrency": whole(1, int(settings.VERIFIER_MAX_CONCURRENCY), required=False),
        "timeout": number(0.001, float(settings.VERIFIER_MAX_TIMEOUT), required=False, help_text="Seconds."),
        "retries": whole(0, int(settings.VERIFIER_MAX_RETRIES), required=False),
        "price_input_per_1k": price(required=False),
        "price_output_per_1k": price(required=False),
    }


class VerifierWriteSerializer(StrictSerializer):
    """What a researcher may set: types and ranges here, the rules in metaeval.verifiers.services.verifiers.

    A field it does not know is refused by name (StrictSerializer), never dropped.
    """

    name = serializers.CharField(max_length=100)
    kind = KindField(
        default=Verifier.Kind.LLM,
        help_text="llm, baseline_majority or baseline_overlap; imported verifiers come from importing predictions",
    )
    preset = serializers.ChoiceField(choices=list(PRESETS), required=False, allow_blank=True)
    model = serializers.CharField(max_length=200, required=False, allow_blank=True)
    endpoint = serializers.CharField(
        max_length=64, required=False, allow_blank=True, help_text="An operator-defined endpoint, by name."
    )
    base_url = serializers.CharField(
        max_length=500, required=False, allow_blank=True, help_text="Own endpoint URL (only where the server allows)."
    )
    api_key = serializers.CharField(
        max_length=500,
        required=False,
        allow_blank=True,
        write_only=True,
        help_text="Own endpoint key: stored encrypted, never returned.",
    )
    template = serializers.CharField(required=False, allow_blank=True)
    system_prompt = serializers.CharField(required=False, allow_blank=True)
    custom_labels = serializers.ListField(child=serializers.CharField(), required=False)
    label_map = serializers.DictField(child=serializers.CharField(), required=False)
    options = serializers.DictField(required=False)

    def get_fields(self) -> dict[str, serializers.Field]:
        return {**super().get_fields(), **bounded_numbers()}


class VerifierUpdateSerializer(VerifierWriteSerializer):
    name = serializers.CharField(max_length=100, required=False)
    kind = None  # a verifier's kind never changes


class StartRunSerializer(StrictSerializer):
    limit = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_RUN_LIMIT,
        error_messages=_range_messages(1, MAX_RUN_LIMIT),
        help_text="Judge at most this many items (null: all).",
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["concurrency"] = whole(
            1,
            int(settings.VERIFIER_MAX_CONCURRENCY),
            required=False,
            allow_null=True,
            help_text="Requests in flight for this run (null: the verifier's).",
        )
        return fields


class RunSerializer(serializers.ModelSerializer):
    verifier = serializers.CharField(source="verifier.name", read_only=True)
    active = serializers.BooleanField(source="is_active", read_only=True)
    concurrency = serializers.IntegerField(source="effective_concurrency", read_only=True)

    class Meta:
        model = VerifierRun
        fields = [
            "id",
            "verifier",
            "verifier_id",
            "status",
            "active",
            "total",
            "done",
            "errors",
            "unparseable",
            "cached",
            "tokens_in",
            "tokens_out",
            "estimated_cost",
            "limit",
            "concurrency",
            "error_message",
            "heartbeat_at",
            "started_at",
            "finished_at",
            "created_at",
        ]
        read_only_fields = fields


class PredictionImportSerializer(StrictSerializer):
    file = serializers.FileField(
        help_text="JSON Lines (.jsonl) or CSV (.csv): item, verifier, label, score?, rationale?"
    )
    format = serializers.ChoiceField(choices=["jsonl", "csv"], required=False)
    update = serializers.BooleanField(required=False, default=False)
    verifier = serializers.CharField(
        required=False,
        default="",
        max_length=100,
        help_text="With `from`: the verifier's name (default: the pipeline's).",
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = serializers.ChoiceField(
            choices=[adapter.name for adapter in ADAPTERS.values() if PREDICTIONS in adapter.targets],
            required=False,
            help_text="The file is this pipeline's own verdict file (docs/importing.md); labels outside the "
            "study's are kept as unparseable predictions.",
        )
        return fields


class ImportOutcomeSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    records = serializers.IntegerField()
    notes = serializers.ListField(child=serializers.CharField(), help_text="What an import `from` a pipeline skipped.")


class ImportProblemSerializer(serializers.Serializer):
    """An import that changed nothing: the one error shape, with its problems by line and field."""

    detail = serializers.CharField()
    code = serializers.CharField(help_text="invalid")
    error_count = serializers.IntegerField(help_text="Problems found (the first ones are listed).")
    errors = serializers.ListField(child=serializers.DictField(), help_text="Each problem: line, field, message.")
