"""Questionnaires in the annotator's flow (issue 32): the pre-study questionnaire and the quiz before any item
(and before training), the post-study questionnaire once nothing is left to do.

The order is the same on the annotate page, the API and the crowd link: pre-study questionnaire,
comprehension quiz (passed, within its attempts: else no item is handed out, and a crowd
participant is screened out, the failures kept), training, the study's items, the post-study
questionnaire. Definitions: annotation/questions/questionnaires.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from annotation.errors import ServiceError
from annotation.lib.pseudonyms import pseudonyms
from annotation.models import QuestionnaireResponse, Study
from annotation.questions.answers import checked_question_answers
from annotation.questions.questionnaires import questions_of, wrong_answers

FAILED_QUIZ = "quiz_failed"


@dataclass
class Outcome:
    """What a questionnaire's answer led to: kept, and for the quiz whether it passed and what was wrong."""

    response: QuestionnaireResponse
    wrong: list[dict[str, Any]] = field(default_factory=list)
    attempts_left: int = 0


def _done(user: User, study: Study, kind: str) -> bool:
    return QuestionnaireResponse.objects.filter(study=study, respondent=user, kind=kind).exists()


def quiz_attempts(user: User, study: Study) -> tuple[int, bool]:
    """(attempts made, passed) at the study's quiz."""
    rows = QuestionnaireResponse.objects.filter(study=study, respondent=user, kind=QuestionnaireResponse.Kind.QUIZ)
    return rows.count(), rows.filter(passed=True).exists()


def due_before_items(user: User, study: Study) -> str | None:
    """ "pre" or "quiz" when that comes next, FAILED_QUIZ when its attempts ran out; None: on to the items."""
    questionnaires = study.questionnaires
    if not questionnaires:
        return None
    if questions_of(questionnaires, "pre") and not _done(user, study, "pre"):
        return "pre"
    if questions_of(questionnaires, "quiz"):
        made, passed = quiz_attempts(user, study)
        if not passed:
            return "quiz" if made < questionnaires["quiz"]["attempts"] else FAILED_QUIZ
    return None


def post_due(user: User, study: Study) -> bool:
    """Whether the post-study questionnaire waits for the user (asked once nothing is left to do)."""
    return bool(questions_of(study.questionnaires, "post")) and not _done(user, study, "post")


def answer_questionnaire(*, user: User, study: Study, kind: str, given: Any) -> Outcome:
    """Check and keep the answers to a questionnaire, or one attempt at the quiz; ServiceError naming the problem."""
    questions = questions_of(study.questionnaires, kind)
    if not questions:
        raise ServiceError(f"this study has no {kind} questionnaire")
    answers = checked_question_answers(questions, given)
    with transaction.atomic():
        if kind != "quiz":
            try:
                with transaction.atomic():
                    response = QuestionnaireResponse.objects.create(
                        study=study, respondent=user, kind=kind, answers=answers
                    )
            except IntegrityError:  # answered already (a second tab): the first answers stand
                response = QuestionnaireResponse.objects.get(study=study, respondent=user, kind=kind, attempt=1)
            return Outcome(response)
        made, passed = quiz_attempts(user, study)
        allowed = study.questionnaires["quiz"]["attempts"]
        if passed or made >= allowed:
            raise ServiceError("the quiz is passed already" if passed else "no attempt at the quiz is left")
        wrong = wrong_answers(questions, answers)
        response = QuestionnaireResponse.objects.create(
            study=study, respondent=user, kind=kind, attempt=made + 1, answers=answers, passed=not wrong
        )
    return Outcome(response, wrong=wrong, attempts_left=allowed - made - 1)


def questionnaire_rows(study: Study) -> list[dict[str, Any]]:
    """Every response, by pseudonym (no identity: the crowd's mapping CSV stays the only link): respondent, kind,
    attempt, passed, answered_at and one q_<key> per question of its questionnaire."""
    names = pseudonyms(study)
    rows = []
    for response in QuestionnaireResponse.objects.filter(study=study).order_by("respondent_id", "kind", "attempt"):
        row: dict[str, Any] = {
            "respondent": names[response.respondent_id],
            "kind": response.kind,
            "attempt": response.attempt,
            "passed": response.passed,
            "answered_at": response.answered_at.isoformat(),
        }
        row.update({f"q_{key}": value for key, value in response.answers.items()})
        rows.append(row)
    return rows


def questionnaire_columns(study: Study) -> list[str]:
    keys = [q["key"] for kind in ("pre", "quiz", "post") for q in questions_of(study.questionnaires, kind)]
    return ["respondent", "kind", "attempt", "passed", "answered_at", *(f"q_{key}" for key in dict.fromkeys(keys))]
