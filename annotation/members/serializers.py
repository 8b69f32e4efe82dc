"""Shapes of the members and invites API; no business logic (that is members/membership.py, invites.py)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from annotation.lib.strict import StrictSerializer
from annotation.models import Invite, StudyMember

ROLES = StudyMember.Role.choices


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.SerializerMethodField(help_text="Null for an identity of imported labels.")
    annotations = serializers.IntegerField(read_only=True, help_text="Answers this member gave in the study.")

    class Meta:
        model = StudyMember
        fields = [
            "id",
            "pseudonym",
            "username",
            "role",
            "is_active",
            "can_adjudicate",
            "is_external",
            "annotations",
            "created_at",
            "deactivated_at",
        ]
        read_only_fields = fields

    def get_username(self, member: StudyMember) -> str | None:
        return None if member.is_external else member.user.get_username()


class AddMembersSerializer(StrictSerializer):
    usernames = serializers.ListField(
        child=serializers.CharField(max_length=150), min_length=1, max_length=500, help_text="Accounts to add."
    )
    role = serializers.ChoiceField(choices=ROLES, default=StudyMember.Role.ANNOTATOR)


class AddedMemberSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.CharField()
    pseudonym = serializers.CharField()
    created_user = serializers.BooleanField(help_text="A new account was made for this username.")
    password = serializers.CharField(
        allow_null=True, help_text="The new account's password: shown this once, never stored in clear."
    )
    already_member = serializers.BooleanField(help_text="Was already in the study; nothing changed.")
    reactivated = serializers.BooleanField(help_text="Was deactivated and is active again.")


class MemberChangeSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=ROLES, required=False)
    is_active = serializers.BooleanField(required=False, help_text="false: deactivate; true: reactivate.")
    can_adjudicate = serializers.BooleanField(
        required=False, help_text="true: may adjudicate (researchers always may); false: may not."
    )

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        if not attrs:
            raise serializers.ValidationError("send role, is_active, can_adjudicate or several")
        return attrs


class MemberRemovedSerializer(serializers.Serializer):
    action = serializers.ChoiceField(
        choices=["removed", "deactivated"],
        help_text="removed: deleted (never given an item); deactivated: kept so their answers stay attributed.",
    )
    freed_leases = serializers.IntegerField(help_text="Items in progress given back to the pool.")
    member = MemberSerializer()


class PasswordResetSerializer(serializers.Serializer):
    username = serializers.CharField()
    password = serializers.CharField(help_text="The new password: shown this once, never stored in clear.")


class InviteSerializer(serializers.ModelSerializer):
    state = serializers.SerializerMethodField(help_text="active, revoked, expired or used up")
    created_by = serializers.SerializerMethodField()

    class Meta:
        model = Invite
        fields = [
            "id",
            "prefix",
            "role",
            "max_uses",
            "uses",
            "expires_at",
            "revoked_at",
            "created_at",
            "created_by",
            "state",
        ]
        read_only_fields = fields

    def get_state(self, invite: Invite) -> str:
        return invite.state()

    def get_created_by(self, invite: Invite) -> str | None:
        return invite.created_by.get_username() if invite.created_by is not None else None


class IssuedInviteSerializer(InviteSerializer):
    token = serializers.CharField(read_only=True, help_text="The invite's token: shown this once, never stored.")
    url = serializers.CharField(read_only=True, help_text="The link to send: /invite/<token>/ on this server.")

    class Meta(InviteSerializer.Meta):
        fields = ["token", "url", *InviteSerializer.Meta.fields]
        read_only_fields = fields


class InviteRequestSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=ROLES, default=StudyMember.Role.ANNOTATOR)

    def get_fields(self) -> dict[str, serializers.Field]:
        """The ranges are the operator's (INVITE_MAX_USES, INVITE_MAX_DAYS), read per request so the schema's
        minimum and maximum are the ones this server checks."""
        fields = super().get_fields()
        uses, days = settings.INVITE_MAX_USES, settings.INVITE_MAX_DAYS
        fields["max_uses"] = serializers.IntegerField(
            min_value=1,
            max_value=uses,
            default=1,
            error_messages=_range(1, uses),
            help_text=f"People the link may admit, 1 to {uses} (INVITE_MAX_USES).",
        )
        fields["expires_in_days"] = serializers.IntegerField(
            min_value=1,
            max_value=days,
            required=False,
            error_messages=_range(1, days),
            help_text=f"Days the link works, 1 to {days} (INVITE_MAX_DAYS); omitted: INVITE_DEFAULT_DAYS.",
        )
        return fields


def _range(low: int, high: int) -> dict[str, Any]:
    message = f"must be a whole number from {low} to {high}"
    return {"min_value": message, "max_value": message}
