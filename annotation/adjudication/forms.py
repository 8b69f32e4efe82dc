"""Forms of the adjudication pages: the final label (with the workbench's keys), and the study's
adjudication settings."""

from __future__ import annotations

from django import forms

from annotation.adjudication.services import MAX_NOTE_LENGTH, Verdict, verdict_for
from annotation.models import AdjudicationRule, ReferenceRule, Study
from annotation.vocab import PREFERENCE_BOTH_BAD, PREFERENCE_TIE, preference_parts
from annotation.workbench.forms import Option, label_options

_STRENGTH_TEXT = {"strong": "much better", "slight": "slightly better"}
_PREFERENCE_KEYS = {"a_strong": "1", "a_slight": "2", PREFERENCE_TIE: "3", "b_slight": "4", "b_strong": "5"}


def list_names(study: Study) -> list[str]:
    """What the adjudicator calls the study's two systems: their names, or List 1 / List 2."""
    if study.adjudication_shows_systems:
        return list(study.systems)
    return [f"List {n}" for n in range(1, len(study.systems) + 1)]


def verdict_options(study: Study) -> list[Option]:
    """The final labels to choose from, with keys: verification labels as annotators have them;
    preference labels in system space (List 1 = the study's first system), 1-5 and 0 for both bad."""
    if not study.is_preference:
        return label_options(study)
    names = list_names(study) or ["A", "B"]
    options = []
    for label in study.labels:
        if label == PREFERENCE_BOTH_BAD:
            options.append(Option(label, "Both bad", ("0",)))
            continue
        index, strength = preference_parts(label) if label in _PREFERENCE_KEYS else (None, "")
        text = "About the same" if index is None else f"{names[index]} {_STRENGTH_TEXT[strength]}"
        keys = (_PREFERENCE_KEYS[label],) if label in _PREFERENCE_KEYS else ()
        options.append(Option(label, text, keys))
    return options


class AdjudicationForm(forms.Form):
    """The adjudicator's final label, note and "guidelines unclear" mark."""

    note = forms.CharField(required=False, max_length=MAX_NOTE_LENGTH, widget=forms.Textarea)
    guidelines_unclear = forms.BooleanField(required=False)

    def __init__(self, *args, study: Study, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.study = study
        self.options = verdict_options(study)
        self.fields["label"] = forms.ChoiceField(
            choices=[(option.value, option.text) for option in self.options],
            error_messages={"required": "Choose the final label."},
        )

    def verdict(self) -> Verdict:
        return verdict_for(self.study, label=self.cleaned_data["label"])


class AdjudicationSettingsForm(forms.Form):
    """How the queue is built and where the report's reference labels come from."""

    adjudication_rule = forms.ChoiceField(choices=AdjudicationRule.choices, label="Queue")
    adjudication_audit_share = forms.FloatField(
        min_value=0.001, max_value=1, label="Audit share", help_text="For the audit rule: the share of labelled items."
    )
    adjudication_shows_systems = forms.BooleanField(required=False, label="Show system names to adjudicators")
    adjudication_shows_verifiers = forms.BooleanField(required=False, label="Show verifiers' predictions")
    reference_rule = forms.ChoiceField(choices=ReferenceRule.choices, label="Reference labels")
