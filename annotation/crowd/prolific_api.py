"""Prolific through the API (issue 34), under the study's crowd routes: /api/studies/<slug>/participants/prolific...

For the study's researchers and staff (IsStudyManager: 404 for everyone else); as thin as the page,
the rules in prolific_services.py. The token goes in with PUT and never comes out: answers say only
whether one is set. A refusal by Prolific (a 4xx there, e.g. the token or a transition refused) is a
400 with code ``prolific_refused``; Prolific failing or not answering (5xx, not JSON, a timeout, the
network) is a 502 with code ``prolific_failed``; a study not connected is a 409
``prolific_not_connected``; a bonus confirmation that no longer matches the set is a 409
``confirmation_stale``.
"""

from __future__ import annotations

from typing import Any

from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.crowd import prolific_services as prolific
from annotation.crowd.prolific_client import MIN_REJECTION_MESSAGE, REJECTION_CATEGORIES, ProlificError
from annotation.crowd.prolific_selectors import connection, prolific_calls
from annotation.crowd.services import link_for
from annotation.errors import ServiceError
from annotation.http import logged_in_user
from annotation.lib.strict import StrictSerializer
from annotation.permissions import IsStudyManager, StudyScoped

REFUSED = OpenApiResponse(description="Invalid input, or Prolific refused the request (`prolific_refused`).")
FAILED = OpenApiResponse(description="Prolific failed, did not answer or answered other than documented.")
NOT_CONNECTED = OpenApiResponse(description="The study is not connected to Prolific (`prolific_not_connected`).")


def refusal(exc: ServiceError) -> Response:
    """A service's refusal in the one error shape, with the status that says whose it is."""
    if isinstance(exc, prolific.NotConnected):
        return Response({"detail": str(exc), "code": "prolific_not_connected"}, status=409)
    if isinstance(exc, prolific.StaleConfirmation):
        return Response({"detail": str(exc), "code": "confirmation_stale"}, status=409)
    if isinstance(exc, ProlificError):
        if exc.kind == "refused":
            return Response({"detail": str(exc), "code": "prolific_refused"}, status=400)
        return Response({"detail": str(exc), "code": "prolific_failed"}, status=502)
    return Response({"detail": str(exc), "code": "invalid"}, status=400)


# --- bodies ---------------------------------------------------------------------------------------


class ConnectionSerializer(serializers.Serializer):
    connected = serializers.BooleanField()
    study_id = serializers.CharField(help_text="The Prolific study id ('' when not connected).")
    token_set = serializers.BooleanField(help_text="Whether a token is stored; the token itself is never returned.")


class ConnectRequestSerializer(StrictSerializer):
    study_id = serializers.CharField(max_length=64, help_text="The Prolific study id, e.g. 60f6acb180a7b59ac0621f9e.")
    token = serializers.CharField(
        max_length=512, write_only=True, help_text="A Prolific API token; tested on the study, then stored encrypted."
    )


class ConnectionCheckSerializer(serializers.Serializer):
    study_id = serializers.CharField()
    name = serializers.CharField(help_text="The study's name on Prolific.")
    status = serializers.CharField(help_text="The study's status on Prolific (ACTIVE, COMPLETED, ...).")


class SuggestionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["approve", "reject", "review", "wait", "none"])
    reason = serializers.CharField()
    category = serializers.CharField(help_text="For a suggested rejection: Prolific's category; else ''.")


class SubmissionSerializer(serializers.Serializer):
    submission_id = serializers.CharField()
    panel_id = serializers.CharField(help_text="The participant's Prolific ID (PROLIFIC_PID).")
    prolific_status = serializers.CharField(help_text="AWAITING REVIEW, APPROVED, REJECTED, RETURNED, ACTIVE, ...")
    started_at = serializers.CharField()
    completed_at = serializers.CharField()
    study_code = serializers.CharField()
    pseudonym = serializers.CharField(help_text="'' for a submission with no Claimlab participant.")
    outcome = serializers.CharField(help_text="Claimlab's status: completed, screened_out, timed_out, ... ('' none).")
    checks_passed = serializers.IntegerField(allow_null=True)
    checks_failed = serializers.IntegerField(allow_null=True)
    attention_failed = serializers.IntegerField()
    active_minutes = serializers.FloatField(allow_null=True)
    wall_minutes = serializers.FloatField(allow_null=True)
    pay = serializers.DecimalField(max_digits=12, decimal_places=2, allow_null=True)
    bonus = serializers.CharField(allow_null=True, help_text="A bonus from Claimlab: paid, pending, unknown; or null.")
    suggestion = SuggestionSerializer()


