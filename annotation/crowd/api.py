"""The crowd payment record through the API: for the study's researchers and staff, 404 for everyone else.

The same rows and summary as the participants page (crowd/selectors.py); panel IDs
appear because this is what a researcher pays against on the panel.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.crowd.selectors import link_warnings, payment_rows, payment_summary
from annotation.crowd.services import close_overdue, link_for
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
    pay = serializers.DecimalField(max_digits=12, decimal_places=2)
    code = serializers.CharField(help_text="The completion code their end gave them (empty while working).")


class PaymentSummarySerializer(serializers.Serializer):
    participants = serializers.IntegerField()
    by_status = serializers.DictField(child=serializers.IntegerField())
    median_active_minutes_per_item = serializers.FloatField(allow_null=True)
    cost_so_far = serializers.DecimalField(max_digits=14, decimal_places=2)
    projected_total_cost = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True)


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
