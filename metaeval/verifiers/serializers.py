"""DRF shapes of the verifier API: no logic, the services validate (a researcher's key is write-only, never returned)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation.transfer.adapters import ADAPTERS
from annotation.transfer.adapters.base import PREDICTIONS

from ..models import Verifier, VerifierRun
from .presets import PRESETS
from .services.verifiers import EDITABLE

KINDS = ", ".join(Verifier.Kind.values)


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


class VerifierWriteSerializer(serializers.Serializer):
    """What a researcher may set; types only here, the rules in metaeval.verifiers.services.verifiers."""

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
    temperature = serializers.FloatField(required=False)
    max_tokens = serializers.IntegerField(required=False)
    concurrency = serializers.IntegerField(required=False)
    timeout = serializers.FloatField(required=False)
    retries = serializers.IntegerField(required=False)
    template = serializers.CharField(required=False, allow_blank=True)
    system_prompt = serializers.CharField(required=False, allow_blank=True)
    custom_labels = serializers.ListField(child=serializers.CharField(), required=False)
    label_map = serializers.DictField(child=serializers.CharField(), required=False)
    options = serializers.DictField(required=False)
    price_input_per_1k = serializers.DecimalField(max_digits=12, decimal_places=6, required=False, allow_null=True)
    price_output_per_1k = serializers.DecimalField(max_digits=12, decimal_places=6, required=False, allow_null=True)


class VerifierUpdateSerializer(VerifierWriteSerializer):
    name = serializers.CharField(max_length=100, required=False)
    kind = None  # a verifier's kind never changes


class StartRunSerializer(serializers.Serializer):
    limit = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    concurrency = serializers.IntegerField(required=False, allow_null=True, min_value=1)


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


class PredictionImportSerializer(serializers.Serializer):
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


class ProblemSerializer(serializers.Serializer):
    """A refused request: what is wrong, and per field when the service says so."""

    detail = serializers.CharField()
    errors = serializers.DictField(child=serializers.CharField(), required=False)
