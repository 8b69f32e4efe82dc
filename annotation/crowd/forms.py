"""The participant link's settings form and the check-item picker's form; the rules live in crowd/services.py,
the words (label, help with an example) in crowd/link_fields.py."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from annotation.crowd.link_fields import help_text, label
from annotation.crowd.services import MAX_CHECK_ITEMS, MAX_REDIRECT_URL
from annotation.models import ParticipantLink


def _field(name: str, field: forms.Field) -> forms.Field:
    """`field` with the setting's label and help (one text for the page and the API)."""
    field.label = label(name)
    field.help_text = help_text(name)
    return field


class ParticipantLinkForm(forms.Form):
    """Every setting but the two check lists, which the picker (its own page and form below) edits."""

    enabled = _field("enabled", forms.BooleanField(required=False))
    max_participants = _field("max_participants", forms.IntegerField(required=False, min_value=1))
    pid_param = _field("pid_param", forms.CharField(max_length=64))
    study_param = _field("study_param", forms.CharField(max_length=64, required=False))
    session_param = _field("session_param", forms.CharField(max_length=64, required=False))
    consent = _field("consent", forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False))
    items_per_participant = _field("items_per_participant", forms.IntegerField(min_value=1))
    budget_minutes = _field("budget_minutes", forms.IntegerField(required=False, min_value=1))
    qualification_pass = _field("qualification_pass", forms.IntegerField(min_value=0))
    attention_every = _field("attention_every", forms.IntegerField(min_value=0))
    attention_fail_limit = _field("attention_fail_limit", forms.IntegerField(min_value=1))
    time_limit_minutes = _field("time_limit_minutes", forms.IntegerField(min_value=1))
    code_completed = _field("code_completed", forms.CharField(max_length=64, required=False))
    code_screened_out = _field("code_screened_out", forms.CharField(max_length=64, required=False))
    code_timed_out = _field("code_timed_out", forms.CharField(max_length=64, required=False))
    code_full = _field("code_full", forms.CharField(max_length=64, required=False))
    redirect_url = _field("redirect_url", forms.CharField(max_length=MAX_REDIRECT_URL, required=False))
    pay_per_hour = _field("pay_per_hour", forms.DecimalField(min_value=0, max_digits=8, decimal_places=2))
    currency = _field(
        "currency",
        forms.CharField(
            min_length=3,
            max_length=3,
            # The page draws the datalist (crowd/currencies.py): typing "eu" offers EUR, without JavaScript.
            widget=forms.TextInput(
                attrs={"size": 4, "list": "currency-codes", "autocapitalize": "characters", "spellcheck": "false"}
            ),
        ),
    )
    pay_basis = _field(
        "pay_basis", forms.ChoiceField(choices=ParticipantLink.PayBasis.choices, widget=forms.RadioSelect)
    )

    #: Fields drawn across the whole form (long text).
    WIDE = ("consent", "redirect_url", "pay_basis")

    @classmethod
    def for_link(cls, link: ParticipantLink, data=None) -> ParticipantLinkForm:
        initial = {name: getattr(link, name) for name in cls.base_fields}
        return cls(data, initial=initial)


def _ids(text: str) -> list[str]:
    """Item ids pasted one a line or separated by commas (an id may hold spaces, never a comma or a newline)."""
    return [part.strip() for part in re.split(r"[,\r\n]+", text) if part.strip()]


class IdList(forms.Field):
    """A list of item ids from repeated form fields (checkboxes of one name); checked against the study by
    the service, which names the ids that are not its gold items."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[str]:
        return [str(part).strip() for part in value or [] if str(part).strip()]


class CheckPickForm(forms.Form):
    """The picker's save: the listed items left ticked stay, the search results ticked and the ids pasted
    are added at the end. `shown` names the listed items the page showed, so an item another researcher
    added meanwhile is kept (only a shown item left unticked is taken off)."""

    shown = IdList(required=False)
    keep = IdList(required=False)
    add = IdList(required=False)
    add_ids = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Add by id",
        help_text="One item id a line, or separated by commas. E.g. g-01, g-07.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        pasted = _ids(data.get("add_ids", ""))
        for name, values in (("shown", data.get("shown", [])), ("add", [*data.get("add", []), *pasted])):
            if len(values) > MAX_CHECK_ITEMS:
                raise forms.ValidationError(f"{name}: at most {MAX_CHECK_ITEMS:,} items at once (got {len(values):,})")
        data["pasted"] = pasted
        return data

    def removed(self) -> list[str]:
        keep = set(self.cleaned_data["keep"])
        return [external_id for external_id in self.cleaned_data["shown"] if external_id not in keep]

    def added(self) -> list[str]:
        return [*self.cleaned_data["add"], *self.cleaned_data["pasted"]]
