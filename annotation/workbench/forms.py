"""Forms of the researcher and annotator pages: they parse input, services decide."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms

from annotation.models import MAX_ACTIVE_MS, Annotation, Assignment, Study
from annotation.questions.answers import screen_answers
from annotation.questions.forms import page_questions, posted_answers
from annotation.vocab import PREFERENCE_BOTH_BAD, PREFERENCE_TIE
from annotation.workbench.services import MAX_TEXT, SubmittedAnswer, shown_claim_counts, shown_systems

# --- annotator workbench ------------------------------------------------------
# The forms parse what the page sent; the assignment service decides whether
# the answer is acceptable (and stores it in system space). Option lists carry
# the keyboard shortcut shown next to each choice; static/js/workbench.js
# reads the same keys from the rendered page, so page and script cannot disagree.


@dataclass(frozen=True)
class Option:
    value: str
    text: str
    keys: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.keys[0] if self.keys else ""


PREFERENCE_OPTIONS = (
    Option("left_strong", "List 1 much better", ("1",)),
    Option("left_slight", "List 1 slightly better", ("2",)),
    Option(PREFERENCE_TIE, "About the same", ("3",)),
    Option("right_slight", "List 2 slightly better", ("4",)),
    Option("right_strong", "List 2 much better", ("5",)),
    Option(PREFERENCE_BOTH_BAD, "Both bad", ("0",)),
)
EVIDENCE_OPTIONS = (
    Option("support", "Supports", ("y",)),
    Option("not_support", "Does not support", ("n",)),
    Option("irrelevant", "Irrelevant", ("x",)),
)
#: Keys with a page-wide meaning; a label never takes one of them as its letter.
#: b back, k skip, f flag, j text box, u useful, q next question, [ ] previous/next passage, ? help.
RESERVED_KEYS = frozenset("bkfjuynxq[]?0123456789")


def preference_options(study: Study) -> list[Option]:
    """The study's screen choices: tie and 'both bad' only when the study offers them."""
    return [
        option
        for option in PREFERENCE_OPTIONS
        if (option.value != PREFERENCE_TIE or study.tie_allowed)
        and (option.value != PREFERENCE_BOTH_BAD or study.both_bad_allowed)
    ]


def label_options(study: Study) -> list[Option]:
    """Verification labels with keys 1..9 and, when unambiguous, their first letter (s/c/i)."""
    initials = [label[:1].lower() for label in study.labels]
    options = []
    for number, label in enumerate(study.labels, start=1):
        keys = [str(number)] if number <= 9 else []
        letter = label[:1].lower()
        if letter.isalpha() and initials.count(letter) == 1 and letter not in RESERVED_KEYS:
            keys.append(letter)
        options.append(Option(label, label.replace("_", " ").capitalize(), tuple(keys)))
    return options


def _active_ms(raw: str | None) -> int | None:
    """The browser's timer, if it sent a sensible one; a broken timer never costs an answer."""
    raw = (raw or "").strip()
    if not raw.isdigit():
        return None
    value = int(raw)
    return value if value <= MAX_ACTIVE_MS else None


