"""DRF endpoints of the annotation app; thin like the HTML views."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.errors import ServiceError
from annotation.http import logged_in_user
from annotation.lib.dblocks import repeat_safe
from annotation.models import Annotation, Assignment
from annotation.permissions import AssignmentScoped, IsAssignmentStudyMember, IsStudyMember, StudyScoped
from annotation.workbench import questionnaires, training
from annotation.workbench import services as assignments
from annotation.workbench.results import answer_result, next_in_result, next_result
from annotation.workbench.selectors import annotator_progress, display_payload
from annotation.workbench.serializers import (
    AnswerResultSerializer,
    FlagSerializer,
    NextAssignmentSerializer,
    QuestionnaireAnswerSerializer,
    QuestionnaireOutcomeSerializer,
    QuestionnaireSerializer,
    SubmitAnswerSerializer,
    SubmitResultSerializer,
    TrainingAnswerSerializer,
    TrainingFeedbackSerializer,
    TrainingItemSerializer,
)
from annotation.workbench.training import next_training_item

# --- annotating ------------------------------------------------------------------


def _errors(*codes: int) -> dict[int, OpenApiResponse]:
    """The refusals an annotating route declares; their body is the one error shape (lib/api_errors.py)."""
    described = {
        400: "The answer does not fit the study; `detail` says why.",
        403: "Not an annotator of this study, or the study is not open.",
        404: "No such study or assignment, or you are not a member of its study.",
        409: "The assignment is not yours (any more): its lease ran out and someone else took it, or it belongs to another annotator.",
        503: "Too many annotators claimed at once; try again (see Retry-After).",
    }
    return {code: OpenApiResponse(description=described[code]) for code in codes}


class AssignmentServiceView(StudyScoped, APIView):
    """Turns the assignment service's refusals into HTTP answers in the one error shape."""

    STATUS_FOR = (
        (assignments.LeaseLost, status.HTTP_409_CONFLICT, "lease_lost"),
        (assignments.NotAllowed, status.HTTP_403_FORBIDDEN, "permission_denied"),
        (assignments.ClaimContention, status.HTTP_503_SERVICE_UNAVAILABLE, "busy"),
        (ServiceError, status.HTTP_400_BAD_REQUEST, "invalid"),
    )

    def handle_exception(self, exc: Exception) -> Response:
        for kind, code, name in self.STATUS_FOR:
            if isinstance(exc, kind):
                retry = {"Retry-After": "1"} if code == status.HTTP_503_SERVICE_UNAVAILABLE else None
                return Response({"detail": str(exc), "code": name}, status=code, headers=retry)
        return super().handle_exception(exc)

    def result(self, assignment: Assignment) -> Response:
        return Response(answer_result(assignment, annotator_progress(logged_in_user(self.request), self.study)))


