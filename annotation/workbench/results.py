"""The annotating API's answers as plain dicts, in the shapes its serializers document.

Why not the serializers themselves: every label goes through one of these answers, and
building DRF serializers for them (their fields are deep-copied per instance, then walked
field by field) cost about a tenth of the web server's CPU per label on the load benchmark
(benchmarks/annotate_load.py). The serializers in serializers.py stay the documented schema
(drf-spectacular); tests/annotation/workbench/test_api_results.py checks that these dicts equal what
those serializers would give for the same objects.
"""

from __future__ import annotations

from typing import Any

from rest_framework.fields import DateTimeField

from annotation.models import Assignment

#: DRF's own rendering of a datetime (time zone and format as the API's other fields).
_DATETIME = DateTimeField()


def assignment_ref(assignment: Assignment) -> dict[str, Any]:
    """As AssignmentRefSerializer."""
    expires = assignment.lease_expires_at
    return {
        "id": int(assignment.pk),
        "status": str(assignment.status),
        "lease_expires_at": None if expires is None else _DATETIME.to_representation(expires),
        "flagged": assignment.flagged,
    }


def progress_result(progress: dict[str, int | bool]) -> dict[str, Any]:
    """As ProgressSerializer (annotation.workbench.selectors.annotator_progress)."""
    return {"done": progress["done"], "total": progress["total"], "total_exact": progress["total_exact"]}


def next_in_result(assignment: Assignment, item: dict[str, Any]) -> dict[str, Any]:
    """As NextInResultSerializer: an assignment and its item as the annotator may see it (display_payload)."""
    return {"assignment": assignment_ref(assignment), "item": dict(item)}


def next_result(assignment: Assignment, item: dict[str, Any], progress: dict[str, int | bool]) -> dict[str, Any]:
    """As NextAssignmentSerializer."""
    return {**next_in_result(assignment, item), "progress": progress_result(progress)}


def answer_result(assignment: Assignment, progress: dict[str, int | bool]) -> dict[str, Any]:
    """As AnswerResultSerializer; SubmitResultSerializer adds `next` and `holding_lost` when given."""
    return {"assignment": assignment_ref(assignment), "progress": progress_result(progress)}
