"""The reads behind the Label Studio export: a study's items with their submitted annotations, streamed."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby
from typing import Any

from annotation.lib.pseudonyms import pseudonyms
from annotation.models import Annotation, Assignment, Item, Study

CHUNK = 2000


def items_with_annotations(study: Study) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(item values, its submitted annotations) in item order; annotators by pseudonym only."""
    names = pseudonyms(study)
    answers = (
        Annotation.objects.filter(assignment__study=study, assignment__status=Assignment.Status.SUBMITTED)
        .order_by("assignment__item__position", "assignment__item_id", "assignment__slot", "pk")
        .values(
            "pk", "assignment__item_id", "assignment__annotator_id", "label", "active_ms", "created_at", "updated_at"
        )
        .iterator(chunk_size=CHUNK)
    )
    # Both streams are in item order: walk them side by side, holding one item's annotations at a time.
    groups = groupby(answers, key=lambda row: row["assignment__item_id"])
    pending = next(groups, None)
    items = (
        Item.objects.filter(study=study)
        .order_by("position", "pk")
        .values("pk", "external_id", "domain", "payload", "response_id", "system")
        .iterator(chunk_size=CHUNK)
    )
    for item in items:
        rows: list[dict[str, Any]] = []
        if pending is not None and pending[0] == item["pk"]:
            rows = [dict(row) for row in pending[1]]
            pending = next(groups, None)
        for row in rows:
            row["annotator"] = names[row["assignment__annotator_id"]]
        yield dict(item), rows