class SubmissionListSerializer(serializers.Serializer):
    currency = serializers.CharField()
    awaiting_review = serializers.IntegerField()
    submissions = SubmissionSerializer(many=True)
    unmatched = serializers.ListField(
        child=serializers.CharField(), help_text="Prolific IDs of Claimlab participants with no submission there."
    )


class ApproveRequestSerializer(StrictSerializer):
    submission_ids = serializers.ListField(child=serializers.CharField(max_length=64), min_length=1, max_length=500)


class RejectRequestSerializer(ApproveRequestSerializer):
    rejection_category = serializers.ChoiceField(choices=list(REJECTION_CATEGORIES))
    message = serializers.CharField(
        help_text=f"Sent to the participant; Prolific requires at least {MIN_REJECTION_MESSAGE} characters."
    )


class DoneSerializer(serializers.Serializer):
    submission_id = serializers.CharField()
    status = serializers.CharField()


class FailedSerializer(serializers.Serializer):
    submission_id = serializers.CharField()
    error = serializers.CharField()


class ReviewResultSerializer(serializers.Serializer):
    action = serializers.CharField()
    done = DoneSerializer(many=True)
    failed = FailedSerializer(many=True)
    not_sent = serializers.ListField(child=serializers.CharField())


class BonusRuleSerializer(StrictSerializer):
    basis = serializers.ChoiceField(
        choices=list(prolific.BASES), help_text="pay: the payment table's pay less `amount`; fixed: `amount` each."
    )
    amount = serializers.DecimalField(max_digits=8, decimal_places=2, min_value=0, max_value=prolific.MAX_BONUS)
    panel_ids = serializers.ListField(
        child=serializers.CharField(max_length=64),
        required=False,
        allow_empty=False,
        help_text="Only these Prolific IDs; absent: everyone eligible.",
    )


class BonusPayRequestSerializer(BonusRuleSerializer):
    confirmation = serializers.CharField(max_length=64, help_text="The preview's `confirmation`.")


class BonusLineSerializer(serializers.Serializer):
    panel_id = serializers.CharField()
    pseudonym = serializers.CharField()
    amount = serializers.DecimalField(max_digits=12, decimal_places=2)


class LeftOutSerializer(serializers.Serializer):
    panel_id = serializers.CharField()
    reason = serializers.CharField()


class BonusPreviewSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    total = serializers.DecimalField(max_digits=14, decimal_places=2)
    currency = serializers.CharField()
    confirmation = serializers.CharField(help_text="Give it back to pay exactly this set.")
    bonuses = BonusLineSerializer(many=True)
    left_out = LeftOutSerializer(many=True)


class BonusPaymentSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    total = serializers.DecimalField(max_digits=14, decimal_places=2)
    currency = serializers.CharField()
    bulk_id = serializers.CharField(help_text="Prolific's bulk bonus payment id.")
    prolific = serializers.DictField(help_text="Prolific's set-up answer: amount, fees, vat, total_amount.")
    note = serializers.CharField()


class CallSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    made_by = serializers.CharField(allow_null=True, source="made_by.username", default=None)
    method = serializers.CharField()
    path = serializers.CharField()
    request_body = serializers.JSONField(allow_null=True)
    status_code = serializers.IntegerField(allow_null=True)
    response_body = serializers.JSONField(allow_null=True)
    error = serializers.CharField()
    duration_ms = serializers.IntegerField(allow_null=True)


class CallListSerializer(serializers.Serializer):
    calls = CallSerializer(many=True)


# --- views ------------------------------------------------------------------------------------------


def _connection_body(study: Any) -> dict[str, Any]:
    state = connection(link_for(study))
    return {"connected": state.connected, "study_id": state.study_id, "token_set": state.token_set}


