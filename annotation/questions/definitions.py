"""A study's extra questions: what a researcher may define, checked once, stored normalised (Study.questions).

Why one checker: the settings page, the API and `create_study --questions FILE` take the same
definitions, and every later reader (the annotate page, the answer check, the export, the report)
trusts the stored list, so each definition is checked here and written back complete (every
optional field with its default), and a refusal names the question and the field.

A definition::

    {"key": "confidence", "type": "likert", "prompt": "How sure are you?", "target": "item",
     "required": true, "scale": [1, 5], "anchors": {"1": "guessing", "5": "certain"}}

- ``type``: likert (whole points of ``scale``), single (one of ``options``), multi (any of
  ``options``), check (ticked or not), number (``min``/``max``, ``integer``), text (``max_length``);
- ``target``: the item; each ``list`` of a preference item ("rate List 1's completeness"); or
  each ``claim`` of both lists (VeriScore's and FActScore's per-claim judgements). Answers to list
  and claim questions are stored per system, never per screen side, so blinding holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from annotation.errors import ServiceError

TYPES = ("likert", "single", "multi", "check", "number", "text")
TARGETS = ("item", "list", "claim")
#: How many questions a study may ask with each answer, and the limits of each part.
MAX_QUESTIONS = 20
MAX_OPTIONS = 12
MAX_PROMPT = 500
MAX_TEXT_ANSWER = 2_000
LIKERT_POINTS = (2, 11)
KEY_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,31}")
FIELDS = {"key", "type", "prompt", "target", "required", "help", "scale", "anchors", "options", "min", "max"}
FIELDS |= {"integer", "max_length"}


def _fail(where: str, message: str) -> ServiceError:
    return ServiceError(f"{where}: {message}")


def _text(value: Any, where: str, name: str, limit: int, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise _fail(where, f"{name} must be {'a non-empty' if required else 'a'} string")
    if len(value) > limit:
        raise _fail(where, f"{name} is {len(value)} characters; the limit is {limit}")
    return value.strip()


def _number(value: Any, where: str, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or abs(value) > 1e12:
        raise _fail(where, f"{name} must be a number (at most 1e12 in size)")
    return value


def _likert(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    scale = raw.get("scale", [1, 5])
    if (
        not isinstance(scale, list | tuple)
        or len(scale) != 2
        or not all(isinstance(point, int) and not isinstance(point, bool) for point in scale)
    ):
        raise _fail(where, "scale must be two whole numbers [lowest, highest], e.g. [1, 5]")
    low, high = scale
    points = high - low + 1
    if not LIKERT_POINTS[0] <= points <= LIKERT_POINTS[1]:
        raise _fail(where, f"a Likert scale has {LIKERT_POINTS[0]} to {LIKERT_POINTS[1]} points, got {points}")
    anchors = raw.get("anchors") or {}
    if not isinstance(anchors, Mapping):
        raise _fail(where, 'anchors must map scale points to their wording, e.g. {"1": "not at all"}')
    checked = {}
    for point, text in anchors.items():
        if not str(point).lstrip("-").isdigit() or not low <= int(point) <= high:
            raise _fail(where, f"anchor {point!r} is not a point of the scale {low}-{high}")
        checked[str(int(point))] = _text(text, where, f"anchor {point}", 100)
    return {"scale": [low, high], "anchors": checked}


def _options(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    options = raw.get("options")
    if not isinstance(options, list) or not 2 <= len(options) <= MAX_OPTIONS:
        raise _fail(where, f"options must be a list of 2 to {MAX_OPTIONS} answers")
    cleaned = [_text(option, where, "each option", 100) for option in options]
    if len(set(cleaned)) != len(cleaned):
        raise _fail(where, "options must be distinct")
    return {"options": cleaned}


def _number_limits(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    low, high = _number(raw.get("min"), where, "min"), _number(raw.get("max"), where, "max")
    if low is not None and high is not None and low > high:
        raise _fail(where, f"min ({low}) is above max ({high})")
    integer = raw.get("integer", False)
    if not isinstance(integer, bool):
        raise _fail(where, "integer must be true or false")
    return {"min": low, "max": high, "integer": integer}


def _text_limits(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    limit = raw.get("max_length", 500)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TEXT_ANSWER:
        raise _fail(where, f"max_length must be a whole number from 1 to {MAX_TEXT_ANSWER}")
    return {"max_length": limit}


_BY_TYPE = {
    "likert": _likert,
    "single": _options,
    "multi": _options,
    "check": lambda raw, where: {},
    "number": _number_limits,
    "text": _text_limits,
}


def _one(raw: Any, position: int, kind: str) -> dict[str, Any]:
    where = f"question {position}"
    if not isinstance(raw, Mapping):
        raise _fail(where, "must be an object with at least key, type and prompt")
    key = raw.get("key")
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise _fail(where, "key must be 1-32 lower-case letters, digits or _ starting with a letter, e.g. confidence")
    where = f"question {position} ({key})"
    unknown = sorted(set(raw) - FIELDS)
    if unknown:
        raise _fail(where, f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(FIELDS))}")
    kind_of = raw.get("type")
    if kind_of not in TYPES:
        raise _fail(where, f"type must be one of {', '.join(TYPES)}, got {kind_of!r}")
    target = raw.get("target", "item")
    if target not in TARGETS:
        raise _fail(where, f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    if target != "item" and kind != "preference":
        raise _fail(where, f"target {target!r} is for preference studies (their two claim lists); use 'item'")
    required = raw.get("required", True)
    if not isinstance(required, bool):
        raise _fail(where, "required must be true or false")
    if kind_of == "check" and required:
        required = False  # an unticked box is an answer: "no"
    return {
        "key": key,
        "type": kind_of,
        "prompt": _text(raw.get("prompt"), where, "prompt", MAX_PROMPT),
        "help": _text(raw.get("help"), where, "help", MAX_PROMPT, required=False),
        "target": target,
        "required": required,
        **_BY_TYPE[kind_of](raw, where),
    }


def parse_questions(raw: Any, *, kind: str) -> list[dict[str, Any]]:
    """The study's question definitions, checked and complete; ServiceError naming the first problem."""
    if raw in (None, "", []):
        return []
    if isinstance(raw, str):
        raw = read_questions_text(raw)
    if not isinstance(raw, list):
        raise ServiceError("questions must be a list of question definitions")
    if len(raw) > MAX_QUESTIONS:
        raise ServiceError(f"a study asks at most {MAX_QUESTIONS} questions with each answer, got {len(raw)}")
    questions = [_one(entry, position, kind) for position, entry in enumerate(raw, start=1)]
    keys = [question["key"] for question in questions]
    doubled = sorted({key for key in keys if keys.count(key) > 1})
    if doubled:
        raise ServiceError(f"question keys must be distinct: {', '.join(doubled)} appear more than once")
    return questions


def read_questions_text(text: str) -> Any:
    """Definitions written as JSON or YAML (the settings page's box, `create_study --questions FILE`)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ServiceError(f"the questions are neither JSON nor YAML{at}: {getattr(exc, 'problem', exc)}") from None


def read_questions_file(path: str | Path) -> Any:
    """A questions file's definitions (JSON or YAML); ServiceError naming the file when it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServiceError(f"cannot read the questions file {path}: {exc}") from None
    return read_questions_text(text)


def asks_per_claim(questions: list[dict[str, Any]]) -> bool:
    """Whether an answer depends on the item's claim counts (a claim-target question)."""
    return any(question["target"] == "claim" for question in questions)


def questions_text(questions: list[dict[str, Any]] | dict[str, Any]) -> str:
    """Stored definitions (questions, or questionnaires) as the settings page shows them: YAML, empty when none."""
    if not questions:
        return ""
    return yaml.safe_dump(questions, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100)
