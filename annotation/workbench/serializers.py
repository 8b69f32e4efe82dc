"""DRF serializers: shapes of the API, no business logic."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from annotation.lib.strict import StrictSerializer
from annotation.models import MAX_ACTIVE_MS, Annotation, Assignment
from annotation.vocab import EVIDENCE_JUDGEMENTS, PREFERENCE_CHOICES
from annotation.workbench.services import MAX_TEXT, SubmittedAnswer

#: The largest database id (a bigint): a larger `holding` is refused here, not by the database.
MAX_ID = 2**63 - 1
#: The largest evidence passage index the API takes (an item has far fewer; the service checks which exist).
MAX_INDEX = 2**31 - 1
#: The longest label (Annotation.label's column); a longer one cannot be one of the study's.
MAX_LABEL: int = Annotation._meta.get_field("label").max_length or 100

# --- annotating through the API ---------------------------------------------------
# Shapes only: whether an answer fits the study (its labels, tie allowed,
# justification required, evidence passages that exist) is the assignment
# service's decision, reported as a 400 with its message.


class ProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField(help_text="Items you have answered.")
    total = serializers.IntegerField(
        help_text="Answered + open + still available to you (a lower bound when not `total_exact`)."
    )
    total_exact = serializers.BooleanField(
        help_text='False in very big studies, where open items are counted only up to 1,000 (show it as "1,000+").'
    )


class AssignmentRefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Assignment
        fields = ["id", "status", "lease_expires_at", "flagged"]
        read_only_fields = fields


class EvidencePassageSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="Refer to the passage by this index when judging it.")
    text = serializers.CharField()
    title = serializers.CharField(allow_blank=True)
    url = serializers.CharField(allow_blank=True)
    source_type = serializers.CharField(allow_blank=True)


class VerificationDisplaySerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="Always `verification`.")
    claim = serializers.CharField()
    context = serializers.CharField(allow_blank=True)
    evidence = EvidencePassageSerializer(many=True)


class PreferenceDisplaySerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="Always `preference`.")
    source = serializers.CharField(allow_blank=True)
    question = serializers.CharField(allow_blank=True)
    list_1 = serializers.ListField(
        child=serializers.CharField(), help_text="Shown on the left; answer `left_*` to prefer it."
    )
    list_2 = serializers.ListField(
        child=serializers.CharField(), help_text="Shown on the right; answer `right_*` to prefer it."
    )


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="DisplayItem",
        serializers={"preference": PreferenceDisplaySerializer, "verification": VerificationDisplaySerializer},
        resource_type_field_name="kind",
    )
)
class DisplayItemField(serializers.DictField):
    """The item as the annotator may see it (annotation.workbench.selectors.display_payload): blinded."""


class NextAssignmentSerializer(serializers.Serializer):
    assignment = AssignmentRefSerializer()
    item = DisplayItemField(help_text="No system names, no gold label, no other annotator's answer.")
    progress = ProgressSerializer()


class AnswerResultSerializer(serializers.Serializer):
    assignment = AssignmentRefSerializer()
    progress = ProgressSerializer()


class NextInResultSerializer(serializers.Serializer):
    assignment = AssignmentRefSerializer()
    item = DisplayItemField(help_text="No system names, no gold label, no other annotator's answer.")


class SubmitResultSerializer(AnswerResultSerializer):
    next = NextInResultSerializer(
        required=False,
        allow_null=True,
        help_text="Only when the submit asked for `next`: your next assignment (as from `assignments/next`), "
        "or null when nothing is left for you.",
    )
    holding_lost = serializers.BooleanField(
        required=False,
        help_text="Only with `holding`: true when the assignment you hold is no longer yours "
        "(its lease ran out and someone took it over); `next` is then your current one.",
    )


class EvidenceJudgementSerializer(StrictSerializer):
    index = serializers.IntegerField(min_value=0, max_value=MAX_INDEX, help_text="The passage's `index` in the item.")
    judgement = serializers.ChoiceField(choices=EVIDENCE_JUDGEMENTS)
    useful = serializers.BooleanField(default=False)


class SubmitAnswerSerializer(StrictSerializer):
    """An answer: `label` (+ `evidence`, `rationale`) for verification, `choice` (+ `justification`) for preference."""

    label = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_LABEL, help_text="Verification: one of the study's labels."
    )
    evidence = EvidenceJudgementSerializer(
        many=True,
        required=False,
        help_text="Verification, when the study asks for evidence judgements: exactly one per passage (required then, refused otherwise).",
    )
    rationale = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_TEXT, help_text="Verification: why (the study may require it)."
    )
    choice = serializers.ChoiceField(
        choices=PREFERENCE_CHOICES,
        required=False,
        help_text="Preference, in screen terms (list_1 is left): the server stores the preferred system.",
    )
    justification = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_TEXT, help_text="Preference: why (the study may require it)."
    )
    questions = serializers.DictField(
        required=False,
        help_text=(
            "The study's extra questions (its `questions`): question key -> answer. Item questions take the "
            'answer itself; list questions {"list_1": ..., "list_2": ...}; claim questions one answer per claim '
            'of each list, {"list_1": [...], "list_2": [...]}, in screen terms like `choice` (stored per system). '
            "Likert: a whole number of its scale; single: an option; multi: a list of options; check: true/false; "
            "number; text."
        ),
    )
    active_ms = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_ACTIVE_MS,
        help_text="Time actively spent on the item, in milliseconds.",
    )
    next = serializers.BooleanField(
        default=False,
        help_text="Also claim your next assignment and return it as `next`: one round trip per label.",
    )
    holding = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_ID,
        help_text="With `next`: the id of an assignment you already hold (fetched ahead and shown "
        "next); `next` is then the one after it, and its lease is renewed.",
    )

    def validate(self, data: dict) -> dict:
        if "holding" in data and not data.get("next"):
            raise serializers.ValidationError("`holding` goes with `next`: true")
        rationale, justification = data.get("rationale", ""), data.get("justification", "")
        if rationale and justification and rationale != justification:
            raise serializers.ValidationError("send the reason once, as `rationale` or as `justification`")
        return data

    @classmethod
    def validated(cls, data: Any) -> dict[str, Any]:
        """The validated answer: a plain JSON one (`_plain_answer`) is checked without building the
        serializer, which costs more than the rest of the request's Python on the annotating hot path;
        anything else, and every answer that would be refused, goes through the serializer."""
        plain = _plain_answer(data)
        if plain is not None:
            return plain
        serializer = cls(data=data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    @staticmethod
    def answer(data: dict[str, Any]) -> SubmittedAnswer:
        """The validated data (`validated`) as the assignment service takes it."""
        return SubmittedAnswer(
            label=data.get("label", ""),
            choice=data.get("choice", ""),
            justification=data.get("justification") or data.get("rationale", ""),
            evidence=[dict(entry) for entry in data.get("evidence", [])] or None,
            questions=data.get("questions"),
            active_ms=data.get("active_ms"),
        )


#: The text fields of SubmitAnswerSerializer (CharField: whitespace trimmed, blank allowed) and their longest.
_PLAIN_TEXT = {"label": MAX_LABEL, "rationale": MAX_TEXT, "justification": MAX_TEXT}


def _plain_answer(data: Any) -> dict[str, Any] | None:
    """SubmitAnswerSerializer's validated data for an answer whose every value is already of its
    field's type and valid, else None (then the serializer decides, with its own messages).

    Narrower than the serializer on purpose: only a dict of known keys; text only when ASCII
    without NUL (what CharField's validators refuse is outside ASCII, or NUL); numbers and
    booleans only as JSON ints and booleans (the serializer also coerces strings); no `evidence`.
    tests/annotation/workbench/test_api_results.py checks it against the serializer.
    """
    if type(data) is not dict or not data.keys() <= _PLAIN_KEYS:
        return None
    checked: dict[str, Any] = {"next": False}
    for name, value in data.items():
        if name in _PLAIN_TEXT:
            if type(value) is not str or not value.isascii() or "\x00" in value:
                return None
            checked[name] = value.strip()
            if len(checked[name]) > _PLAIN_TEXT[name]:
                return None
        elif name == "choice":
            if type(value) is not str or value not in PREFERENCE_CHOICES:
                return None
            checked[name] = value
        elif name == "active_ms":
            if value is not None and (type(value) is not int or not 0 <= value <= MAX_ACTIVE_MS):
                return None
            checked[name] = value
        elif name == "next":
            if type(value) is not bool:
                return None
            checked[name] = value
        elif type(value) is not int or not 1 <= value <= MAX_ID:  # holding
            return None
        else:
            checked[name] = value
    if "holding" in checked and not checked["next"]:
        return None  # refused by validate()
    rationale, justification = checked.get("rationale", ""), checked.get("justification", "")
    if rationale and justification and rationale != justification:
        return None  # refused by validate()
    return checked


_PLAIN_KEYS = {*_PLAIN_TEXT, "choice", "active_ms", "next", "holding"}


class FlagSerializer(StrictSerializer):
    reason = serializers.CharField(
        max_length=MAX_TEXT, help_text="Why the item is a problem (broken, offensive, impossible to judge)."
    )


class TrainingItemSerializer(serializers.Serializer):
    item = serializers.CharField(help_text="The training item's id: send it back with the answer.")
    display = DisplayItemField(help_text="The item as annotators see it (no gold label).")
    position = serializers.IntegerField(help_text="This item's place among the study's training items (1-based).")
    total = serializers.IntegerField()


class TrainingAnswerSerializer(SubmitAnswerSerializer):
    """A training answer: the training item's id and the answer, as for any item of the study."""

    item = serializers.CharField(max_length=200)
    next = None  # no claim follows a training answer
    holding = None


class TrainingFeedbackSerializer(serializers.Serializer):
    correct = serializers.BooleanField()
    given = serializers.CharField(help_text="Your answer, in screen terms (List 1 / List 2 for preferences).")
    expected = serializers.CharField(help_text="The gold answer, in the same terms.")
    explanation = serializers.CharField(allow_blank=True)
    remaining = serializers.IntegerField(help_text="Training items left after this one.")


class QuestionnaireSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="pre, quiz or post.")
    questions = serializers.ListField(child=serializers.DictField(), help_text="Without the quiz's answers.")
    due = serializers.BooleanField(help_text="Whether it is the step you are at.")
    attempts_made = serializers.IntegerField()
    passed = serializers.BooleanField(help_text="The quiz is passed.")


class QuestionnaireAnswerSerializer(StrictSerializer):
    answers = serializers.DictField(help_text="Question key -> answer, as the extra questions take them.")


class QuestionnaireOutcomeSerializer(serializers.Serializer):
    passed = serializers.BooleanField(allow_null=True, help_text="A quiz attempt: every answer right; else null.")
    attempt = serializers.IntegerField()
    attempts_left = serializers.IntegerField()
    wrong = serializers.ListField(
        child=serializers.DictField(), help_text="Quiz questions answered wrong, with feedback."
    )
