"""Reads of API tokens, always scoped to their owner."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from .models import ApiToken


def tokens_of(user: User) -> QuerySet[ApiToken]:
    """The user's own tokens, newest first (revoked and expired ones included, marked by their status)."""
    return ApiToken.objects.filter(user=user).order_by("-created", "-id")
