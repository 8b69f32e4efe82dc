"""Reads for the annotator's workbench: what to show, and how far along they are.

What an annotator sees is built here and only here, so blinding has one place
to hold: no system names, no gold labels, no other annotators' labels.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet

from annotation.lib.rawsql import fetch_one, names
from annotation.models import Assignment, Item, Study
from annotation.workbench.claim_order import claim_order, unchecked

#: Open items counted for a progress total; beyond this the total is a lower bound (`total_exact` false).
PROGRESS_COUNT_LIMIT = 1000


def annotator_progress(user: User, study: Study) -> dict[str, int | bool]:
    """{"done": answered, "total": answered + open + still available to this user, "total_exact": bool}.

    One statement that does not grow with the study: the user's own
    assignments (grouped in one pass), and the study's unfinished items read
    from the (study, is_check, slots_taken, claim_rank) index but only up to PROGRESS_COUNT_LIMIT
    beyond the ones the user already had. Counting every open item of a
    100,000-item study on each request costs more than the claim itself
    (tens of ms on PostgreSQL); a progress bar does not need more than "1,000+".
    When the limit is hit, `total` is a lower bound and `total_exact` is false.
    Hand-written SQL: this runs on every annotating request (annotation/lib/rawsql.py).
    """
    row = fetch_one(*progress_counts(study, user.pk))
    assert row is not None  # an aggregate without GROUP BY always returns one row
    return progress_from_counts(*row)


def progress_counts(study: Study, user_id: int) -> tuple[str, list[Any]]:
    """The SELECT behind `annotator_progress` and its parameters: one row (done, active, had, unfinished).

    Also read inside PostgreSQL's one-statement submit (workbench/submit_sql.py), which sees the counts
    of before its own writes and so passes done + 1 and active - 1 to `progress_from_counts`.
    """
    n = study.slots_per_item
    A, IT = names(Assignment), names(Item)
    # One statement: the user's own counts, and the unfinished items read from the top of the
    # (study, is_check, slots_taken, claim_rank) index, as claims do (right after a bulk change and before (auto)vacuum,
    # the bottom holds the dead versions), up to the limit past the ones the user already had.
    sql = (
        f"WITH mine AS (SELECT COUNT(CASE WHEN a.{A.status} = %s THEN 1 END) AS done, "
        f"COUNT(CASE WHEN a.{A.status} = %s THEN 1 END) AS active, "
        f"COUNT(CASE WHEN i.{IT.slots_taken} < %s AND {unchecked()} THEN 1 END) AS had "
        f"FROM {A.table} a JOIN {IT.table} i ON i.{IT.id} = a.{A.item} WHERE a.{A.study} = %s AND a.{A.annotator} = %s) "
        f"SELECT done, active, had, (SELECT COUNT(*) FROM (SELECT i.{IT.id} FROM {IT.table} i "
        f"WHERE i.{IT.study} = %s AND i.{IT.slots_taken} < %s AND {unchecked()} ORDER BY {claim_order()} "
        f"LIMIT (SELECT had FROM mine) + %s) unfinished) AS unfinished FROM mine"
    )
    params = [
        Assignment.Status.SUBMITTED,
        Assignment.Status.ACTIVE,
        n,
        study.pk,
        user_id,
        study.pk,
        n,
        PROGRESS_COUNT_LIMIT + 1,
    ]
    return sql, params


def progress_from_counts(done: int, active: int, had_unfinished: int, unfinished: int) -> dict[str, int | bool]:
    """`annotator_progress` from the counts `progress_counts` reads."""
    limit = PROGRESS_COUNT_LIMIT + had_unfinished
    exact = unfinished <= limit
    available = max(min(unfinished, limit) - had_unfinished, 0)
    return {"done": done, "total": done + active + available, "total_exact": exact}


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


def submitted_history(user: User, study: Study) -> QuerySet[Assignment]:
    """The user's answered assignments, latest first (for "back")."""
    return (
        Assignment.objects.filter(study=study, annotator=user, status=Assignment.Status.SUBMITTED)
        .select_related("item", "annotation")
        .order_by("-submitted_at", "-pk")
    )


def previous_answer(user: User, study: Study, before: Assignment | None = None) -> Assignment | None:
    """The answer submitted just before `before` (or the latest one)."""
    history = submitted_history(user, study)
    if before is not None and before.submitted_at is not None:
        history = history.filter(submitted_at__lt=before.submitted_at)
    return history.first()
