"""Reads for the annotator's workbench: what to show, and how far along they are.

What an annotator sees is built here and only here, so blinding has one place
to hold: no system names, no gold labels, no other annotators' labels.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from ..models import Assignment, Item, Study


def annotator_progress(user: AbstractBaseUser, study: Study) -> dict[str, int]:
    """{"done": answered, "total": answered + open + still available to this user}."""
    mine = Assignment.objects.filter(study=study, annotator=user)
    done = mine.filter(status=Assignment.Status.SUBMITTED).count()
    active = mine.filter(status=Assignment.Status.ACTIVE).count()
    available = (
        Item.objects.filter(study=study, slots_taken__lt=study.annotators_per_item)
        .exclude(id__in=mine.values("item_id"))
        .count()
    )
    return {"done": done, "total": done + active + available}


def display_payload(assignment: Assignment) -> dict[str, Any]:
    """The item as the annotator may see it: blinded, without gold or provenance."""
    item = assignment.item
    payload = item.payload
    if assignment.study.is_preference:
        lists = payload.get("lists", {})
        systems = list(assignment.study.systems)
        left = assignment.left_system or systems[0]
        right = next((system for system in systems if system != left), left)
        return {
            "kind": "preference",
            "source": payload.get("source", ""),
            "question": payload.get("question", ""),
            "list_1": list(lists.get(left, [])),
            "list_2": list(lists.get(right, [])),
        }
    return {
        "kind": "verification",
        "claim": payload.get("claim", ""),
        "context": payload.get("context", ""),
        "evidence": [
            {
                "index": index,
                "text": passage.get("text", ""),
                "title": passage.get("title", ""),
                "url": passage.get("url", ""),
                "source_type": passage.get("source_type", ""),
            }
            for index, passage in enumerate(payload.get("evidence", []))
        ],
    }


def submitted_history(user: AbstractBaseUser, study: Study) -> QuerySet[Assignment]:
    """The user's answered assignments, latest first (for "back")."""
    return (
        Assignment.objects.filter(study=study, annotator=user, status=Assignment.Status.SUBMITTED)
        .select_related("item", "annotation")
        .order_by("-submitted_at", "-pk")
    )


def previous_answer(user: AbstractBaseUser, study: Study, before: Assignment | None = None) -> Assignment | None:
    """The answer submitted just before `before` (or the latest one)."""
    history = submitted_history(user, study)
    if before is not None and before.submitted_at is not None:
        history = history.filter(submitted_at__lt=before.submitted_at)
    return history.first()
