"""DRF serializers: shapes of the API, no business logic."""

# Shapes of the study-making API (create, update, status, duplicate); the study service validates.

from __future__ import annotations

from rest_framework import serializers

from annotation.lib.strict import StrictSerializer
from annotation.models import Item, Study
from annotation.studies.services import MAX_INSTRUCTIONS


class StudySerializer(serializers.ModelSerializer):
    role = serializers.CharField(source="user_role", read_only=True, default=None)
    n_items = serializers.IntegerField(
        read_only=True, default=None, allow_null=True, help_text="In the study list; null where not counted."
    )

    class Meta:
        model = Study
        fields = [
            "slug",
            "name",
            "kind",
            "status",
            "labels",
            "annotators_per_item",
            "evidence_judgements",
            "justification_required",
            "submit_on_label",
            "tie_allowed",
            "both_bad_allowed",
            "questions",
            "role",
            "n_items",
            "created_at",
        ]


class StudyDetailSerializer(StudySerializer):
    counts = serializers.DictField(child=serializers.IntegerField(), read_only=True)
    domains = serializers.ListField(child=serializers.DictField(), read_only=True)

    class Meta(StudySerializer.Meta):
        fields = [
            *StudySerializer.Meta.fields,
            "instructions",
            "label_aliases",
            "binary_map",
            "systems",
            "seed",
            "conditions",
            "exact_n_per",
            "adaptive_min_n",
            "adaptive_agreement",
            "training",
            "questionnaires",
            "counts",
            "domains",
        ]


class ItemSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="external_id", read_only=True)
    gold = serializers.CharField(source="gold_label", read_only=True)
    n_annotations = serializers.IntegerField(
        read_only=True, default=None, allow_null=True, help_text="In the item list; null where not counted."
    )

    class Meta:
        model = Item
        fields = ["id", "domain", "payload", "response_id", "system", "gold", "slots_taken", "n_annotations"]


class StudySettingsSerializer(StrictSerializer):
    """A study's editable settings; every field optional on update (PATCH)."""

    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=Study.Kind.choices)
    instructions = serializers.CharField(allow_blank=True, max_length=MAX_INSTRUCTIONS, required=False, default="")
    labels = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        help_text="In order; omitted: the kind's vocabulary.",
    )
    label_aliases = serializers.DictField(child=serializers.CharField(max_length=100), required=False)
    binary_map = serializers.DictField(child=serializers.ChoiceField(choices=["positive", "negative"]), required=False)
    systems = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, max_length=2, help_text="Preference: A then B."
    )
    annotators_per_item = serializers.IntegerField(min_value=1, max_value=100, required=False, default=3)
    seed = serializers.IntegerField(min_value=0, max_value=2**63 - 1, required=False, allow_null=True)
    evidence_judgements = serializers.BooleanField(required=False, default=False)
    justification_required = serializers.BooleanField(required=False, default=False)
    submit_on_label = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Workbench: the label key also submits when nothing else is asked for (one keystroke per label).",
    )
    tie_allowed = serializers.BooleanField(required=False, default=True)
    both_bad_allowed = serializers.BooleanField(required=False, default=False)
    irrelevant_in_credibility = serializers.BooleanField(required=False, default=False)
    gold_in_agreement = serializers.BooleanField(required=False, default=True)
    checks_in_agreement = serializers.BooleanField(
        required=False,
        default=False,
        help_text=(
            "Count the items used as attention or qualification checks in agreement and the other analyses "
            "(their labels from before they became checks); off: checks only score people."
        ),
    )

    questions = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        max_length=20,
        help_text=(
            "Extra questions asked with each answer: {key, type (likert, single, multi, check, number, text), "
            "prompt, target (item, list, claim), required, and scale/anchors, options, min/max/integer or "
            "max_length by type}. Frozen after the first annotation."
        ),
    )

    conditions = serializers.ListField(
        child=serializers.JSONField(),
        required=False,
        max_length=6,
        help_text=(
            "Between-subject conditions: none, or 2-6 of 'key' or 'key:<verifier name>' (or {key, verifier}); "
            "a condition with a verifier shows its prediction beside the item as a machine suggestion "
            "(a preference judge's in the screen's terms). Each annotator gets one, balanced, for good. Frozen after the first annotation."
        ),
    )

    exact_n_per = serializers.ChoiceField(
        choices=Study.ExactNPer.choices,
        required=False,
        default=Study.ExactNPer.ITEM,
        help_text=(
            "With conditions: 'item' (N annotators per item, from any condition) or 'condition' (N per item in "
            "each condition: N x conditions labels per item). Frozen after the first annotation."
        ),
    )

    adaptive_min_n = serializers.IntegerField(
        min_value=1,
        max_value=99,
        required=False,
        allow_null=True,
        default=None,
        help_text=(
            "Adaptive overlap: the annotators every item gets (n_min, below annotators_per_item); another, up to "
            "annotators_per_item, only while their answers do not reach adaptive_agreement in agreement. Null: "
            "annotators_per_item for every item. Set with adaptive_agreement, or neither. Frozen after the first annotation."
        ),
    )
    adaptive_agreement = serializers.IntegerField(
        min_value=2,
        max_value=100,
        required=False,
        allow_null=True,
        default=None,
        help_text="Adaptive overlap: k, the matching answers that close an item (2 to annotators_per_item).",
    )

    training = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=5000)),
        required=False,
        max_length=20,
        help_text=(
            "Training items, met first by every annotator with feedback after each answer: "
            "[{item: <gold item id>, explanation: <text>}]. Set once the items are imported; training items are "
            "never handed out as items and their answers never count in agreement."
        ),
    )

    questionnaires = serializers.DictField(
        required=False,
        help_text=(
            "A pre-study and a post-study questionnaire and a comprehension quiz: {pre: [questions], post: "
            "[questions], quiz: {attempts: 1-10, questions: [questions with `correct` and `feedback`]}}; the "
            "questions are the extra questions' types, asked of the person."
        ),
    )


class StudyCreateSerializer(StudySettingsSerializer):
    slug = serializers.SlugField(max_length=64)


class StudyStatusSerializer(StrictSerializer):
    status = serializers.ChoiceField(
        choices=Study.Status.choices,
        help_text="draft -> open <-> paused -> closed -> archived (closed may reopen; archived may go back to closed).",
    )


class StudyDuplicateSerializer(StrictSerializer):
    slug = serializers.SlugField(max_length=64)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    copy_items = serializers.BooleanField(required=False, default=False)


class StudyChangeSerializer(serializers.Serializer):
    field = serializers.CharField()
    old_value = serializers.JSONField(allow_null=True)
    new_value = serializers.JSONField(allow_null=True)
    changed_at = serializers.DateTimeField()
    changed_by = serializers.CharField(source="changed_by.username", allow_null=True, default=None)
