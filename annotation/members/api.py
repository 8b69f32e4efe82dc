"""The members and invites API: for the study's researchers and staff, 404 for everyone else.

Thin like the pages (members/views.py): access helpers fetch, services decide, secrets (a new
password, a new invite's token) are in the one answer that made them.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import access_invite, access_member
from annotation.adjudication.services import set_can_adjudicate
from annotation.errors import ServiceError
from annotation.http import logged_in_user
from annotation.lib.api_errors import bad_request
from annotation.members.invites import create_invite, revoke_invite
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
from annotation.models import Study, StudyMember
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
    not the study's to reset (staff, researchers, members of studies you do not run)."""

    permission_classes = [IsStudyManager]

    @extend_schema(request=None, responses={200: PasswordResetSerializer})
    def post(self, request: Request, slug: str, member_id: int) -> Response:
        member = access_member(request.user, slug, member_id)
        try:
            password = reset_password(actor=logged_in_user(request), study=self.study, member=member)
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