class ProlificConnection(StudyScoped, APIView):
    """GET: whether the study is connected to a Prolific study. PUT: connect (the token is tested on the
    study first, then stored encrypted; never returned). DELETE: disconnect (the token is deleted)."""

    permission_classes = [IsStudyManager]

    @extend_schema(responses={200: ConnectionSerializer})
    def get(self, request: Request, slug: str) -> Response:
        return Response(ConnectionSerializer(_connection_body(self.study)).data)

    @extend_schema(
        request=ConnectRequestSerializer,
        responses={200: ConnectionCheckSerializer, 400: REFUSED, 502: FAILED},
    )
    def put(self, request: Request, slug: str) -> Response:
        given = ConnectRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            check = prolific.connect(
                study=self.study,
                user=logged_in_user(request),
                study_id=given.validated_data["study_id"],
                token=given.validated_data["token"],
            )
        except ServiceError as exc:
            return refusal(exc)
        return Response(ConnectionCheckSerializer(check).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str) -> Response:
        prolific.disconnect(study=self.study)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProlificConnectionTest(StudyScoped, APIView):
    """Test the stored connection: read the Prolific study with the stored token (one logged call)."""

    permission_classes = [IsStudyManager]

    @extend_schema(
        request=None, responses={200: ConnectionCheckSerializer, 400: REFUSED, 409: NOT_CONNECTED, 502: FAILED}
    )
    def post(self, request: Request, slug: str) -> Response:
        try:
            check = prolific.check_connection(study=self.study, user=logged_in_user(request))
        except ServiceError as exc:
            return refusal(exc)
        return Response(ConnectionCheckSerializer(check).data)


class ProlificSubmissions(StudyScoped, APIView):
    """The Prolific study's submissions, each with its Claimlab participant (by Prolific ID): how they
    ended, their checks, active and wall minutes, pay, any bonus from Claimlab, and a suggested action."""

    permission_classes = [IsStudyManager]

    @extend_schema(responses={200: SubmissionListSerializer, 400: REFUSED, 409: NOT_CONNECTED, 502: FAILED})
    def get(self, request: Request, slug: str) -> Response:
        try:
            table = prolific.fetch_submissions(study=self.study, user=logged_in_user(request))
        except ServiceError as exc:
            return refusal(exc)
        rows = [
            {
                "submission_id": row.submission_id,
                "panel_id": row.panel_id,
                "prolific_status": row.prolific_status,
                "started_at": row.started_at,
                "completed_at": row.completed_at,
                "study_code": row.study_code,
                "pseudonym": row.pseudonym,
                "outcome": row.outcome,
                "checks_passed": row.payment.checks_passed if row.payment else None,
                "checks_failed": row.payment.checks_failed if row.payment else None,
                "attention_failed": row.attention_failed,
                "active_minutes": row.payment.active_minutes if row.payment else None,
                "wall_minutes": row.payment.wall_minutes if row.payment else None,
                "pay": row.payment.pay if row.payment else None,
                "bonus": row.bonus.state if row.bonus else None,
                "suggestion": {
                    "action": row.suggestion.action,
                    "reason": row.suggestion.reason,
                    "category": row.suggestion.category,
                },
            }
            for row in table.rows
        ]
        body = {
            "currency": link_for(self.study).currency,
            "awaiting_review": table.awaiting_review,
            "submissions": rows,
            "unmatched": [row.panel_id for row in table.unmatched],
        }
        return Response(SubmissionListSerializer(body).data)


def _review(view: StudyScoped, request: Request, action: str, given: ApproveRequestSerializer) -> Response:
    given.is_valid(raise_exception=True)
    data = given.validated_data
    try:
        result = prolific.review(
            study=view.study,
            user=logged_in_user(request),
            action=action,
            submission_ids=data["submission_ids"],
            category=data.get("rejection_category", ""),
            message=data.get("message", ""),
        )
    except ServiceError as exc:
        return refusal(exc)
    body = {
        "action": result.action,
        "done": [{"submission_id": sid, "status": state} for sid, state in result.done],
        "failed": [{"submission_id": sid, "error": why} for sid, why in result.failed],
        "not_sent": result.not_sent,
    }
    return Response(ReviewResultSerializer(body).data)


REVIEWED = OpenApiResponse(
    ReviewResultSerializer,
    description="Sent: what Prolific did with each (`done`), refused (`failed`, with its reason), and what was not "
    "sent after a failure that would repeat (`not_sent`).",
)


class ProlificApprove(StudyScoped, APIView):
    """Approve submissions awaiting review (one transition call each, each logged)."""

    permission_classes = [IsStudyManager]

    @extend_schema(
        request=ApproveRequestSerializer, responses={200: REVIEWED, 400: REFUSED, 409: NOT_CONNECTED, 502: FAILED}
    )
    def post(self, request: Request, slug: str) -> Response:
        return _review(self, request, "approve", ApproveRequestSerializer(data=request.data))