class AnswerForm(forms.Form):
    """Fields shared by both study kinds."""

    justification = forms.CharField(required=False, max_length=MAX_TEXT, widget=forms.Textarea)

    def __init__(
        self,
        *args,
        study: Study,
        shown: tuple[str, ...] = (),
        claim_counts: tuple[int, ...] = (),
        stored_questions: dict[str, Any] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.study = study
        self.shown, self.claim_counts = shown, claim_counts
        self.stored_questions = stored_questions
        field = self.fields["justification"]
        field.required = study.justification_required
        field.error_messages["required"] = (
            "This study asks for a justification with every answer: write a sentence on why (key j)."
        )

    @property
    def active_ms(self) -> int | None:
        return _active_ms(self.data.get("active_ms")) if self.is_bound else None

    @property
    def questions(self) -> dict[str, Any] | None:
        """The extra questions' answers as posted, in screen space (None when the study asks none)."""
        if not self.study.questions or not self.is_bound:
            return None
        return posted_answers(self.study.questions, self.data, self.claim_counts)

    @property
    def question_controls(self) -> dict[str, Any]:
        """The extra questions as the page renders them, pre-filled with what was posted or stored."""
        if self.is_bound:
            current = self.questions
        else:
            current = screen_answers(self.study.questions, self.stored_questions, self.shown)
        return page_questions(self.study.questions, current, self.claim_counts)


class PreferenceAnswerForm(AnswerForm):
    def __init__(self, *args, study: Study, **kwargs) -> None:
        super().__init__(*args, study=study, **kwargs)
        self.options = preference_options(study)
        self.fields["choice"] = forms.ChoiceField(
            choices=[(option.value, option.text) for option in self.options],
            error_messages={"required": "Choose which list is better (keys 1–5)."},
        )

    def to_answer(self) -> SubmittedAnswer:
        return SubmittedAnswer(
            choice=self.cleaned_data["choice"],
            justification=self.cleaned_data["justification"],
            questions=self.questions,
            active_ms=self.active_ms,
        )


class VerificationAnswerForm(AnswerForm):
    """A label, and (when the study asks) a judgement and a 'useful' tick per evidence passage."""

    def __init__(self, *args, study: Study, passages: int, **kwargs) -> None:
        super().__init__(*args, study=study, **kwargs)
        self.options = label_options(study)
        self.evidence_options = EVIDENCE_OPTIONS
        self.fields["label"] = forms.ChoiceField(
            choices=[(option.value, option.text) for option in self.options],
            error_messages={"required": "Choose a label for the claim."},
        )
        self.passages = passages if study.evidence_judgements else 0
        for index in range(self.passages):
            self.fields[f"evidence_{index}"] = forms.ChoiceField(
                choices=[(option.value, option.text) for option in EVIDENCE_OPTIONS],
                error_messages={"required": f"Judge passage {index + 1}: supports, does not support or irrelevant."},
            )
            self.fields[f"useful_{index}"] = forms.BooleanField(required=False)

    def passage_rows(self, evidence: list[dict]) -> list[dict]:
        """Each displayed passage with its judgement and 'useful' fields (None when not asked)."""
        rows = []
        for passage in evidence:
            index = passage["index"]
            asked = index < self.passages
            rows.append(
                {
                    "passage": passage,
                    "judgement": self[f"evidence_{index}"] if asked else None,
                    "useful": self[f"useful_{index}"] if asked else None,
                }
            )
        return rows

    def to_answer(self) -> SubmittedAnswer:
        evidence = [
            {
                "index": index,
                "judgement": self.cleaned_data[f"evidence_{index}"],
                "useful": bool(self.cleaned_data[f"useful_{index}"]),
            }
            for index in range(self.passages)
        ]
        return SubmittedAnswer(
            label=self.cleaned_data["label"],
            justification=self.cleaned_data["justification"],
            evidence=evidence or None,
            questions=self.questions,
            active_ms=self.active_ms,
        )


def answer_form(
    study: Study,
    *,
    passages: int = 0,
    data=None,
    annotation: Annotation | None = None,
    assignment: Assignment | None = None,
) -> PreferenceAnswerForm | VerificationAnswerForm:
    """The study kind's answer form; with `annotation`, pre-filled with that stored answer. With
    `assignment` (saved or not), its extra questions know the lists shown and their claims."""
    initial = initial_from_annotation(study, annotation) if annotation is not None else None
    context: dict[str, Any] = {"study": study, "initial": initial}
    if annotation is not None:
        context["stored_questions"] = annotation.question_answers
    if assignment is not None and study.questions:
        context["shown"] = shown_systems(study, assignment.left_system)
        context["claim_counts"] = shown_claim_counts(study, assignment)
    if study.is_preference:
        return PreferenceAnswerForm(data, **context)
    return VerificationAnswerForm(data, passages=passages, **context)


def initial_from_annotation(study: Study, annotation: Annotation) -> dict:
    """A stored answer as form values (for revising it)."""
    initial: dict = {"justification": annotation.justification}
    if study.is_preference:
        initial["choice"] = annotation.choice
        return initial
    initial["label"] = annotation.label
    for entry in annotation.evidence_judgements or []:
        index = entry.get("index")
        if isinstance(index, int):
            initial[f"evidence_{index}"] = entry.get("judgement", "")
            initial[f"useful_{index}"] = bool(entry.get("useful"))
    return initial


class FlagForm(forms.Form):
    reason = forms.CharField(max_length=MAX_TEXT, error_messages={"required": "Say why the item is flagged."})
    then = forms.ChoiceField(choices=[("stay", "Flag"), ("skip", "Flag and skip")], required=False)
