"""Forms of the members page and the invite sign-up page: they parse input, services decide."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth.forms import UserCreationForm

from .models import StudyMember

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
