"""Shapes of the token API; the key appears only in IssuedTokenSerializer (once, at creation)."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from .models import ApiToken


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField()
    password = serializers.CharField(style={"input_type": "password"}, trim_whitespace=False)
    name = serializers.CharField(required=False, allow_blank=True, max_length=100, default="")
    expires_in_days = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Days until the token stops working; omitted: API_TOKEN_DEFAULT_DAYS (none: never).",
    )

    def validate_expires_in_days(self, value: int | None) -> int | None:
        if value is not None and value > settings.API_TOKEN_MAX_DAYS:
            raise serializers.ValidationError(f"At most {settings.API_TOKEN_MAX_DAYS} days.")
        return value


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
    detail = serializers.CharField()
    retry_after = serializers.IntegerField(help_text="Seconds until the client may try again.")
