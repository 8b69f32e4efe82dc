"""A Claimlab study as a Label Studio JSON export (a list of tasks), so a lab can move either way.

Each item is a task whose ``data`` carries what annotators saw (verification:
claim, context, evidence; preference: source, question, the two lists), and
each submitted annotation a ``choices`` result whose choice is the study's
label. ``completed_by`` carries the annotator's pseudonym (in ``email``,
where Label Studio keeps a user's name), never a login. The file reads back
with ``import_items --from labelstudio``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse

from annotation.models import Study
from annotation.transfer.labelstudio_rows import items_with_annotations

FROM_NAME = "label"


def labelstudio_chunks(study: Study) -> Iterator[str]:
    """The export as JSON text chunks (a JSON array of tasks), streamed."""
    yield "["
    for number, (item, answers) in enumerate(items_with_annotations(study)):
        yield ("," if number else "") + "\n" + json.dumps(_task(study, item, answers), ensure_ascii=False)
    yield "\n]\n"


def labelstudio_response(study: Study) -> StreamingHttpResponse:
    """The export as a streamed download, for the page and the API."""
    response = StreamingHttpResponse(
        (chunk.encode("utf-8") for chunk in labelstudio_chunks(study)), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-labelstudio.json"'
    return response


def _task(study: Study, item: dict[str, Any], annotations: list[dict[str, Any]]) -> dict[str, Any]:
    payload = item["payload"] or {}
    data: dict[str, Any] = {"id": item["external_id"], "domain": item["domain"]}
    if study.is_preference:
        data.update(
            source=payload.get("source", ""), question=payload.get("question", ""), lists=payload.get("lists", {})
        )
        to_name = "source"
    else:
        data.update(
            claim=payload.get("claim", ""), context=payload.get("context", ""), evidence=payload.get("evidence", [])
        )
        to_name = "claim"
    data.update(response_id=item["response_id"], system=item["system"])
    return {
        "id": item["external_id"],
        "data": data,
        "annotations": [
            {
                "id": row["pk"],
                "completed_by": {
                    "id": row["assignment__annotator_id"],
                    "email": row["annotator"],
                    "first_name": "",
                    "last_name": "",
                },
                "result": [
                    {
                        "type": "choices",
                        "from_name": FROM_NAME,
                        "to_name": to_name,
                        "origin": "manual",
                        "value": {"choices": [row["label"]]},
                    }
                ],
                "was_cancelled": False,
                "ground_truth": False,
                "created_at": row["created_at"].isoformat(),
                "updated_at": row["updated_at"].isoformat(),
                "lead_time": (row["active_ms"] or 0) / 1000,
            }
            for row in annotations
            if row["label"]
        ],
        "predictions": [],
    }
