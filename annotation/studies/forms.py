"""Forms of the study pages (new study, settings, duplicate): they parse text, the study service decides."""

from __future__ import annotations

from typing import Any

from django import forms

from annotation.conditions.definitions import conditions_text
from annotation.errors import ServiceError
from annotation.models import Study
from annotation.questions.definitions import questions_text, read_questions_text
from annotation.studies.services import EDITABLE_FIELDS, MAX_INSTRUCTIONS, TRANSITIONS
from annotation.vocab import default_binary_map, default_labels


def _pairs(text: str, what: str, example: str) -> dict[str, str]:
    """'key = value' lines (or comma-separated) into a dict; an error names the bad line."""
    pairs: dict[str, str] = {}
    for part in text.replace(",", "\n").splitlines():
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise forms.ValidationError(f"{what}: write one name=value pair per line (e.g. {example}); got {part!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.replace(",", "\n").splitlines() if name.strip()]


def pairs_text(pairs: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in pairs.items())


class StudySettingsForm(forms.Form):
    """A study's settings as the researcher types them; `settings()` gives the service's values."""

    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(
        choices=Study.Kind.choices,
        widget=forms.RadioSelect,
        help_text="Preference: which of two claim lists is better. Verification: is each claim supported?",
    )
    annotators_per_item = forms.IntegerField(min_value=1, max_value=100, initial=3, label="Annotators per item")
    labels = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line, in order. Empty: the kind's vocabulary "
        f"(verification: {', '.join(default_labels('verification'))}; "
        f"preference: {', '.join(default_labels('preference'))}).",
    )
    label_aliases = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Label aliases",
        help_text="raw=label, one per line: what imported files may write for a label (e.g. yes=supported).",
    )
    binary_map = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Binary collapse",
        help_text="label=positive or label=negative, one per line (empty: the default for the kind's labels).",
    )
    systems = forms.CharField(
        required=False,
        label="Systems (preference)",
        help_text="The two systems whose claim lists are compared, A then B (e.g. veriscore, safe); "
        "empty: taken from the first imported item.",
    )
    seed = forms.IntegerField(
        required=False, min_value=0, max_value=2**63 - 1, help_text="Empty: a random seed (shown afterwards)."
    )
    tie_allowed = forms.BooleanField(required=False, initial=True, label="Offer a tie (preference)")
    both_bad_allowed = forms.BooleanField(required=False, label="Offer 'both bad' (preference)")
    justification_required = forms.BooleanField(required=False, label="Require a justification with every answer")
    submit_on_label = forms.BooleanField(
        required=False,
        label="Submit on the label key",
        help_text="When nothing else is asked for (no required justification, every passage judged), "
        "pressing a label's key also submits: one keystroke per label.",
    )
    evidence_judgements = forms.BooleanField(
        required=False, label="Ask for a judgement of each evidence passage (verification)"
    )
    irrelevant_in_credibility = forms.BooleanField(
        required=False, label="Count 'irrelevant' passages in the credibility denominator (report)"
    )
    gold_in_agreement = forms.BooleanField(
        required=False,
        initial=True,
        label="Count items with a gold label in agreement (off: gold items only score annotators)",
    )
    checks_in_agreement = forms.BooleanField(
        required=False,
        initial=False,
        label="Count check items in agreement (off: attention and qualification items only score people)",
        help_text="Check items (the participant link's) are never handed out as items; this counts the labels "
        "they got before they became checks.",
    )
    questions = forms.CharField(
        required=False,
        label="Extra questions",
        widget=forms.Textarea(attrs={"rows": 8, "class": "mono", "data-questions-source": ""}),
        help_text="Asked with every answer, as a JSON or YAML list; empty: none. Each question: key, type "
        "(likert, single, multi, check, number, text), prompt, target (item; preference: list or claim), "
        "required, and by type scale + anchors, options, min/max/integer or max_length. Example (YAML): "
        '- {key: confidence, type: likert, prompt: "How sure are you?", scale: [1, 5]}',
    )
    conditions = forms.CharField(
        required=False,
        label="Between-subject conditions",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Empty: none. Else 2 to 6, one per line: a key (e.g. no_suggestion), or key:verifier name to "
        "show that verifier's prediction beside each item as a machine suggestion (e.g. "
        "verifier_suggestion:gpt4-judge). Each annotator or participant gets one at their first item, balanced "
        "(counts differ by at most one), for good.",
    )
    exact_n_per = forms.ChoiceField(
        choices=Study.ExactNPer.choices,
        initial=Study.ExactNPer.ITEM,
        required=False,  # a form posted without it (a script, an older page) keeps the default
        label="Exact N with conditions",
        help_text="Per item: an item's N annotators may come from any condition (each item is labelled N times "
        "in all). Per item in each condition: every item is labelled by N annotators of every condition "
        "(N x conditions labels per item), so conditions can be compared item by item.",
    )
    adaptive_min_n = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=99,
        label="Adaptive overlap: annotators every item gets",
        help_text="Empty: every item gets the annotators per item above (N). Else n_min, below N: every item gets "
        "n_min annotators, and another, up to N, only while their answers do not reach the agreement below. "
        "Example: 2 here, 2 below and N = 3 asks a third annotator only where the first two disagree.",
    )
    adaptive_agreement = forms.IntegerField(
        required=False,
        min_value=2,
        max_value=100,
        label="Adaptive overlap: matching answers that close an item",
        help_text="k, from 2 to N: an item closes once k of its answers agree (a preference study compares the "
        "direction: which list won, or a tie). Fill both fields or neither.",
    )
    questionnaires = forms.CharField(
        required=False,
        label="Questionnaires and quiz",
        widget=forms.Textarea(attrs={"rows": 6, "class": "mono"}),
        help_text="JSON or YAML: pre: [questions] before the first item, post: [questions] after the last, "
        "quiz: {attempts: 3, questions: [questions each with correct: and feedback:]} to pass before any item. "
        "The questions are the extra questions' types. Empty: none.",
    )
    training = forms.CharField(
        required=False,
        label="Training items",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Gold items every annotator meets first, one per line as item id | explanation; after each "
        "answer the page shows the gold answer and the explanation. They are never handed out as items and "
        "their answers never count (the report gives each annotator's training accuracy).",
    )
    instructions = forms.CharField(
        required=False,
        max_length=MAX_INSTRUCTIONS,
        widget=forms.Textarea(attrs={"rows": 14, "class": "mono", "data-markdown-source": ""}),
        help_text="Markdown: headings, **bold**, lists (indent a sub-list under its item), tables, links.",
    )

    def __init__(self, *args: Any, frozen: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, reason in (frozen or {}).items():
            field = self.fields[name]
            field.help_text = f"Locked: {reason}."
            field.widget.attrs["aria-describedby"] = f"id_{name}_helptext"
            field.widget.attrs["data-locked"] = ""

    def clean_labels(self) -> list[str]:
        return _names(self.cleaned_data["labels"])

    def clean_label_aliases(self) -> dict[str, str]:
        return _pairs(self.cleaned_data["label_aliases"], "Label aliases", "yes=supported")

    def clean_binary_map(self) -> dict[str, str]:
        return _pairs(self.cleaned_data["binary_map"], "Binary collapse", "contradicted=negative")

    def clean_questions(self) -> Any:
        text = self.cleaned_data["questions"].strip()
        try:
            return read_questions_text(text) if text else []
        except ServiceError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_questionnaires(self) -> Any:
        text = self.cleaned_data["questionnaires"].strip()
        try:
            return read_questions_text(text) if text else {}
        except ServiceError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_exact_n_per(self) -> str:
        return self.cleaned_data["exact_n_per"] or Study.ExactNPer.ITEM

    def clean_systems(self) -> list[str]:
        systems = _names(self.cleaned_data["systems"])
        if systems and len(systems) != 2:
            raise forms.ValidationError("Give exactly two systems, separated by a comma, or none.")
        return systems

    def settings(self) -> dict[str, Any]:
        """The cleaned values under the service's names."""
        return {name: self.cleaned_data[name] for name in EDITABLE_FIELDS if name in self.cleaned_data}

    @classmethod
    def initial_for(cls, study: Study) -> dict[str, Any]:
        """A study's current settings as the form shows them."""
        binary = study.binary_map if study.binary_map != default_binary_map(study.kind, study.labels) else {}
        return {
            "name": study.name,
            "kind": study.kind,
            "annotators_per_item": study.annotators_per_item,
            "labels": "\n".join(study.labels),
            "label_aliases": pairs_text(study.label_aliases),
            "binary_map": pairs_text(binary),
            "systems": ", ".join(study.systems),
            "seed": study.seed,
            "tie_allowed": study.tie_allowed,
            "both_bad_allowed": study.both_bad_allowed,
            "justification_required": study.justification_required,
            "submit_on_label": study.submit_on_label,
            "evidence_judgements": study.evidence_judgements,
            "irrelevant_in_credibility": study.irrelevant_in_credibility,
            "gold_in_agreement": study.gold_in_agreement,
            "checks_in_agreement": study.checks_in_agreement,
            "instructions": study.instructions,
            "questions": questions_text(study.questions),
            "conditions": conditions_text(study.conditions),
            "exact_n_per": study.exact_n_per,
            "adaptive_min_n": study.adaptive_min_n,
            "adaptive_agreement": study.adaptive_agreement,
            "questionnaires": questions_text(study.questionnaires),
            "training": "\n".join(f"{e['item']} | {e['explanation']}" for e in study.training),
        }


class NewStudyForm(StudySettingsForm):
    training = None  # type: ignore[assignment]  # training items are the study's gold items: set in its settings once they are imported
    slug = forms.SlugField(
        max_length=64, help_text="Short name in addresses and files: lowercase letters, digits and hyphens."
    )
    field_order = ["kind", "name", "slug"]


class StatusForm(forms.Form):
    status = forms.ChoiceField(choices=Study.Status.choices)
    confirm = forms.BooleanField(required=False)  # Close and Pause need it (status_confirmation)


def status_confirmation(study: Study, status: str) -> str | None:
    """The question a move must be confirmed with (Close and Pause), or None when it needs none.

    Only a move the lifecycle allows asks: any other is refused with its reason at once.
    """
    if status not in TRANSITIONS[study.status]:
        return None
    if status == Study.Status.PAUSED:
        return (
            f"Pause {study.name}? Nobody gets a new item until you resume it; "
            "items already handed out can still be answered."
        )
    if status == Study.Status.CLOSED and study.status != Study.Status.ARCHIVED:
        return (
            f"Close {study.name}? Annotators get no more items, and items shown but not answered "
            "are released (a late answer is refused). You can reopen it later."
        )
    return None


def status_actions(study: Study) -> list[tuple[str, str, str | None]]:
    """The lifecycle moves open to this study: (status, button text, confirmation question or None)."""
    opening: dict[str, str] = {Study.Status.PAUSED: "Resume", Study.Status.CLOSED: "Reopen"}
    words: dict[str, str] = {
        Study.Status.OPEN: opening.get(study.status, "Open for annotation"),
        Study.Status.PAUSED: "Pause",
        Study.Status.CLOSED: "Close" if study.status != Study.Status.ARCHIVED else "Unarchive",
        Study.Status.ARCHIVED: "Archive",
    }
    return [(status, words[status], status_confirmation(study, status)) for status in TRANSITIONS[study.status]]


class DuplicateForm(forms.Form):
    slug = forms.SlugField(max_length=64, label="Slug of the copy")
    name = forms.CharField(max_length=200, required=False, label="Name of the copy")
    copy_items = forms.BooleanField(required=False, label="Copy the items too")
