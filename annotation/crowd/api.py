"""The crowd payment record and the participant link's settings through the API: for the study's researchers
and staff, 404 for everyone else (as the participants page).

The same rows and summary as the participants page (crowd/selectors.py); panel IDs
appear because this is what a researcher pays against on the panel. The settings go through
`services.configure_link`, the one home of their rules, as the page's form does; the token is
never written through them (`rotate` replaces it).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.crowd.link_fields import help_text
from annotation.crowd.manage_views import link_url
from annotation.crowd.selectors import check_need, link_warnings, payment_rows, payment_summary
from annotation.crowd.services import (
    MAX_CHECK_ITEMS,
    MAX_CONSENT,
    MAX_NUMBER,
    MAX_REDIRECT_URL,
    close_overdue,
    configure_link,
    link_for,
    rotate_link,
)
from annotation.errors import ServiceError
from annotation.lib.api_errors import bad_request
from annotation.lib.strict import StrictSerializer
from annotation.models import ParticipantLink
from annotation.permissions import IsStudyManager, StudyScoped


class PaymentRowSerializer(serializers.Serializer):
    panel_id = serializers.CharField()
    pseudonym = serializers.CharField()
    status = serializers.CharField(help_text="consent, instructions, qualifying, working, completed, screened_out, ...")
    items_done = serializers.IntegerField()
    checks_passed = serializers.IntegerField()
    checks_failed = serializers.IntegerField()
    active_minutes = serializers.FloatField()
    wall_minutes = serializers.FloatField()
    pay = serializers.DecimalField(
        max_digits=12, decimal_places=2, help_text="At the link's rate, on the time its pay_basis names."
    )
    currency = serializers.CharField(help_text="ISO 4217 code of the pay, e.g. GBP.")
    code = serializers.CharField(help_text="The completion code their end gave them (empty while working).")


class PaymentSummarySerializer(serializers.Serializer):
    participants = serializers.IntegerField()
    by_status = serializers.DictField(child=serializers.IntegerField())
    median_active_minutes_per_item = serializers.FloatField(allow_null=True)
    cost_so_far = serializers.DecimalField(max_digits=14, decimal_places=2)
    projected_total_cost = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True)
    currency = serializers.CharField(help_text="ISO 4217 code of every amount here, e.g. GBP.")
    pay_basis = serializers.ChoiceField(
        choices=ParticipantLink.PayBasis.choices,
        help_text="The time the pay column is for: active (items and checks) or wall (arrival to the end).",
    )


class PaymentRecordSerializer(serializers.Serializer):
    summary = PaymentSummarySerializer()
    participants = PaymentRowSerializer(many=True)
    warnings = serializers.ListField(
        child=serializers.CharField(),
        help_text=(
            "What the link's settings cannot keep, as on the participants page: e.g. fewer attention-check "
            "items than a full quota's checks (each is shown to a participant once)."
        ),
    )


class ParticipantPayments(StudyScoped, APIView):
    """Per-participant payment record (active and wall minutes, pay at the link's rate), the study summary,
    and warnings on the link's settings."""

    permission_classes = [IsStudyManager]

    @extend_schema(responses={200: PaymentRecordSerializer})
    def get(self, request: Request, slug: str) -> Response:
        link = link_for(self.study)
        close_overdue(study=self.study, link=link)
        rows = payment_rows(self.study, link)
        record = {
            "summary": payment_summary(self.study, link, rows),
            "participants": rows,
            "warnings": link_warnings(link),
        }
        return Response(PaymentRecordSerializer(record).data)


# --- the participant link's settings ------------------------------------------------------


class CheckNeedSerializer(serializers.Serializer):
    chosen = serializers.IntegerField(help_text="Items on the list.")
    usable = serializers.IntegerField(
        help_text="Of them, those that count (an attention item that is also a qualification item does not)."
    )
    needed = serializers.IntegerField(
        help_text="The fewest usable items the settings ask for: the pass mark, or (quota - 1) // every."
    )
    short = serializers.BooleanField(help_text="Fewer usable items than needed.")
    explanation = serializers.CharField()


class CheckNeedsSerializer(serializers.Serializer):
    qualification = CheckNeedSerializer()
    attention = CheckNeedSerializer()


def _count(name: str, *, minimum: int, nullable: bool = False) -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False, allow_null=nullable, min_value=minimum, max_value=MAX_NUMBER, help_text=help_text(name)
    )