class ProlificReject(StudyScoped, APIView):
    """Reject submissions awaiting review with one of Prolific's categories and a message of at least 100
    characters (checked before anything is sent)."""

    permission_classes = [IsStudyManager]

    @extend_schema(
        request=RejectRequestSerializer, responses={200: REVIEWED, 400: REFUSED, 409: NOT_CONNECTED, 502: FAILED}
    )
    def post(self, request: Request, slug: str) -> Response:
        return _review(self, request, "reject", RejectRequestSerializer(data=request.data))


def _rule(data: dict[str, Any]) -> prolific.BonusRule:
    return prolific.check_rule(data["basis"], data["amount"], data.get("panel_ids"))


class ProlificBonusPreview(StudyScoped, APIView):
    """The exact bonuses a payment with this rule would make now: who, how much, the total in the link's
    currency, and the `confirmation` that pays exactly this set. Sends nothing to Prolific but the read."""

    permission_classes = [IsStudyManager]

    @extend_schema(
        request=BonusRuleSerializer,
        responses={200: BonusPreviewSerializer, 400: REFUSED, 409: NOT_CONNECTED, 502: FAILED},
    )
    def post(self, request: Request, slug: str) -> Response:
        given = BonusRuleSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            preview = prolific.bonus_preview(
                study=self.study, user=logged_in_user(request), rule=_rule(given.validated_data)
            )
        except ServiceError as exc:
            return refusal(exc)
        body = {
            "count": preview.count,
            "total": preview.total,
            "currency": preview.currency,
            "confirmation": preview.confirmation,
            "bonuses": [line.__dict__ for line in preview.lines],
            "left_out": [{"panel_id": pid, "reason": why} for pid, why in preview.left_out],
        }
        return Response(BonusPreviewSerializer(body).data)


class ProlificBonusPay(StudyScoped, APIView):
    """Pay the bonuses of a preview: the same rule and its `confirmation`. Refused (409 `confirmation_stale`)
    when the set is no longer the one previewed; participants bonused from Claimlab are never paid again."""

    permission_classes = [IsStudyManager]

    @extend_schema(
        request=BonusPayRequestSerializer,
        responses={
            200: BonusPaymentSerializer,
            400: REFUSED,
            409: OpenApiResponse(description="Not connected, or the confirmation is stale (`confirmation_stale`)."),
            502: FAILED,
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        given = BonusPayRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            payment = prolific.pay_bonuses(
                study=self.study,
                user=logged_in_user(request),
                rule=_rule(given.validated_data),
                confirmation=given.validated_data["confirmation"],
            )
        except ServiceError as exc:
            return refusal(exc)
        body = {
            "count": payment.preview.count,
            "total": payment.preview.total,
            "currency": payment.preview.currency,
            "bulk_id": payment.bulk_id,
            "prolific": payment.set_up,
            "note": payment.note,
        }
        return Response(BonusPaymentSerializer(body).data)


class ProlificCalls(StudyScoped, APIView):
    """The study's latest 200 calls to Prolific, newest first: what was sent (never the token) and the answer."""

    permission_classes = [IsStudyManager]

    @extend_schema(responses={200: CallListSerializer})
    def get(self, request: Request, slug: str) -> Response:
        return Response(CallListSerializer({"calls": list(prolific_calls(self.study, limit=200))}).data)


#: The routes, spread into annotation/api_urls.py beside the crowd payment record.
urlpatterns = [
    path("studies/<slug:slug>/participants/prolific", ProlificConnection.as_view(), name="api-prolific-connection"),
    path("studies/<slug:slug>/participants/prolific/test", ProlificConnectionTest.as_view(), name="api-prolific-test"),
    path(
        "studies/<slug:slug>/participants/prolific/submissions",
        ProlificSubmissions.as_view(),
        name="api-prolific-submissions",
    ),
    path("studies/<slug:slug>/participants/prolific/approve", ProlificApprove.as_view(), name="api-prolific-approve"),
    path("studies/<slug:slug>/participants/prolific/reject", ProlificReject.as_view(), name="api-prolific-reject"),
    path(
        "studies/<slug:slug>/participants/prolific/bonuses/preview",
        ProlificBonusPreview.as_view(),
        name="api-prolific-bonus-preview",
    ),
    path(
        "studies/<slug:slug>/participants/prolific/bonuses/pay",
        ProlificBonusPay.as_view(),
        name="api-prolific-bonus-pay",
    ),
    path("studies/<slug:slug>/participants/prolific/calls", ProlificCalls.as_view(), name="api-prolific-calls"),
]
