"""Fetch a token *through its owner*: another user's token is a 404, never a 403."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import Http404

from .models import ApiToken
from .selectors import tokens_of


def access_token(user: User, token_id: int) -> ApiToken:
    try:
        return tokens_of(user).get(pk=token_id)
    except (ApiToken.DoesNotExist, OverflowError, ValueError):
        raise Http404("No such token.") from None
