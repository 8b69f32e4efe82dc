"""What the accounts app does when the annotation app tells it something happened."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.dispatch import receiver
from django.utils import timezone

from annotation.signals import member_password_reset

from .models import ApiToken


@receiver(member_password_reset, dispatch_uid="accounts.revoke_tokens_on_password_reset")
def revoke_tokens_on_password_reset(sender: Any, *, user: User, **kwargs: Any) -> None:
    """A reset password means the old one may be known to someone else: their API tokens go too."""
    ApiToken.objects.filter(user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
