"""Signals the annotation app sends to apps that depend on it (annotation imports none of them)."""

from __future__ import annotations

from django.dispatch import Signal

#: A study researcher gave a member's account a new password (services/membership.py).
#: Keyword arguments: user (the account), actor (who reset it), study. The accounts app
#: revokes the account's API tokens, so a reset locks out whoever knew the old password.
member_password_reset = Signal()
