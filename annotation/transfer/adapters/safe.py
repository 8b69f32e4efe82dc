"""SAFE (Wei et al., 2024, long-form-factuality): the result JSON of eval/run_eval.py.

``per_prompt_data[i].side{1,2}_posthoc_eval_data.checked_statements`` holds
each atomic fact with SAFE's ``annotation`` (``Supported`` / ``Not
Supported`` / ``Irrelevant``); ``past_steps_jsonified_all`` (parallel to it)
holds the Google searches, whose results become the item's evidence. Items
are the self-contained facts; SAFE's ratings become the predictions of the
verifier ``safe`` (or --verifier). No real result file has been published;
this reader follows the writer code and is tolerant of missing keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotation.lib.formats import RecordError, json_type
from annotation.transfer.adapters.base import (
    ABSTENTIONS,
    ITEMS,
    PREDICTIONS,
    Adapter,
    Context,
    Converted,
    Origin,
    SourceFile,
    Yield,
    string,
    whole_json,
)

SIDES = ("side1", "side2")
LABELS = {
    "Supported": ("supported", "S", "support"),
    "Not Supported": ("not_supported", "unsupported", "NS", "contradicted"),
    "Irrelevant": ("irrelevant", "IR"),
}


def _statements(value: dict[str, Any], context: Context) -> Iterator[tuple[int, str, dict[str, Any]] | RecordError]:
    """(prompt number, side, eval data) for every evaluated side of every prompt."""
    prompts = value.get("per_prompt_data")
    if not isinstance(prompts, list):
        yield RecordError(None, "expected SAFE's result JSON with a 'per_prompt_data' array", "per_prompt_data")
        return
    for number, prompt in enumerate(prompts, start=1):
        if not isinstance(prompt, dict):
            yield RecordError(None, f"prompt {number}: must be an object, got {json_type(prompt)}")
            continue
        for side in SIDES:
            data = prompt.get(f"{side}_posthoc_eval_data")
            if data is None:
                continue
            if not isinstance(data, dict):
                yield RecordError(None, f"prompt {number}: must be an object", f"{side}_posthoc_eval_data")
                continue
            yield number, side, data


class SafeAdapter(Adapter):
    name = "safe"
    title = "SAFE result JSON (long-form-factuality)"
    targets = (ITEMS, PREDICTIONS)

    def convert(self, source: SourceFile, target: str, context: Context) -> Yield:
        if context.kind != "verification":
            yield RecordError(None, "SAFE's facts become claims to verify: import them into a verification study")
            return
        value = whole_json(source.stream, limit=context.max_json_bytes)
        if isinstance(value, RecordError):
            yield value
            return
        if not isinstance(value, dict):
            yield RecordError(None, f"expected SAFE's result JSON, an object; found {json_type(value)}")
            return
        verifier = context.verifier or "safe"
        for entry in _statements(value, context):
            if isinstance(entry, RecordError):
                yield entry
                continue
            number, side, data = entry
            system = str(value.get(f"{side}_model") or value.get("responder_model") or side)[:200]
            if context.system_names:
                system = context.system_names[0]
            response_id = f"safe-{number}-{side}"
            prefix = f"prompt {number}, {side}"
            checked = data.get("checked_statements")
            if not isinstance(checked, list):
                yield RecordError(None, f"{prefix}: must be an array", "checked_statements")
                continue
            if not checked:
                yield Converted(
                    ABSTENTIONS, Origin(None, prefix), {"response_id": response_id, "system": system, "domain": ""}
                )
                continue
            steps = data.get("past_steps_jsonified_all")
            steps = steps if isinstance(steps, list) else []
            response = string(data.get("response"))
            for index, statement in enumerate(checked):
                origin = Origin(None, f"{prefix}, statement {index + 1}")
                where = f"checked_statements[{index}]"
                if not isinstance(statement, dict):
                    yield origin.error(f"must be an object, got {json_type(statement)}", where)
                    continue
                fact = statement.get("self_contained_atomic_fact") or statement.get("atomic_fact")
                if not isinstance(fact, str) or not fact.strip():
                    yield origin.error("needs an 'atomic_fact' string", where)
                    continue
                annotation = statement.get("annotation")
                if annotation not in LABELS:
                    yield origin.error(f"must be one of {', '.join(LABELS)}, got {annotation!r}", f"{where}.annotation")
                    continue
                item_id = f"{response_id}-{index + 1}"
                if target == PREDICTIONS:
                    label = context.label(*LABELS[annotation]) or annotation
                    rate = statement.get("rate_data")
                    rationale = rate.get("response") if isinstance(rate, dict) else ""
                    yield Converted(
                        PREDICTIONS,
                        origin,
                        {"item": item_id, "verifier": verifier, "label": label, "rationale": rationale or ""},
                    )
                    continue
                sentence = string(statement.get("sentence"))
                yield Converted(
                    ITEMS,
                    origin,
                    {
                        "id": item_id,
                        "claim": fact,
                        "context": sentence or response,
                        "response_id": response_id,
                        "system": system,
                        "evidence": _evidence(steps[index] if index < len(steps) else {}),
                    },
                )


def _evidence(step: Any) -> list[dict[str, str]]:
    """The fact's Google searches as passages: the query as title, Serper's joined snippets as text."""
    searches = step.get("google_searches") if isinstance(step, dict) else None
    if not isinstance(searches, list):
        return []
    passages = []
    for search in searches:
        if isinstance(search, dict) and isinstance(search.get("result"), str) and search["result"].strip():
            query = string(search.get("query"))
            passages.append({"text": search["result"], "title": query[:500], "source_type": "web search"})
    return passages
