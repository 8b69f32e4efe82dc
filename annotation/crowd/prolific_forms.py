"""The Prolific page's forms: connecting, approving or rejecting, and bonuses. The rules (what Prolific
accepts, what a bonus may be) live in prolific_services.py; these only read the page's fields."""

from __future__ import annotations

import re

from django import forms

from annotation.crowd.prolific_client import MIN_REJECTION_MESSAGE, REJECTION_CATEGORIES
from annotation.crowd.prolific_services import MAX_BONUS, MAX_REJECTION_MESSAGE


class ProlificConnectForm(forms.Form):
    study_id = forms.CharField(
        label="Prolific study id",
        max_length=64,
        help_text="From the study's page on Prolific (its address ends with it), e.g. 60f6acb180a7b59ac0621f9e.",
    )
    token = forms.CharField(
        label="Prolific API token",
        max_length=512,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}, render_value=False),
        help_text="Prolific → Settings → API tokens. Stored encrypted and never shown again; it is tested before it is "
        "kept.",
    )


class ProlificReviewForm(forms.Form):
    """Approve or reject the submissions ticked in the table (their ids come as `submission`)."""

    action = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    rejection_category = forms.ChoiceField(
        label="Reason (Prolific's category)",
        required=False,
        choices=[("", "— choose, to reject —"), *REJECTION_CATEGORIES.items()],
    )
    message = forms.CharField(
        label="Message to the participant",
        required=False,
        max_length=MAX_REJECTION_MESSAGE,
        widget=forms.Textarea(attrs={"rows": 3, "maxlength": MAX_REJECTION_MESSAGE}),
        help_text=f"Required to reject: at least {MIN_REJECTION_MESSAGE} characters saying why, as Prolific asks. "
        "E.g. “Two of the three attention checks were answered against the instructions shown with them, so this "
        "submission cannot be approved.”",
    )


class ProlificBonusForm(forms.Form):
    basis = forms.ChoiceField(
        label="Bonus",
        choices=[
            ("pay", "The payment table's pay, less the reward Prolific already pays"),
            ("fixed", "The same amount for each"),
        ],
        initial="pay",
        widget=forms.RadioSelect,
    )
    amount = forms.DecimalField(
        label="Amount",
        min_value=0,
        max_value=MAX_BONUS,
        decimal_places=2,
        initial=0,
        help_text="With the pay: the study's reward on Prolific (e.g. 1.50), taken off each pay. Fixed: each "
        "bonus. In the study's currency.",
    )
    panel_ids = forms.CharField(
        label="Only these Prolific IDs (optional)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Empty: everyone eligible (a submission awaiting review or approved, not bonused yet). Separate "
        "IDs by spaces, commas or lines.",
    )
    confirmation = forms.CharField(required=False, widget=forms.HiddenInput)

    def chosen_ids(self) -> list[str] | None:
        """The Prolific IDs typed, or None for everyone eligible."""
        raw = self.cleaned_data.get("panel_ids", "")
        ids = [part for part in re.split(r"[\s,;]+", raw) if part]
        return ids or None