def _text(name: str, *, max_length: int, blank: bool = True) -> serializers.CharField:
    return serializers.CharField(
        required=False, allow_blank=blank, max_length=max_length, trim_whitespace=False, help_text=help_text(name)
    )


def _ids(name: str) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=200, trim_whitespace=False),
        required=False,
        max_length=MAX_CHECK_ITEMS,
        help_text=help_text(name) + " External ids of the study's gold items, in the order participants meet them.",
    )


class ParticipantLinkSettingsSerializer(StrictSerializer):
    """The link's settings: every writable one may be given alone (PATCH); the rest are read only."""

    enabled = serializers.BooleanField(required=False, help_text=help_text("enabled"))
    max_participants = _count("max_participants", minimum=1, nullable=True)
    pid_param = _text("pid_param", max_length=64, blank=False)
    study_param = _text("study_param", max_length=64)
    session_param = _text("session_param", max_length=64)
    consent = _text("consent", max_length=MAX_CONSENT)
    items_per_participant = _count("items_per_participant", minimum=1)
    budget_minutes = _count("budget_minutes", minimum=1, nullable=True)
    qualification_items = _ids("qualification_items")
    qualification_pass = _count("qualification_pass", minimum=0)
    attention_items = _ids("attention_items")
    attention_every = _count("attention_every", minimum=0)
    attention_fail_limit = _count("attention_fail_limit", minimum=1)
    time_limit_minutes = _count("time_limit_minutes", minimum=1)
    code_completed = _text("code_completed", max_length=64)
    code_screened_out = _text("code_screened_out", max_length=64)
    code_timed_out = _text("code_timed_out", max_length=64)
    code_full = _text("code_full", max_length=64)
    redirect_url = _text("redirect_url", max_length=MAX_REDIRECT_URL)
    pay_per_hour = serializers.DecimalField(
        required=False, max_digits=8, decimal_places=2, min_value=0, help_text=help_text("pay_per_hour")
    )
    currency = _text("currency", max_length=3, blank=False)
    pay_basis = serializers.ChoiceField(
        choices=ParticipantLink.PayBasis.choices, required=False, help_text=help_text("pay_basis")
    )
    token = serializers.CharField(
        read_only=True, help_text="The link's secret part; never written here: POST .../participants/link/rotate."
    )
    url = serializers.CharField(
        read_only=True, help_text="The link to paste into the panel, with the panel's placeholders for the IDs."
    )
    rotated_at = serializers.DateTimeField(read_only=True, allow_null=True)
    checks = CheckNeedsSerializer(read_only=True, help_text="What each check list holds against what it needs.")
    warnings = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="As on the page: settings the check items cannot keep."
    )


def _settings_body(request: Request, link: ParticipantLink) -> dict[str, Any]:
    body = ParticipantLinkSettingsSerializer(link).data
    body["url"] = link_url(request, link)
    body["checks"] = {which: _need(link, which) for which in ("qualification", "attention")}
    body["warnings"] = link_warnings(link)
    return body


def _need(link: ParticipantLink, which: str) -> dict[str, Any]:
    need = check_need(link, which)
    return {
        "chosen": need.chosen,
        "usable": need.usable,
        "needed": need.needed,
        "short": need.short,
        "explanation": need.explanation,
    }


class ParticipantLinkSettings(StudyScoped, APIView):
    """The study's participant link: its settings (GET), a change of any of them (PATCH: all or none, the
    refusal naming the setting, by the rules of the participants page's form)."""

    permission_classes = [IsStudyManager]

    @extend_schema(responses={200: ParticipantLinkSettingsSerializer})
    def get(self, request: Request, slug: str) -> Response:
        return Response(_settings_body(request, link_for(self.study)))

    @extend_schema(request=ParticipantLinkSettingsSerializer, responses={200: ParticipantLinkSettingsSerializer})
    def patch(self, request: Request, slug: str) -> Response:
        given = ParticipantLinkSettingsSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            link = configure_link(study=self.study, changes=dict(given.validated_data))
        except ServiceError as exc:
            return bad_request(str(exc))
        return Response(_settings_body(request, link))


class ParticipantLinkRotate(StudyScoped, APIView):
    """A new link: the old one stops working at once (people already in carry on); the answer has the new one."""

    permission_classes = [IsStudyManager]

    @extend_schema(request=None, responses={200: ParticipantLinkSettingsSerializer})
    def post(self, request: Request, slug: str) -> Response:
        return Response(_settings_body(request, rotate_link(study=self.study)))
