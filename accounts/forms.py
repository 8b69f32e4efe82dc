from __future__ import annotations

from django import forms
from django.conf import settings


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, help_text="What the token is for, e.g. 'laptop script'.")
    expires_in_days = forms.IntegerField(
        required=False, min_value=1, label="Expires in (days)", help_text="Empty: the default expiry (or never)."
    )

    def clean_expires_in_days(self) -> int | None:
        value = self.cleaned_data.get("expires_in_days")
        if value is not None and value > settings.API_TOKEN_MAX_DAYS:
            raise forms.ValidationError(f"At most {settings.API_TOKEN_MAX_DAYS} days.")
        return value
