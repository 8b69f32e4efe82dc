"""Checking the answers to a study's extra questions, and turning them from screen space into system space.

The annotator answers list and claim questions about "List 1" and "List 2"; which system is on the
left is the assignment's (counterbalanced) draw. What is stored (Annotation.question_answers) is
keyed by system, as the main preference label is, so no analysis ever sees a screen side:

    {"confidence": 4,                                   # target item
     "complete": {"<system A>": 3, "<system B>": 5},      # target list
     "verifiable": {"<system A>": [true, false], ...}}   # target claim: one answer per claim, in order

Unanswered optional questions are stored as None (per claim too), so every stored answer has
every question of its study.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from annotation.errors import ServiceError

SCREEN_LISTS = ("list_1", "list_2")
_TRUE = {"true", "on", "1", "yes"}
_FALSE = {"false", "off", "0", "no", ""}


def _missing(value: Any) -> bool:
    return value is None or value == "" or value == []


def _value(question: dict[str, Any], value: Any, where: str) -> Any:
    """One answer to `question`, checked and normalised; None for an unanswered optional one."""
    kind = question["type"]
    if kind == "check":
        if isinstance(value, bool):
            return value
        if value is None or (isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE):
            return value is not None and value.strip().lower() in _TRUE
        raise ServiceError(f"{where}: a tick box takes true or false, got {value!r}")
    if _missing(value):
        if question["required"]:
            raise ServiceError(f"{where}: an answer is required")
        return None
    if kind == "likert":
        low, high = question["scale"]
        point = value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            point = int(value)
        if isinstance(point, bool) or not isinstance(point, int) or not low <= point <= high:
            raise ServiceError(f"{where}: choose a whole number from {low} to {high}, got {value!r}")
        return point
    if kind == "single":
        if value not in question["options"]:
            raise ServiceError(f"{where}: choose one of {', '.join(question['options'])}, got {value!r}")
        return value
    if kind == "multi":
        chosen = [value] if isinstance(value, str) else value
        if not isinstance(chosen, list) or any(option not in question["options"] for option in chosen):
            raise ServiceError(f"{where}: choose any of {', '.join(question['options'])}, got {value!r}")
        return [option for option in question["options"] if option in chosen]  # the definition's order, once each
    if kind == "number":
        return _number(question, value, where)
    text = value.strip() if isinstance(value, str) else None
    if text is None:
        raise ServiceError(f"{where}: write text, got {value!r}")
    if len(text) > question["max_length"]:
        raise ServiceError(f"{where}: {len(text)} characters; the limit is {question['max_length']}")
    if not text and question["required"]:
        raise ServiceError(f"{where}: an answer is required")
    return text or None


def _number(question: dict[str, Any], value: Any, where: str) -> float | int:
    number = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise ServiceError(f"{where}: write a number, got {value!r}") from None
    if isinstance(number, bool) or not isinstance(number, int | float) or not math.isfinite(number):
        raise ServiceError(f"{where}: write a number, got {value!r}")
    if question["integer"]:
        if number != int(number):
            raise ServiceError(f"{where}: write a whole number, got {value!r}")
        number = int(number)
    low, high = question["min"], question["max"]
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"from {low}" if high is None else f"up to {high}" if low is None else f"from {low} to {high}"
        raise ServiceError(f"{where}: the number must be {bounds}, got {value!r}")
    return number


def _per_list(answer: Any, where: str) -> Mapping[str, Any]:
    if answer is None:
        return {}
    if not isinstance(answer, Mapping) or set(answer) - set(SCREEN_LISTS):
        raise ServiceError(f'{where}: answer per list, as {{"list_1": ..., "list_2": ...}}')
    return answer


def checked_question_answers(
    questions: Sequence[dict[str, Any]],
    given: Any,
    *,
    shown: Sequence[str] = (),
    claim_counts: Sequence[int] = (),
) -> dict[str, Any]:
    """The answers to every question, checked and in system space; ServiceError naming the first problem.

    `shown`: the systems shown as List 1 and List 2 (preference); `claim_counts`: how many claims
    each of those lists has (needed only for claim questions).
    """
    if not questions:
        if given not in (None, {}, ""):
            raise ServiceError("this study asks no extra questions; leave `questions` out")
        return {}
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise ServiceError("questions must be an object: question key -> answer")
    known = {question["key"] for question in questions}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ServiceError(f"unknown question(s) {', '.join(map(str, unknown))}; this study asks {', '.join(known)}")
    checked: dict[str, Any] = {}
    for question in questions:
        key, target = question["key"], question["target"]
        where = f"question {key}"
        if target == "item":
            checked[key] = _value(question, given.get(key), where)
            continue
        per_list = _per_list(given.get(key), where)
        stored: dict[str, Any] = {}
        for position, (side, system) in enumerate(zip(SCREEN_LISTS, shown, strict=True)):
            side_where = f"{where}, List {position + 1}"
            if target == "list":
                stored[system] = _value(question, per_list.get(side), side_where)
                continue
            claims = per_list.get(side)
            count = claim_counts[position]
            claims = [None] * count if claims is None else claims
            if not isinstance(claims, list) or len(claims) != count:
                raise ServiceError(f"{side_where}: answer each of its {count} claim(s), in order, as a list")
            stored[system] = [
                _value(question, value, f"{side_where}, claim {index + 1}") for index, value in enumerate(claims)
            ]
        checked[key] = stored
    return checked


def screen_answers(
    questions: Sequence[dict[str, Any]], stored: Mapping[str, Any] | None, shown: Sequence[str] = ()
) -> dict[str, Any]:
    """Stored answers back in screen space (List 1, List 2): to pre-fill a revision on the page."""
    screen: dict[str, Any] = {}
    for question in questions:
        value = (stored or {}).get(question["key"])
        if question["target"] == "item" or not isinstance(value, Mapping):
            screen[question["key"]] = value
        else:
            screen[question["key"]] = {
                side: value.get(system) for side, system in zip(SCREEN_LISTS, shown, strict=False)
            }
    return screen


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if value is True or value is False:
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "-"
    return str(value)


def answer_lines(
    questions: Sequence[dict[str, Any]], stored: Mapping[str, Any] | None, list_names: Mapping[str, str]
) -> list[dict[str, str]]:
    """An answer's extra questions as short lines for a page that reads answers (the adjudication page):
    {prompt, text}; list and claim answers under the names the page gives the systems' lists."""
    lines = []
    for question in questions:
        value = (stored or {}).get(question["key"])
        if question["target"] == "item" or not isinstance(value, Mapping):
            text = _shown(value)
        elif question["target"] == "list":
            text = "; ".join(f"{list_names.get(system, system)}: {_shown(given)}" for system, given in value.items())
        else:
            text = "; ".join(
                f"{list_names.get(system, system)}: "
                + " ".join(f"{index + 1}={_shown(claim)}" for index, claim in enumerate(claims or []))
                for system, claims in value.items()
            )
        lines.append({"prompt": question["prompt"], "text": text})
    return lines
