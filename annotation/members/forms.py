"""Forms of the researcher and annotator pages: they parse input, services decide."""

# Forms of the members page and the invite sign-up page: they parse input, services decide.

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth.forms import UserCreationForm

from annotation.models import StudyMember


class AddMembersForm(forms.Form):
    usernames = forms.CharField(
        help_text="One or more usernames, separated by spaces, commas or new lines.",
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    # Annotator first and by default: one slip must not hand someone the report and the export.
    role = forms.ChoiceField(
        choices=[(StudyMember.Role.ANNOTATOR, "Annotator"), (StudyMember.Role.RESEARCHER, "Researcher")],
        initial=StudyMember.Role.ANNOTATOR,
    )

    def clean_usernames(self) -> list[str]:
        raw = self.cleaned_data["usernames"].replace(",", " ").split()
        if not raw:
            raise forms.ValidationError("Give at least one username.")
        return raw


ROLE_CHOICES = [(StudyMember.Role.ANNOTATOR, "Annotator"), (StudyMember.Role.RESEARCHER, "Researcher")]


class InviteForm(forms.Form):
    prefix = "invite"  # beside the add-members form on one page: ids and names must not clash
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=StudyMember.Role.ANNOTATOR)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Built here, not on the class: the limits are settings, read when the form is made.
        self.fields["max_uses"] = forms.IntegerField(
            min_value=1,
            max_value=settings.INVITE_MAX_USES,
            initial=1,
            label="People it admits",
            help_text="How many people may join through this link.",
        )
        self.fields["expires_in_days"] = forms.IntegerField(
            min_value=1,
            max_value=settings.INVITE_MAX_DAYS,
            initial=settings.INVITE_DEFAULT_DAYS,
            label="Expires after (days)",
        )


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class InviteSignupForm(UserCreationForm):
    """Django's sign-up form (username rules, password validators, the two passwords match)."""

    class Meta(UserCreationForm.Meta):
        fields = ("username",)
