from django.contrib import admin
from django.http import HttpRequest

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Staff can see and revoke (set `revoked at`) any token; keys are never stored, so never shown."""

    list_display = ["prefix", "name", "user", "created", "last_used", "expires_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["user__username", "name", "prefix"]
    readonly_fields = ["user", "key_hash", "prefix", "created", "last_used"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a key is issued by the owner (page or API), who alone sees it once
