"""API token authentication with one indexed lookup by the key's hash (annotation/lib/rawsql.py says why SQL).

`Authorization: Token <key>`, as DRF's TokenAuthentication (which it extends): the key is
hashed and looked up by its unique hash together with its user. Unknown, revoked and expired
keys and inactive users get a 401 whose message says which. `last_used` is written at most
once per API_TOKEN_LAST_USED_SECONDS per token, so the hot path stays one read.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cache

from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from annotation.lib.rawsql import ModelRows, db_datetime, execute, fetch_one, names

from .keys import hash_key
from .models import ApiToken


@cache
def _rows() -> tuple[ModelRows[ApiToken], ModelRows[User]]:
    return ModelRows(ApiToken, alias="t"), ModelRows(User, alias="u")


class TokenAuthentication(authentication.TokenAuthentication):
    model = ApiToken

    def authenticate_credentials(self, key: str) -> tuple[User, ApiToken]:
        tokens, users = _rows()
        T, U = names(ApiToken), names(User)
        row = fetch_one(
            f"SELECT {tokens.select}, {users.select} FROM {T.table} t JOIN {U.table} u ON u.{U.id} = t.{T.user} "
            f"WHERE t.{T.key_hash} = %s",
            (hash_key(key),),
        )
        if row is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token = tokens.instance(row)
        token.user = users.instance(row, tokens.width)
        now = timezone.now()
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed(_("Token revoked: create a new one under Account > API tokens."))
        if token.is_expired(now):
            raise exceptions.AuthenticationFailed(_("Token expired: create a new one under Account > API tokens."))
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        self._touch(token, now)
        return token.user, token

    @staticmethod
    def _touch(token: ApiToken, now: datetime) -> None:
        """Record use, at most once per API_TOKEN_LAST_USED_SECONDS (a write per request would cost the hot path)."""
        interval = timedelta(seconds=settings.API_TOKEN_LAST_USED_SECONDS)
        if token.last_used is not None and token.last_used > now - interval:
            return
        T = names(ApiToken)
        execute(f"UPDATE {T.table} SET {T.last_used} = %s WHERE {T.id} = %s", (db_datetime(now), token.pk))
        token.last_used = now
