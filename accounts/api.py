"""Token API: issue a token for a username and password, list and revoke one's own tokens."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.http import logged_in_user
from annotation.lib.parsers import FormParser, MultiPartParser
from annotation.lib.strict import StrictJSONParser, strict_query

from .access import access_token
from .lockout import lockout_response
from .selectors import tokens_of
from .serializers import IssuedTokenSerializer, LockoutSerializer, TokenRequestSerializer, TokenSerializer
from .services import TokenError, issue_token, revoke_token


class ObtainToken(APIView):
    """Issue a new API token for a username and password (the key is in this answer only).

    Failed attempts are throttled per (username, address) and per address: a locked-out
    client gets 429 with Retry-After, without its password being checked.
    """

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    #: JSON like every body of the API, and a form too (curl -d, a login script): this body is flat strings
    #: and a number, nothing a form cannot say, so unlike the others (settings.REST_FRAMEWORK) it may be one.
    parser_classes = [StrictJSONParser, FormParser, MultiPartParser]

    @extend_schema(
        request=TokenRequestSerializer,
        responses={
            201: IssuedTokenSerializer,
            400: OpenApiResponse(description="Missing or invalid field, or wrong username or password."),
            429: OpenApiResponse(LockoutSerializer, description="Too many failed attempts; see Retry-After."),
        },
        auth=[],
    )
    def post(self, request: Request) -> Response:
        serializer = TokenRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        django_request = request._request
        user = authenticate(django_request, username=data["username"], password=data["password"])
        if getattr(django_request, "axes_locked_out", False):
            return lockout_response(django_request)  # type: ignore[return-value]
        if user is None or not user.is_active:
            raise ValidationError({"non_field_errors": ["Unable to log in with provided credentials."]})
        try:
            issued = issue_token(user=user, name=data["name"], expires_in_days=data.get("expires_in_days"))
        except TokenError as exc:  # "field: message"
            field, _, message = str(exc).partition(": ")
            raise ValidationError({field: [message]} if message else [str(exc)]) from exc
        body = dict(IssuedTokenSerializer(issued.token).data)
        body["token"] = issued.key
        return Response(body, status=status.HTTP_201_CREATED)


class TokenList(generics.ListAPIView):
    """The requesting user's API tokens, newest first; never their keys."""

    serializer_class = TokenSerializer

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        strict_query(request, ("page",))
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        return tokens_of(logged_in_user(self.request))


class TokenRevoke(APIView):
    """Revoke one of the requesting user's tokens (another user's token: 404)."""

    @extend_schema(responses={204: None, 404: OpenApiResponse(description="No such token of yours.")})
    def delete(self, request: Request, token_id: int) -> Response:
        revoke_token(token=access_token(logged_in_user(request), token_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
