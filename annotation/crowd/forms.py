"""The participant link's settings form; the rules live in crowd/services.py."""

from __future__ import annotations

from django import forms

from annotation.models import ParticipantLink


class ParticipantLinkForm(forms.Form):
    enabled = forms.BooleanField(required=False, label="Link is on")
    max_participants = forms.IntegerField(required=False, min_value=1, label="Participant cap (empty: none)")
    pid_param = forms.CharField(max_length=64, label="Participant ID parameter")
    study_param = forms.CharField(max_length=64, required=False, label="Study ID parameter")
    session_param = forms.CharField(max_length=64, required=False, label="Session ID parameter")
    consent = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False, label="Consent (Markdown)")
    items_per_participant = forms.IntegerField(min_value=1, label="Items per participant")
    budget_minutes = forms.IntegerField(required=False, min_value=1, label="Time budget (active minutes; empty: none)")
    qualification_items = forms.CharField(required=False, label="Qualification items (gold item ids)")
    qualification_pass = forms.IntegerField(min_value=0, label="Correct answers to pass")
    attention_items = forms.CharField(required=False, label="Attention-check items (gold item ids)")
    attention_every = forms.IntegerField(min_value=0, label="A check after every k items (0: none)")
    attention_fail_limit = forms.IntegerField(min_value=1, label="Failed checks that screen out")
    time_limit_minutes = forms.IntegerField(min_value=1, label="Time limit (minutes)")
    code_completed = forms.CharField(max_length=64, required=False, label="Code: completed")
    code_screened_out = forms.CharField(max_length=64, required=False, label="Code: screened out")
    code_timed_out = forms.CharField(max_length=64, required=False, label="Code: timed out")
    redirect_url = forms.CharField(max_length=500, required=False, label="Redirect URL ({code} is replaced)")
    pay_per_hour = forms.DecimalField(min_value=0, max_digits=8, decimal_places=2, label="Pay per hour of active time")

    @classmethod
    def for_link(cls, link: ParticipantLink, data=None) -> ParticipantLinkForm:
        initial = {name: getattr(link, name) for name in cls.base_fields}
        initial["qualification_items"] = ", ".join(link.qualification_items)
        initial["attention_items"] = ", ".join(link.attention_items)
        return cls(data, initial=initial)
