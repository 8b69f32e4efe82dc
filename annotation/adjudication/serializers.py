"""DRF serializers: shapes of the API, no business logic."""

from __future__ import annotations

from rest_framework import serializers

from annotation.adjudication.services import MAX_NOTE_LENGTH as MAX_ADJUDICATION_NOTE
from annotation.lib.strict import StrictSerializer
from annotation.models import AdjudicationRule, ReferenceRule


class AdjudicationSubmitSerializer(StrictSerializer):
    label = serializers.CharField(required=False, allow_blank=True, default="")
    preferred = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Preference: a system name, 'List 1'/'List 2' or 'tie'."
    )
    strength = serializers.CharField(required=False, allow_blank=True, default="")
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=MAX_ADJUDICATION_NOTE)
    guidelines_unclear = serializers.BooleanField(required=False, default=False)


class AdjudicationImportSerializer(StrictSerializer):
    file = serializers.FileField()
    format = serializers.ChoiceField(choices=["jsonl", "csv"], required=False)


class AdjudicationSettingsSerializer(StrictSerializer):
    adjudication_rule = serializers.ChoiceField(choices=AdjudicationRule.choices, required=False)
    adjudication_audit_share = serializers.FloatField(required=False, min_value=0.0, max_value=1.0)
    adjudication_shows_systems = serializers.BooleanField(required=False)
    adjudication_shows_verifiers = serializers.BooleanField(required=False)
    reference_rule = serializers.ChoiceField(choices=ReferenceRule.choices, required=False)
