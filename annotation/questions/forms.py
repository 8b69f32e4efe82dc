"""The extra questions on the annotate page: the controls to render, and what a posted form answered.

Field names are in screen space, as the page shows them: ``q.<key>`` for an item question,
``q.<key>.list_1`` for a list question, ``q.<key>.list_1.<claim index>`` for a claim question
(a multi-choice question repeats its name once per ticked option). `posted_answers` reads them
back into the shape the API takes (annotation/questions/answers.py), so the page and the API
meet the same check.

Keys: a question's options are chosen with 1-9 while the question has the focus, and `q` moves
the focus from one question to the next (static/js/workbench.js). The label keys act only
outside a question, so question keys never collide with them, whatever the labels' keys are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from annotation.questions.answers import SCREEN_LISTS

#: The key that moves the focus to the next question (workbench.js has the same; the page's hints show it).
NEXT_QUESTION_KEY = "q"


def field_name(key: str, side: str | None = None, claim: int | None = None) -> str:
    return ".".join(part for part in ("q", key, side, None if claim is None else str(claim)) if part is not None)


def _raw(data: Any, name: str, question: dict[str, Any]) -> Any:
    if question["type"] == "multi":
        return list(data.getlist(name)) if hasattr(data, "getlist") else data.get(name, [])
    if question["type"] == "check":
        return data.get(name) is not None and data.get(name) != ""
    return data.get(name)


def posted_answers(questions: Sequence[dict[str, Any]], data: Any, claim_counts: Sequence[int] = ()) -> dict[str, Any]:
    """The answers a posted annotate form gave, in screen space (the API's `questions`)."""
    answers: dict[str, Any] = {}
    for question in questions:
        key, target = question["key"], question["target"]
        if target == "item":
            answers[key] = _raw(data, field_name(key), question)
        elif target == "list":
            answers[key] = {side: _raw(data, field_name(key, side), question) for side in SCREEN_LISTS}
        else:
            answers[key] = {
                side: [_raw(data, field_name(key, side, index), question) for index in range(count)]
                for side, count in zip(SCREEN_LISTS, claim_counts, strict=False)
            }
    return answers


def _choices(question: dict[str, Any], current: Any) -> list[dict[str, Any]]:
    """The options of a Likert or choice question, each with its key (1-9 while focused) and whether chosen."""
    if question["type"] == "likert":
        low, high = question["scale"]
        values: list[Any] = list(range(low, high + 1))
        texts = [question["anchors"].get(str(point), "") for point in values]
    else:
        values, texts = list(question["options"]), list(question["options"])
    chosen = current if isinstance(current, list) else [current]
    return [
        {
            "value": value,
            "text": text,
            "key": str(position) if position <= 9 else "",
            "checked": value in chosen or str(value) in map(str, chosen),
        }
        for position, (value, text) in enumerate(zip(values, texts, strict=True), start=1)
    ]


def control(question: dict[str, Any], name: str, current: Any, label: str) -> dict[str, Any]:
    """One control of the page: a question asked once (of the item, a list or a claim)."""
    return {
        "question": question,
        "name": name,
        "label": label,
        "value": "" if current is None else current,
        "choices": _choices(question, current) if question["type"] in ("likert", "single", "multi") else [],
        "checked": current is True,
    }


def page_questions(
    questions: Sequence[dict[str, Any]], screen: Mapping[str, Any] | None, claim_counts: Sequence[int] = ()
) -> dict[str, Any]:
    """What the annotate page renders: item questions; list questions per list; claim questions per claim.

    `screen`: answers to pre-fill, in screen space (a revision, or a form sent back with an error).
    """
    screen = screen or {}
    item: list[dict[str, Any]] = []
    per_list: dict[str, list[dict[str, Any]]] = {side: [] for side in SCREEN_LISTS}
    counts = list(claim_counts) + [0] * (len(SCREEN_LISTS) - len(claim_counts))
    per_claim: dict[str, list[list[dict[str, Any]]]] = {
        side: [[] for _ in range(count)] for side, count in zip(SCREEN_LISTS, counts, strict=False)
    }
    for question in questions:
        key, target, current = question["key"], question["target"], screen.get(question["key"])
        if target == "item":
            item.append(control(question, field_name(key), current, question["prompt"]))
            continue
        for position, side in enumerate(SCREEN_LISTS, start=1):
            answer = current.get(side) if isinstance(current, Mapping) else None
            if target == "list":
                per_list[side].append(control(question, field_name(key, side), answer, question["prompt"]))
                continue
            for index, claims in enumerate(per_claim.get(side, [])):
                value = answer[index] if isinstance(answer, list) and index < len(answer) else None
                label = f"{question['prompt']} (List {position}, claim {index + 1})"
                claims.append(control(question, field_name(key, side, index), value, label))
    return {"item": item, "lists": per_list, "claims": per_claim, "next_key": NEXT_QUESTION_KEY, "any": bool(questions)}
