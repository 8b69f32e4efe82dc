"""DRF serializers: shapes of the API, no business logic."""

from __future__ import annotations

from rest_framework import serializers

from .models import ImportJob, Item, Study


class StudySerializer(serializers.ModelSerializer):
    role = serializers.CharField(source="user_role", read_only=True, default=None)
    n_items = serializers.IntegerField(read_only=True, default=None)

    class Meta:
        model = Study
        fields = [
            "slug", "name", "kind", "status", "labels", "annotators_per_item", "evidence_judgements",
            "justification_required", "tie_allowed", "both_bad_allowed", "role", "n_items", "created_at",
        ]


class StudyDetailSerializer(StudySerializer):
    counts = serializers.DictField(child=serializers.IntegerField(), read_only=True)
    domains = serializers.ListField(child=serializers.DictField(), read_only=True)

    class Meta(StudySerializer.Meta):
        fields = StudySerializer.Meta.fields + [
            "instructions", "label_aliases", "binary_map", "systems", "seed", "counts", "domains",
        ]


class ItemSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="external_id", read_only=True)
    gold = serializers.CharField(source="gold_label", read_only=True)
    n_annotations = serializers.IntegerField(read_only=True, default=None)

    class Meta:
        model = Item
        fields = ["id", "domain", "payload", "response_id", "system", "gold", "slots_taken", "n_annotations"]


class ImportUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="JSON Lines (.jsonl) or CSV (.csv), UTF-8.")
    format = serializers.ChoiceField(choices=["jsonl", "csv"], required=False, help_text="Default: from the file name.")
    update = serializers.BooleanField(required=False, default=False, help_text="Replace entries whose id exists.")


class ImportErrorSerializer(serializers.Serializer):
    line = serializers.IntegerField(allow_null=True)
    field = serializers.CharField(allow_null=True)
    message = serializers.CharField()


class ImportJobSerializer(serializers.ModelSerializer):
    errors = ImportErrorSerializer(many=True, read_only=True)

    class Meta:
        model = ImportJob
        fields = ["id", "what", "file_name", "file_format", "update_existing", "status", "created", "updated", "error_count", "errors", "created_at", "finished_at"]
