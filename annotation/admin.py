"""Django admin for researchers and staff: list columns, filters and search that help."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from annotation.models import (
    AccountOrigin,
    Annotation,
    AnnotationRevision,
    Assignment,
    ExportJob,
    ImportJob,
    Invite,
    Item,
    Participant,
    ParticipantCheck,
    ParticipantLink,
    PasswordReset,
    Study,
    StudyChange,
    StudyMember,
)

if TYPE_CHECKING:  # django-stubs-ext is a development dependency
    from django_stubs_ext import WithAnnotations


class ItemCount(TypedDict):
    n_items: int


class StudyMemberInline(admin.TabularInline):
    model = StudyMember
    extra = 0
    fields = ("user", "role", "pseudonym", "is_external", "is_active")
    raw_id_fields = ("user",)


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "kind", "status", "annotators_per_item", "item_count", "created_at")
    list_filter = ("kind", "status", "evidence_judgements", "justification_required")
    search_fields = ("slug", "name")
    readonly_fields = ("created_at", "updated_at")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [StudyMemberInline]
    fieldsets = (
        (None, {"fields": ("slug", "name", "kind", "status", "instructions")}),
        ("Labels", {"fields": ("labels", "label_aliases", "binary_map", "systems")}),
        (
            "Design",
            {
                "fields": (
                    "annotators_per_item",
                    "seed",
                    "evidence_judgements",
                    "justification_required",
                    "tie_allowed",
                    "both_bad_allowed",
                    "irrelevant_in_credibility",
                    "gold_in_agreement",
                    "checks_in_agreement",
                )
            },
        ),
        ("History", {"fields": ("created_by", "created_at", "updated_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Study]:
        return super().get_queryset(request).annotate(n_items=Count("items"))

    @admin.display(description="items", ordering="n_items")
    def item_count(self, study: WithAnnotations[Study, ItemCount]) -> int:
        """`study` comes from get_queryset, which counts its items."""
        return study.n_items


@admin.register(StudyChange)
class StudyChangeAdmin(admin.ModelAdmin):
    """The change log is evidence of how labels were collected: read it here, never edit it."""

    list_display = ("study", "field", "changed_by", "changed_at")
    list_filter = ("field", "study")
    list_select_related = ("study", "changed_by")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: StudyChange | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: StudyChange | None = None) -> bool:
        return False


@admin.register(StudyMember)
class StudyMemberAdmin(admin.ModelAdmin):
    list_display = ("pseudonym", "user", "study", "role", "is_external", "is_active", "created_at")
    list_filter = ("role", "is_external", "is_active", "study")
    search_fields = ("pseudonym", "user__username", "study__slug")
    raw_id_fields = ("user",)
    list_select_related = ("user", "study")


@admin.register(Invite)
class InviteAdmin(admin.ModelAdmin):
    """Invites are made on the members page (the link is shown once there); here they can be read and revoked."""

    list_display = ("prefix", "study", "role", "uses", "max_uses", "expires_at", "revoked_at", "created_by")
    list_filter = ("role", "study")
    search_fields = ("prefix", "study__slug")
    readonly_fields = ("study", "token_hash", "prefix", "role", "max_uses", "uses", "created_by", "created_at")
    list_select_related = ("study", "created_by")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("external_id", "study", "domain", "summary", "system", "gold_label", "slots_taken")
    list_filter = ("study", "domain", "system")
    search_fields = ("external_id", "summary", "response_id")
    list_select_related = ("study",)
    readonly_fields = ("created_at", "updated_at")
    show_full_result_count = False


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "item",
        "annotator",
        "slot",
        "status",
        "left_system",
        "lease_expires_at",
        "flagged",
        "submitted_at",
    )
    list_filter = ("status", "flagged", "study")
    search_fields = ("item__external_id", "annotator__username")
    raw_id_fields = ("item", "annotator")
    list_select_related = ("item", "annotator")
    show_full_result_count = False


class AnnotationRevisionInline(admin.TabularInline):
    model = AnnotationRevision
    extra = 0
    readonly_fields = ("old_value", "new_value", "changed_by", "changed_at")
    can_delete = False


@admin.register(Annotation)
class AnnotationAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "item_id_display",
        "annotator_display",
        "label",
        "raw_label",
        "preferred_system",
        "strength",
        "source",
        "updated_at",
    )
    list_filter = ("source", "label", "assignment__study")
    search_fields = ("assignment__item__external_id", "label", "raw_label", "justification")
    raw_id_fields = ("assignment",)
    list_select_related = ("assignment__item", "assignment__annotator")
    inlines = [AnnotationRevisionInline]
    show_full_result_count = False

    @admin.display(description="item", ordering="assignment__item__external_id")
    def item_id_display(self, annotation: Annotation) -> str:
        return annotation.assignment.item.external_id

    @admin.display(description="annotator", ordering="assignment__annotator__username")
    def annotator_display(self, annotation: Annotation) -> str:
        return annotation.assignment.annotator.get_username()


@admin.register(AnnotationRevision)
class AnnotationRevisionAdmin(admin.ModelAdmin):
    list_display = ("annotation", "changed_by", "changed_at")
    search_fields = ("annotation__assignment__item__external_id",)
    raw_id_fields = ("annotation", "changed_by")


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = (
        "file_name",
        "study",
        "what",
        "status",
        "created",
        "updated",
        "error_count",
        "created_by",
        "created_at",
    )
    list_filter = ("status", "what", "study")
    search_fields = ("file_name", "study__slug")
    readonly_fields = ("errors",)


@admin.register(ExportJob)
class ExportJobAdmin(admin.ModelAdmin):
    list_display = ("study", "file_format", "status", "rows", "created_by", "created_at", "finished_at")
    list_filter = ("status", "file_format", "study")
    search_fields = ("study__slug",)
    readonly_fields = ("file_path", "error", "rows")


@admin.register(ParticipantLink)
class ParticipantLinkAdmin(admin.ModelAdmin):
    """Participant links are set up on the study's participants page; here they can be read."""

    list_display = ("study", "enabled", "max_participants", "items_per_participant", "time_limit_minutes", "created_at")
    list_filter = ("enabled",)
    search_fields = ("study__slug",)
    list_select_related = ("study",)
    readonly_fields = ("study", "token", "rotated_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ("member", "panel_id", "study", "status", "checks_passed", "checks_failed", "created_at")
    list_filter = ("status", "study")
    search_fields = ("panel_id", "member__pseudonym", "study__slug")
    list_select_related = ("member", "study")
    readonly_fields = ("study", "member", "panel_id", "panel_study_id", "panel_session_id")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(ParticipantCheck)
class ParticipantCheckAdmin(admin.ModelAdmin):
    list_display = ("participant", "item", "kind", "label", "correct", "answered_at")
    list_filter = ("kind", "correct")
    search_fields = ("participant__panel_id", "item__external_id")
    list_select_related = ("participant", "item")
    raw_id_fields = ("participant", "item")


@admin.register(PasswordReset)
class PasswordResetAdmin(admin.ModelAdmin):
    """Password resets by studies' researchers (issue 31): who reset whose account, when, from where.
    Evidence, so read-only: nobody adds, edits or deletes a row here."""

    list_display = ("created_at", "study", "researcher_username", "account_username", "pseudonym", "ip_address")
    list_filter = ("study",)
    search_fields = ("researcher_username", "account_username", "pseudonym")
    list_select_related = ("study",)
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: PasswordReset | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: PasswordReset | None = None) -> bool:
        return False


@admin.register(AccountOrigin)
class AccountOriginAdmin(admin.ModelAdmin):
    """Which study made an account (the study's researchers may reset only those passwords); read-only."""

    list_display = ("user", "study", "how", "created_at")
    list_filter = ("how", "study")
    search_fields = ("user__username",)
    list_select_related = ("user", "study")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AccountOrigin | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AccountOrigin | None = None) -> bool:
        return False