@repeat_safe  # a claim returns the user's current assignment
class NextAssignment(AssignmentServiceView):
    """Your current item, or the next one: the same assignment until you submit or skip it."""

    permission_classes = [IsStudyMember]

    @extend_schema(
        request=None,
        responses={
            200: NextAssignmentSerializer,
            204: OpenApiResponse(description="Nothing is left for you in this study."),
            **_errors(403, 404, 503),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        user = logged_in_user(request)
        due = questionnaires.due_before_items(user, self.study) if self.study.questionnaires else None
        if due is not None:
            return Response(
                {
                    "detail": "answer the study's questionnaire first: "
                    + (
                        "the comprehension quiz was not passed within its attempts"
                        if due == questionnaires.FAILED_QUIZ
                        else f"POST /api/studies/{self.study.slug}/questionnaires/{due}"
                    ),
                    "code": "questionnaire_first",
                },
                status=status.HTTP_409_CONFLICT,
            )
        if self.study.training and next_training_item(user, self.study) is not None:
            return Response(
                {
                    "detail": f"do the study's training first: GET /api/studies/{self.study.slug}/training/next",
                    "code": "training_first",
                },
                status=status.HTTP_409_CONFLICT,
            )
        assignment = assignments.claim_next(user=user, study=self.study)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(next_result(assignment, display_payload(assignment), annotator_progress(user, self.study)))


@repeat_safe  # an identical answer is left alone; `next` then returns the claim already made
class SubmitAssignment(AssignmentScoped, AssignmentServiceView):
    """Answer your assignment; again on an answered one to revise it (kept as a revision).

    With `next: true` the response also carries your next assignment, so a label is one round
    trip; the answer is stored whatever happens to the claim after it.
    """

    permission_classes = [IsAssignmentStudyMember]

    @extend_schema(
        request=SubmitAnswerSerializer, responses={200: SubmitResultSerializer, **_errors(400, 403, 404, 409, 503)}
    )
    def post(self, request: Request, assignment_id: int) -> Response:
        answer = SubmitAnswerSerializer.validated(request.data)
        user = logged_in_user(request)
        done, progress = assignments.submit_with_progress(
            user=user,
            study=self.study,
            assignment_id=self.assignment.pk,
            answer=SubmitAnswerSerializer.answer(answer),
            source=Annotation.Source.API,
            shown_left=self.assignment.left_system,
        )
        data = answer_result(done, progress)
        if not answer["next"]:
            return Response(data)
        try:
            following, holding_lost = assignments.next_after_submit(user, self.study, answer.get("holding"))
        except (assignments.ClaimContention, assignments.NotAllowed):
            # The answer is stored; `next` is left out and the client asks `assignments/next`, which says why.
            return Response(data)
        data["next"] = None if following is None else next_in_result(following, display_payload(following))
        if "holding" in answer:
            data["holding_lost"] = holding_lost
        return Response(data)


class SkipAssignment(AssignmentScoped, AssignmentServiceView):
    """Give your assignment back without answering: the slot goes to someone else."""

    permission_classes = [IsAssignmentStudyMember]

    @extend_schema(request=None, responses={200: AnswerResultSerializer, **_errors(403, 404, 409, 503)})
    def post(self, request: Request, assignment_id: int) -> Response:
        skipped = assignments.skip(user=logged_in_user(request), study=self.study, assignment_id=self.assignment.pk)
        return self.result(skipped)


class FlagAssignment(AssignmentScoped, AssignmentServiceView):
    """Flag the item of your assignment as a problem, with a reason; then answer or skip it."""

    permission_classes = [IsAssignmentStudyMember]

    @extend_schema(request=FlagSerializer, responses={200: AnswerResultSerializer, **_errors(400, 403, 404, 409)})
    def post(self, request: Request, assignment_id: int) -> Response:
        form = FlagSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        flagged = assignments.flag(
            user=logged_in_user(request),
            study=self.study,
            assignment_id=self.assignment.pk,
            reason=form.validated_data["reason"],
        )
        return self.result(flagged)


# --- training (annotation/workbench/training.py) -------------------------------------------


class NextTrainingItem(AssignmentServiceView):
    """Your next training item (the study's gold items met first, with feedback); 204 when none is left."""

    permission_classes = [IsStudyMember]

    @extend_schema(
        responses={
            200: TrainingItemSerializer,
            204: OpenApiResponse(description="No training item is left for you: claim items (assignments/next)."),
            **_errors(403, 404),
        }
    )
    def get(self, request: Request, slug: str) -> Response:
        user = logged_in_user(request)
        training.check_can_train(user, self.study)
        item = training.next_training_item(user, self.study)
        if item is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        left = training.training_left(user, self.study)
        shown = training.training_assignment(self.study, item, user)
        total = len(self.study.training)
        return Response(
            {"item": item.external_id, "display": display_payload(shown), "position": total - left + 1, "total": total}
        )


class AnswerTrainingItem(AssignmentServiceView):
    """Answer your current training item; the answer is scored against gold and not part of the study's data."""

    permission_classes = [IsStudyMember]

    @extend_schema(
        request=TrainingAnswerSerializer, responses={200: TrainingFeedbackSerializer, **_errors(400, 403, 404)}
    )
    def post(self, request: Request, slug: str) -> Response:
        form = TrainingAnswerSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        user = logged_in_user(request)
        item = training.next_training_item(user, self.study)
        if item is None or item.external_id != form.validated_data["item"]:
            raise ServiceError("that is not your current training item (GET training/next says which is)")
        feedback = training.answer_training(
            user=user, study=self.study, item=item, answer=SubmitAnswerSerializer.answer(form.validated_data)
        )
        return Response(
            {
                "correct": feedback.correct,
                "given": feedback.given,
                "expected": feedback.expected,
                "explanation": feedback.explanation,
                "remaining": feedback.remaining,
            }
        )


# --- questionnaires (annotation/workbench/questionnaires.py) -----------------------------------


class Questionnaire(AssignmentServiceView):
    """A questionnaire of the study (pre, quiz, post): its questions (GET; none when the study has none), or your
    answers (POST)."""

    permission_classes = [IsStudyMember]

    @extend_schema(responses={200: QuestionnaireSerializer, **_errors(403, 404)})
    def get(self, request: Request, slug: str, kind: str) -> Response:
        questions = self._questions(kind)
        user = logged_in_user(request)
        made, passed = questionnaires.quiz_attempts(user, self.study)
        due = (
            questionnaires.post_due(user, self.study)
            if kind == "post"
            else questionnaires.due_before_items(user, self.study) == kind
        )
        public = [{k: v for k, v in q.items() if k not in ("correct", "feedback")} for q in questions]
        return Response({"kind": kind, "questions": public, "due": due, "attempts_made": made, "passed": passed})

    @extend_schema(
        request=QuestionnaireAnswerSerializer, responses={200: QuestionnaireOutcomeSerializer, **_errors(400, 403, 404)}
    )
    def post(self, request: Request, slug: str, kind: str) -> Response:
        self._questions(kind)
        form = QuestionnaireAnswerSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        user = logged_in_user(request)
        training.check_can_train(user, self.study)
        outcome = questionnaires.answer_questionnaire(
            user=user, study=self.study, kind=kind, given=form.validated_data["answers"]
        )
        return Response(
            {
                "passed": outcome.response.passed,
                "attempt": outcome.response.attempt,
                "attempts_left": outcome.attempts_left,
                "wrong": [{"key": q["key"], "feedback": q["feedback"]} for q in outcome.wrong],
            }
        )

    def _questions(self, kind: str) -> list[dict]:
        from annotation.questions.questionnaires import questions_of

        # A study without this questionnaire: no questions (GET), and an answer is refused naming it (POST).
        return questions_of(self.study.questionnaires, kind)
