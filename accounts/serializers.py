"""Shapes of the token API; the key appears only in IssuedTokenSerializer (once, at creation)."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from annotation.lib.strict import StrictSerializer

from .models import ApiToken


class TokenRequestSerializer(StrictSerializer):
    """A username and password for a new token; a field it does not know is refused by name."""

    username = serializers.CharField()
    password = serializers.CharField(style={"input_type": "password"}, trim_whitespace=False)
    name = serializers.CharField(required=False, allow_blank=True, max_length=100, default="")

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # The range is the operator's (API_TOKEN_MAX_DAYS), read per request so the schema's maximum is true.
        limit = settings.API_TOKEN_MAX_DAYS
        message = f"must be a whole number from 1 to {limit}"
        fields["expires_in_days"] = serializers.IntegerField(
            required=False,
            allow_null=True,
            min_value=1,
            max_value=limit,
            error_messages={"min_value": message, "max_value": message},
            help_text=f"Days until the token stops working, 1 to {limit}; omitted: API_TOKEN_DEFAULT_DAYS "
            "(none: never).",
        )
        return fields


class TokenSerializer(serializers.ModelSerializer):
    status = serializers.CharField(read_only=True, help_text="active, expired or revoked")

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created", "last_used", "expires_at", "revoked_at", "status"]
        read_only_fields = fields


class IssuedTokenSerializer(TokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The key: shown this once, never stored in clear.")

    class Meta(TokenSerializer.Meta):
        fields = ["token", *TokenSerializer.Meta.fields]
        read_only_fields = fields


class LockoutSerializer(serializers.Serializer):
    """The one error shape (detail, code), with the seconds to wait."""

    detail = serializers.CharField()
    code = serializers.CharField(help_text="throttled")
    retry_after = serializers.IntegerField(help_text="Seconds until the client may try again.")
