"""The members and invites API: for the study's researchers and staff, 404 for everyone else.

Thin like the pages (members/views.py): access helpers fetch, services decide, secrets (a new
password, a new invite's token) are in the one answer that made them.
"""

from __future__ import annotations

from typing import Any

from axes.helpers import get_client_ip_address
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import access_invite, access_member
from annotation.adjudication.services import set_can_adjudicate
from annotation.errors import ServiceError
from annotation.http import logged_in_user
from annotation.lib.api_errors import bad_request
from annotation.lib.strict import StrictSerializer
from annotation.members.invites import (
    AccountRefused,
    InviteUnusable,
    SignupThrottled,
    create_invite,
    find_invite,
    invite_refusal,
    join_through_invite,
    revoke_invite,
    sign_up_through_invite,
)
from annotation.members.membership import remove_member, reset_password, set_member_active, set_member_role
from annotation.members.selectors import members_to_manage, study_invites
from annotation.members.serializers import (
    AddedMemberSerializer,
    AddMembersSerializer,
    InviteRequestSerializer,
    InviteSerializer,
    IssuedInviteSerializer,
    MemberChangeSerializer,
    MemberRemovedSerializer,
    MemberSerializer,
    PasswordResetSerializer,
)
from annotation.members.services import add_members
from annotation.models import Invite, Study, StudyMember
from annotation.permissions import IsStudyManager, StudyScoped

REFUSED = OpenApiResponse(description="Refused: `detail` says why (e.g. the study's only researcher).")


def _listed(study: Study, member: StudyMember) -> StudyMember:
    """The member as the list shows them (with their answer count)."""
    return members_to_manage(study).get(pk=member.pk)


