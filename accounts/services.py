"""Every write on API tokens: issue (the key is returned once, never stored) and revoke."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from .keys import hash_key, key_prefix, new_key
from .models import ApiToken


class TokenError(ValueError):
    """Bad input for a token (name too long, expiry out of range); the message names the problem."""


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    key: str  # the only time the clear key exists outside the client


def issue_token(*, user: User, name: str = "", expires_in_days: int | None = None) -> IssuedToken:
    """Create a token for `user`; the key is returned here and nowhere else."""
    name = (name or "").strip()
    if len(name) > ApiToken._meta.get_field("name").max_length:  # type: ignore[operator]
        raise TokenError("name: at most 100 characters.")
    limit = settings.API_TOKEN_MAX_DAYS
    if expires_in_days is None:
        expires_in_days = settings.API_TOKEN_DEFAULT_DAYS
    if expires_in_days is not None and not 1 <= expires_in_days <= limit:
        raise TokenError(f"expires_in_days: must be a whole number from 1 to {limit}.")
    key = new_key()
    now = timezone.now()
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            key_hash=hash_key(key),
            prefix=key_prefix(key),
            created=now,
            expires_at=None if expires_in_days is None else now + timedelta(days=expires_in_days),
        )
    return IssuedToken(token=token, key=key)


def revoke_token(*, token: ApiToken) -> ApiToken:
    """Mark the token revoked (kept for the owner's list); revoking twice keeps the first time."""
    if token.revoked_at is None:
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        token.refresh_from_db(fields=["revoked_at"])
    return token
