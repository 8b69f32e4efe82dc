"""Joining a study through an invite link, by API: sign up (no login needed) or join (logged in).

The same services and rules as the /invite/<token>/ page (members/invites.py): uses are
taken atomically, sign-ups are throttled per client address, a deactivated member cannot
come back through a link. After signing up, `POST /api/auth/token` gives the new account a token.
"""

from __future__ import annotations

from typing import Any

from axes.helpers import get_client_ip_address
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.errors import ServiceError
from annotation.http import logged_in_user
from annotation.members.invites import (
    AccountRefused,
    InviteUnusable,
    SignupThrottled,
    find_invite,
    invite_refusal,
    join_through_invite,
    sign_up_through_invite,
)
from annotation.members.serializers import StrictSerializer
from annotation.models import Invite, StudyMember


class InviteErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.CharField()


class InviteSignupRequestSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class JoinedSerializer(serializers.Serializer):
    username = serializers.CharField()
    study = serializers.CharField(help_text="The study's slug.")
    role = serializers.ChoiceField(choices=StudyMember.Role.choices)
    pseudonym = serializers.CharField(help_text="What reports and exports call you.")
    joined = serializers.BooleanField(help_text="False when you were already a member (no use of the invite counted).")


GONE = OpenApiResponse(InviteErrorSerializer, description="The invite was withdrawn, expired or is used up.")
THROTTLED = OpenApiResponse(
    InviteErrorSerializer, description="Too many accounts were created from this address lately; see Retry-After."
)


def _usable_invite(token: str) -> Invite:
    """The invite, or 404 (no such link) / 410 (it cannot be used now)."""
    invite = find_invite(token)
    if invite is None:
        raise NotFound("This invite link is not valid.")
    refusal = invite_refusal(invite)
    if refusal is not None:
        raise _Gone(refusal)
    return invite


class _Gone(Exception):
    def __init__(self, detail: str) -> None:
        self.detail = detail


def _joined(member: StudyMember, username: str, joined: bool) -> dict[str, Any]:
    return {
        "username": username,
        "study": member.study.slug,
        "role": member.role,
        "pseudonym": member.pseudonym,
        "joined": joined,
    }


class InviteView(APIView):
    """Turns the invite services' refusals into HTTP answers in the one error shape."""

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, (_Gone, InviteUnusable)):
            detail = exc.detail if isinstance(exc, _Gone) else str(exc)
            return Response({"detail": detail, "code": "invite_unusable"}, status=status.HTTP_410_GONE)
        if isinstance(exc, SignupThrottled):
            headers = {"Retry-After": str(exc.retry_after)}
            return Response({"detail": str(exc), "code": "throttled"}, status=429, headers=headers)
        if isinstance(exc, AccountRefused):
            exc = ValidationError({exc.field: [exc.message]})
        elif isinstance(exc, ServiceError):
            exc = ValidationError({"non_field_errors": [str(exc)]})
        return super().handle_exception(exc)


class InviteSignup(InviteView):
    """Create an annotator account through an invite link (no login); the account is a member at once."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(
        request=InviteSignupRequestSerializer,
        responses={201: JoinedSerializer, 410: GONE, 429: THROTTLED},
        auth=[],
    )
    def post(self, request: Request, token: str) -> Response:
        invite = _usable_invite(token)
        form = InviteSignupRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        user, member = sign_up_through_invite(
            invite=invite,
            username=form.validated_data["username"],
            password=form.validated_data["password"],
            ip_address=get_client_ip_address(request._request),
        )
        return Response(_joined(member, user.get_username(), True), status=status.HTTP_201_CREATED)


class InviteJoin(InviteView):
    """Join the invite's study with the account you are logged in with."""

    @extend_schema(request=None, responses={200: JoinedSerializer, 410: GONE})
    def post(self, request: Request, token: str) -> Response:
        user = logged_in_user(request)
        invite = _usable_invite(token)
        member, joined = join_through_invite(invite=invite, user=user)
        return Response(_joined(member, user.get_username(), joined))