class MemberList(StudyScoped, APIView):
    """The study's members (deactivated ones too), and adding members by username."""

    permission_classes = [IsStudyManager]

    @extend_schema(responses={200: MemberSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        return Response(MemberSerializer(members_to_manage(self.study), many=True).data)

    @extend_schema(request=AddMembersSerializer, responses={200: AddedMemberSerializer(many=True)})
    def post(self, request: Request, slug: str) -> Response:
        """Add accounts (role annotator unless said); a username without an account gets one, its
        password in this answer only. Members already in the study are reported, not changed."""
        form = AddMembersSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            outcomes = add_members(
                study=self.study, usernames=form.validated_data["usernames"], role=form.validated_data["role"]
            )
        except ServiceError as exc:
            return bad_request(str(exc))
        return Response(AddedMemberSerializer(outcomes, many=True).data)


class MemberDetail(StudyScoped, APIView):
    """One member: change role or deactivate / reactivate (PATCH), remove (DELETE)."""

    permission_classes = [IsStudyManager]

    @extend_schema(responses={200: MemberSerializer})
    def get(self, request: Request, slug: str, member_id: int) -> Response:
        member = access_member(request.user, slug, member_id)
        return Response(MemberSerializer(_listed(self.study, member)).data)

    @extend_schema(request=MemberChangeSerializer, responses={200: MemberSerializer, 400: REFUSED})
    def patch(self, request: Request, slug: str, member_id: int) -> Response:
        """Deactivating frees the member's items in progress; their answers stay attributed."""
        member = access_member(request.user, slug, member_id)
        form = MemberChangeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            if "role" in form.validated_data:
                member = set_member_role(study=self.study, member=member, role=form.validated_data["role"])
            if "is_active" in form.validated_data:
                member, _ = set_member_active(study=self.study, member=member, active=form.validated_data["is_active"])
            if "can_adjudicate" in form.validated_data:
                member = set_can_adjudicate(member=member, allowed=form.validated_data["can_adjudicate"])
        except ServiceError as exc:
            return bad_request(str(exc))
        return Response(MemberSerializer(_listed(self.study, member)).data)

    @extend_schema(responses={200: MemberRemovedSerializer, 400: REFUSED})
    def delete(self, request: Request, slug: str, member_id: int) -> Response:
        """Deleted if never given an item; otherwise deactivated, so their answers stay attributed."""
        member = access_member(request.user, slug, member_id)
        try:
            outcome = remove_member(study=self.study, member=member)
        except ServiceError as exc:
            return bad_request(str(exc))
        shown = _listed(self.study, outcome.member) if outcome.action == "deactivated" else outcome.member
        if outcome.action != "deactivated":
            shown.annotations = 0  # type: ignore[attr-defined]  # deleted: never given an item, so no answers
        data = {"action": outcome.action, "freed_leases": outcome.freed_leases, "member": shown}
        return Response(MemberRemovedSerializer(data).data)


class MemberPasswordReset(StudyScoped, APIView):
    """A new password for an annotator's account (shown once); refused with 403 when the account is
    not the study's to reset (one the study did not create, staff, researchers, members of studies
    you do not run). Each reset is recorded and logged in the study's change log."""

    permission_classes = [IsStudyManager]

    @extend_schema(request=None, responses={200: PasswordResetSerializer})
    def post(self, request: Request, slug: str, member_id: int) -> Response:
        member = access_member(request.user, slug, member_id)
        try:
            password = reset_password(
                actor=logged_in_user(request),
                study=self.study,
                member=member,
                ip_address=get_client_ip_address(request._request),
            )
        except ServiceError as exc:
            raise PermissionDenied(str(exc)) from None
        return Response(PasswordResetSerializer({"username": member.user.get_username(), "password": password}).data)


class InviteList(StudyScoped, APIView):
    """The study's invite links (never their tokens), and creating one (its link in that answer only)."""

    permission_classes = [IsStudyManager]

    @extend_schema(responses={200: InviteSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        return Response(InviteSerializer(study_invites(self.study), many=True).data)

    @extend_schema(request=InviteRequestSerializer, responses={201: IssuedInviteSerializer})
    def post(self, request: Request, slug: str) -> Response:
        form = InviteRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            issued = create_invite(
                study=self.study,
                created_by=logged_in_user(request),
                role=form.validated_data["role"],
                max_uses=form.validated_data["max_uses"],
                expires_in_days=form.validated_data.get("expires_in_days"),
            )
        except ServiceError as exc:
            return bad_request(str(exc))
        body = dict(IssuedInviteSerializer(issued.invite).data)
        body["token"] = issued.token
        body["url"] = request.build_absolute_uri(reverse("annotation:invite", args=[issued.token]))
        return Response(body, status=status.HTTP_201_CREATED)


class InviteDetail(StudyScoped, APIView):
    """One invite link: its state, and revoking it (DELETE; it stays listed, marked revoked)."""

    permission_classes = [IsStudyManager]

    @extend_schema(responses={200: InviteSerializer})
    def get(self, request: Request, slug: str, invite_id: int) -> Response:
        return Response(InviteSerializer(access_invite(request.user, slug, invite_id)).data)

    @extend_schema(responses={200: InviteSerializer})
    def delete(self, request: Request, slug: str, invite_id: int) -> Response:
        invite = revoke_invite(invite=access_invite(request.user, slug, invite_id))
        return Response(InviteSerializer(invite).data)


# --- invites -----------------------------------------------------------------------------------
# Joining a study through an invite link, by API: sign up (no login needed) or join (logged in).
#
# The same services and rules as the /invite/<token>/ page (members/invites.py): uses are
# taken atomically, sign-ups are throttled per client address, a deactivated member cannot
# come back through a link. After signing up, `POST /api/auth/token` gives the new account a token.


class InviteSignupRequestSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class JoinedSerializer(serializers.Serializer):
    username = serializers.CharField()
    study = serializers.CharField(help_text="The study's slug.")
    role = serializers.ChoiceField(choices=StudyMember.Role.choices)
    pseudonym = serializers.CharField(help_text="What reports and exports call you.")
    joined = serializers.BooleanField(help_text="False when you were already a member (no use of the invite counted).")


GONE = OpenApiResponse(description="The invite was withdrawn, expired or is used up.")
THROTTLED = OpenApiResponse(description="Too many accounts were created from this address lately; see Retry-After.")


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
