"""The report's section on a study's extra questions (issue 32): per question, its answers' distribution,
agreement on it, and for per-claim judgements the per-system share of claims judged positive.

Rows come from the study frame (``StudyFrame.question_answers``): the answers of exactly the labels
agreement counts, so a question's numbers and the label's numbers rest on the same annotations.
Distributions are given overall, per label (item questions) or per system (list and claim
questions), and per condition where the study has conditions (the answerer's condition).
"""

from __future__ import annotations

from typing import Any

from annotation.models import Study
from metaeval import selectors, stats
from metaeval.study_frame import StudyFrame

from .options import ReportOptions

#: Which answer of a per-claim question counts as positive in its per-system score, by type.
POSITIVE_RULE = "a tick box: ticked; a single choice: its first option (e.g. 'supported', 'verifiable')"


def _positive(question: dict[str, Any]) -> Any:
    return True if question["type"] == "check" else question["options"][0]


def questions_section(frame: StudyFrame, study: Study, options: ReportOptions) -> dict[str, Any] | None:
    """None when the study asks no extra questions."""
    if not study.questions:
        return None
    answers = frame.question_answers()
    if study.conditions:
        conditions = selectors.annotator_conditions(study)
        answers["condition"] = answers["annotator"].map(conditions).replace("", None)
    blocks = []
    for question in study.questions:
        rows = answers.loc[answers["question"] == question["key"]]
        by = "label" if question["target"] == "item" else "system"
        block: dict[str, Any] = {
            "key": question["key"],
            "prompt": question["prompt"],
            "type": question["type"],
            "target": question["target"],
            "n_answers": int(rows["value"].notna().sum()),
            "distribution": stats.question_distribution(rows, question),
            "distribution_by": by,
            "distribution_by_group": stats.question_distribution(rows, question, by=by),
        }
        if study.conditions:
            block["distribution_by_condition"] = stats.question_distribution(rows, question, by="condition")
        if question["type"] != "text":
            block["agreement"] = stats.question_agreement(
                rows, question, n_resamples=options.n_resamples, seed=options.seed
            )
        if question["target"] == "claim" and question["type"] in ("check", "single"):
            block["per_claim"] = stats.per_claim_scores(rows, question, _positive(question), seed=options.seed)
            block["positive"] = _positive(question)
        blocks.append(block)
    return {"questions": stats.json_ready(blocks), "positive_rule": POSITIVE_RULE}
