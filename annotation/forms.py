"""Forms of the researcher pages: they parse input, services decide."""

from __future__ import annotations

from django import forms

from .models import ImportJob, StudyMember


class ImportForm(forms.Form):
    what = forms.ChoiceField(choices=ImportJob.What.choices, label="Import")
    file = forms.FileField(help_text="JSON Lines (.jsonl) or CSV (.csv), UTF-8.")
    file_format = forms.ChoiceField(
        choices=[("", "from the file name"), ("jsonl", "JSON Lines"), ("csv", "CSV")], required=False, label="Format"
    )
    update = forms.BooleanField(required=False, label="Replace entries whose id already exists")


class AddMembersForm(forms.Form):
    usernames = forms.CharField(
        help_text="One or more usernames, separated by spaces, commas or new lines.",
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    role = forms.ChoiceField(choices=StudyMember.Role.choices)

    def clean_usernames(self) -> list[str]:
        raw = self.cleaned_data["usernames"].replace(",", " ").split()
        if not raw:
            raise forms.ValidationError("Give at least one username.")
        return raw
