"""API token authentication with one hand-written query (annotation/rawsql.py says why).

Same behaviour and messages as DRF's TokenAuthentication, which it extends:
`Authorization: Token <key>`, 401 for an unknown key or an inactive user.
Every API request of an annotator runs this lookup.
"""

from __future__ import annotations

from functools import cache

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token

from .rawsql import ModelRows, fetch_one, names


@cache
def _rows() -> tuple[ModelRows, ModelRows]:
    return ModelRows(Token, alias="t"), ModelRows(get_user_model(), alias="u")


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[AbstractBaseUser, Token]:
        tokens, users = _rows()
        T, U = names(Token), names(get_user_model())
        row = fetch_one(
            f"SELECT {tokens.select}, {users.select} FROM {T.table} t JOIN {U.table} u ON u.{U.id} = t.{T.user} "
            f"WHERE t.{T.key} = %s",
            (key,),
        )
        if row is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token = tokens.instance(row)
        token.user = users.instance(row, tokens.width)
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return token.user, token
