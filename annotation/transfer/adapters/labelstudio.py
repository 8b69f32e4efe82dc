"""Label Studio: a project's JSON export (a list of tasks) as items and annotations.

Each task becomes an item (verification: the text to judge from ``data``;
preference: ``source`` and the two lists, as our own Label Studio export
writes them); each annotation's ``choices`` result becomes a label by the
annotator identity ``ls-<user id>`` (or the e-mail, when the export carries
the user object). Cancelled annotations are skipped and counted. Pre-1.0
exports (``completions``) are read too.
"""

from __future__ import annotations

from typing import Any

from annotation.lib.formats import RecordError, json_type
from annotation.transfer.adapters.base import (
    ANNOTATIONS,
    ITEMS,
    Adapter,
    Context,
    Converted,
    Origin,
    SourceFile,
    Yield,
    short,
    string,
    whole_json,
)

TEXT_KEYS = ("claim", "text", "sentence", "statement")
MAX_ACTIVE_SECONDS = 24 * 3600


class LabelStudioAdapter(Adapter):
    name = "labelstudio"
    title = "Label Studio JSON export (tasks with choices annotations)"
    targets = (ITEMS, ANNOTATIONS)

    def convert(self, source: SourceFile, target: str, context: Context) -> Yield:
        tasks = whole_json(source.stream, limit=context.max_json_bytes)
        if isinstance(tasks, RecordError):
            yield tasks
            return
        if isinstance(tasks, dict):
            tasks = [tasks]
        if not isinstance(tasks, list):
            yield RecordError(None, f"expected a Label Studio export, a JSON array of tasks; found {json_type(tasks)}")
            return
        seen: dict[str, int] = {}
        for number, task in enumerate(tasks, start=1):
            origin = Origin(None, f"task {number}")
            if not isinstance(task, dict):
                yield origin.error(f"must be an object, got {json_type(task)}")
                continue
            task_id = task.get("id", number)
            if isinstance(task_id, bool) or not isinstance(task_id, (int, str)) or str(task_id).strip() == "":
                yield origin.error(f"must be a number or a string, got {json_type(task_id)}", "id")
                continue
            item_id = str(task_id).strip()
            origin = Origin(None, f"task {number} (id {item_id})")
            if item_id in seen:
                yield origin.error(f"the same id as task {seen[item_id]}", "id")
                continue
            seen[item_id] = number
            data = task.get("data", task)
            if not isinstance(data, dict):
                yield origin.error(f"must be an object, got {json_type(data)}", "data")
                continue
            if target == ITEMS:
                item = _item(item_id, data, origin, context)
                if isinstance(item, RecordError):
                    yield item
                    continue
                yield Converted(ITEMS, origin, item)
            annotations = task.get("annotations", task.get("completions", []))
            if annotations is None:
                annotations = []
            if not isinstance(annotations, list):
                yield origin.error(f"must be an array, got {json_type(annotations)}", "annotations")
                continue
            for position, annotation in enumerate(annotations):
                yield from _annotation(item_id, annotation, origin, position, context)


def _item(item_id: str, data: dict[str, Any], origin: Origin, context: Context) -> dict[str, Any] | RecordError:
    domain = string(data.get("domain"))
    if context.kind == "preference":
        lists = data.get("lists")
        source = data.get("source")
        if not isinstance(lists, dict) or not isinstance(source, str):
            return origin.error("a preference task needs 'source' (text) and 'lists' (the two systems' claims)", "data")
        question = string(data.get("question"))
        return {"id": item_id, "source": source, "question": question, "lists": lists, "domain": domain}
    key = next((key for key in TEXT_KEYS if isinstance(data.get(key), str) and data[key].strip()), None)
    if key is None:
        key = next((key for key, value in data.items() if isinstance(value, str) and value.strip()), None)
    if key is None:
        return origin.error(f"holds no text to judge: expected one of {', '.join(TEXT_KEYS)}", "data")
    context_text = string(data.get("context"))
    record = {"id": item_id, "claim": data[key], "context": context_text, "domain": domain[:100]}
    for name in ("response_id", "system"):
        if isinstance(data.get(name), (str, int)) and not isinstance(data.get(name), bool):
            record[name] = str(data[name])
    return record


def _annotation(item_id: str, annotation: Any, origin: Origin, position: int, context: Context) -> Yield:
    where = f"annotations[{position}]"
    if not isinstance(annotation, dict):
        yield origin.error(f"must be an object, got {json_type(annotation)}", where)
        return
    if annotation.get("was_cancelled") is True:
        context.skipped["cancelled annotation(s)"] += 1
        return
    annotator = _annotator(annotation.get("completed_by"))
    if annotator is None:
        yield origin.error("must be a user id or an object with an 'id'", f"{where}.completed_by")
        return
    results = annotation.get("result")
    if not isinstance(results, list):
        yield origin.error(f"must be an array, got {json_type(results)}", f"{where}.result")
        return
    choices = [r for r in results if isinstance(r, dict) and r.get("type") == "choices"]
    if not choices:
        kinds = sorted({str(r.get("type")) for r in results if isinstance(r, dict)}) or ["none"]
        yield origin.error(
            f"has no 'choices' result (found {', '.join(kinds)}); only choices projects can be imported",
            f"{where}.result",
        )
        return
    value = choices[0].get("value")
    picked = value.get("choices") if isinstance(value, dict) else None
    if not isinstance(picked, list) or len(picked) != 1 or not isinstance(picked[0], str):
        yield origin.error("must hold exactly one chosen label", f"{where}.result[0].value.choices")
        return
    record: dict[str, Any] = {"item": item_id, "annotator": annotator, "label": picked[0].strip()}
    lead_time = annotation.get("lead_time")
    if isinstance(lead_time, (int, float)) and not isinstance(lead_time, bool) and 0 <= lead_time <= MAX_ACTIVE_SECONDS:
        record["active_ms"] = round(lead_time * 1000)
    yield Converted(ANNOTATIONS, Origin(None, f"{origin.record}, annotation {position + 1} by {annotator}"), record)


def _annotator(completed_by: Any) -> str | None:
    """Label Studio's user: an integer id, or an object with id and e-mail (both shapes occur)."""
    if isinstance(completed_by, dict):
        email = completed_by.get("email")
        if isinstance(email, str) and email.strip():
            return short(email.strip(), 100)
        completed_by = completed_by.get("id")
    if isinstance(completed_by, bool) or not isinstance(completed_by, (int, str)) or str(completed_by).strip() == "":
        return None
    return f"ls-{completed_by}"
