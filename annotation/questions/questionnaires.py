"""A study's questionnaires (issue 32): a pre-study and a post-study questionnaire, and a comprehension quiz.

All three use the extra questions' types (annotation/questions/definitions.py), asked once, of the
person (target item only). A quiz question adds ``correct`` (the answer that passes: an option, a
point, a list of options for a multiple choice, true/false for a tick box, a number) and
``feedback`` (shown when it was answered wrong). The quiz is passed when every question is
answered right; ``attempts`` (1-10, default 3) tries are allowed, each one kept.

    {"pre": [{"key": "age", "type": "number", "prompt": "Your age", "min": 18, "max": 120}],
     "quiz": {"attempts": 2, "questions": [
         {"key": "contra", "type": "single", "prompt": "Evidence says the opposite: the label?",
          "options": ["supported", "contradicted", "inconclusive"], "correct": "contradicted",
          "feedback": "Contradicted: the evidence says the claim is false."}]},
     "post": [{"key": "clear", "type": "likert", "prompt": "The instructions were clear"}]}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from annotation.errors import ServiceError
from annotation.questions.answers import checked_question_answers
from annotation.questions.definitions import parse_questions

KINDS = ("pre", "quiz", "post")
MAX_ATTEMPTS = 10


def _questions(raw: Any, where: str) -> list[dict[str, Any]]:
    try:
        questions = parse_questions(raw, kind="verification")  # of the person: item target only
    except ServiceError as exc:
        raise ServiceError(f"{where}: {exc}") from None
    return questions


def parse_questionnaires(raw: Any) -> dict[str, Any]:
    """The study's questionnaires, checked and complete ({} when none)."""
    if raw in (None, "", {}):
        return {}
    if isinstance(raw, str):
        from annotation.questions.definitions import read_questions_text

        raw = read_questions_text(raw)
    if not isinstance(raw, Mapping) or set(raw) - set(KINDS):
        raise ServiceError(f"questionnaires must be an object with any of {', '.join(KINDS)}")
    checked: dict[str, Any] = {}
    for kind in ("pre", "post"):
        if raw.get(kind):
            checked[kind] = _questions(raw[kind], f"the {kind}-study questionnaire")
    quiz = raw.get("quiz")
    if quiz:
        if not isinstance(quiz, Mapping) or set(quiz) - {"questions", "attempts"}:
            raise ServiceError("the quiz is {questions: [...], attempts: <1-10>}")
        attempts = quiz.get("attempts", 3)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS:
            raise ServiceError(f"the quiz's attempts is a whole number from 1 to {MAX_ATTEMPTS}")
        given = quiz.get("questions")
        if not isinstance(given, list) or not given:
            raise ServiceError("the quiz needs at least one question")
        plain, keys = [], []
        for position, entry in enumerate(given, start=1):
            if not isinstance(entry, Mapping) or "correct" not in entry:
                raise ServiceError(f"quiz question {position}: give its correct answer (`correct`)")
            plain.append({name: value for name, value in entry.items() if name not in ("correct", "feedback")})
            keys.append(entry)
        questions = _questions(plain, "the quiz")
        for question, entry in zip(questions, keys, strict=True):
            question["required"] = True
            feedback = entry.get("feedback") or ""
            if not isinstance(feedback, str) or len(feedback) > 2_000:
                raise ServiceError(f"quiz question {question['key']}: feedback is text of at most 2,000 characters")
            question["feedback"] = feedback.strip()
            try:
                question["correct"] = checked_question_answers([question], {question["key"]: entry["correct"]})[
                    question["key"]
                ]
            except ServiceError as exc:
                raise ServiceError(
                    f"quiz question {question['key']}: its correct answer does not fit ({exc})"
                ) from None
        checked["quiz"] = {"questions": questions, "attempts": attempts}
    return checked


def questions_of(questionnaires: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    """The questions of one questionnaire ("pre", "quiz", "post"); none when the study has none."""
    if kind == "quiz":
        return list((questionnaires.get("quiz") or {}).get("questions", []))
    return list(questionnaires.get(kind) or [])


def wrong_answers(quiz: list[dict[str, Any]], answers: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The quiz questions answered wrong, each with its feedback."""
    return [question for question in quiz if answers.get(question["key"]) != question["correct"]]
