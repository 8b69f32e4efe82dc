"""The report's summary of a study's questionnaires (issue 32): each question's answers (pre- and post-study)
and the comprehension quiz's pass rate, attempts and failures, per person (by pseudonym)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from annotation.models import QuestionnaireResponse, Study
from annotation.questions.questionnaires import questions_of
from metaeval import stats


def questionnaires_section(study: Study) -> dict[str, Any] | None:
    """None when the study has no questionnaire."""
    if not study.questionnaires:
        return None
    responses = list(
        QuestionnaireResponse.objects.filter(study=study).values_list(
            "respondent_id", "kind", "attempt", "answers", "passed"
        )
    )
    section: dict[str, Any] = {}
    for kind in ("pre", "post"):
        questions = questions_of(study.questionnaires, kind)
        if not questions:
            continue
        rows = [
            {"item": person, "annotator": person, "question": q["key"], "target": "", "value": answers.get(q["key"])}
            for person, given, _, answers, _ in responses
            if given == kind
            for q in questions
        ]
        frame = pd.DataFrame(rows, columns=["item", "annotator", "question", "target", "value"])
        section[kind] = {
            "n_people": len({person for person, given, *_ in responses if given == kind}),
            "questions": [
                {
                    "key": q["key"],
                    "prompt": q["prompt"],
                    "type": q["type"],
                    "distribution": stats.question_distribution(frame.loc[frame["question"] == q["key"]], q),
                }
                for q in questions
            ],
        }
    if questions_of(study.questionnaires, "quiz"):
        attempts: dict[int, list[bool]] = {}
        for person, kind, _, _, passed in responses:
            if kind == "quiz":
                attempts.setdefault(person, []).append(bool(passed))
        passed_people = sum(1 for tries in attempts.values() if any(tries))
        section["quiz"] = {
            "n_people": len(attempts),
            "n_passed": passed_people,
            "share_passed": passed_people / len(attempts) if attempts else None,
            "n_failed_attempts": sum(tries.count(False) for tries in attempts.values()),
            "attempts_allowed": study.questionnaires["quiz"]["attempts"],
            "n_passed_first_time": sum(1 for tries in attempts.values() if tries and tries[0]),
        }
    return stats.json_ready(section)
