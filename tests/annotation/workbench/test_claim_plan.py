"""The claim's candidate read stays bounded whatever PostgreSQL's statistics say (assignment_sql.claim_candidates).

The read probes "has this user had this item?" once per candidate. With statistics gathered
before a study's first labels (a bulk import then ANALYZE, autovacuum off or behind), PostgreSQL
once answered it by reading all of the user's assignments per candidate, or every assignment of
the table per claim: database CPU that grew with every label. Here the statistics are taken on an
empty table, the table then grows, and the rows the statement reads in the assignment table
(counted by EXPLAIN ANALYZE) must stay about what the candidates need.
"""

from __future__ import annotations

import json

from django.db import connection
from django.utils import timezone

from annotation.models import Assignment
from annotation.workbench import assignment_sql
from annotation.workbench.services import CANDIDATES, WALK, SubmittedAnswer, claim_next, submit
from tests.support.assignment_study import make_study

ON_POSTGRES = connection.vendor == "postgresql"


def _assignment_rows_read(plan: dict) -> int:
    """Rows that the plan's nodes on the assignment table looked at (kept or filtered out), over all their loops."""
    read = 0
    if plan.get("Relation Name") == "annotation_assignment":
        read += (plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)) * plan.get("Actual Loops", 1)
    return read + sum(_assignment_rows_read(child) for child in plan.get("Plans", []))


def _reads(plan: dict, relation: str) -> bool:
    return plan.get("Relation Name") == relation or any(_reads(child, relation) for child in plan.get("Plans", []))


def _fresh_part(plan: dict) -> dict:
    """The plan of the statement's fresh part: the branch of its UNION that reads the items.

    Only that branch: the other one (the user's own and expired leases) reads the partial index of
    active assignments, or, when the table's pages are few (as in a test database, where earlier
    tests' rolled-back rows are all its pages hold), scans them; that choice is the planner's and
    is not what this test is about.
    """
    if plan.get("Node Type") == "Append":
        (fresh,) = [child for child in plan["Plans"] if _reads(child, "annotation_item")]
        return fresh
    (found,) = [_fresh_part(child) for child in plan.get("Plans", []) if _reads(child, "annotation_item")]
    return found


def _candidates_plan(study, user) -> dict:
    captured: list[tuple[str, tuple]] = []

    def capture(execute, sql, params, many, context):
        captured.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        assignment_sql.claim_candidates(study.pk, user.pk, timezone.now(), study.annotators_per_item, CANDIDATES, WALK)
    (sql, params), *_ = captured
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        explained = cursor.fetchone()[0]
    return (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]


def test_the_candidate_read_looks_at_a_bounded_number_of_assignments_with_statistics_of_an_empty_table(db):
    if not ON_POSTGRES:
        assert connection.vendor == "sqlite"  # no planner statistics to go stale: one plan, the same reads
        return
    study, (user, *others) = make_study(items=400, annotators=3, slug="plan")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE annotation_assignment")  # statistics of no assignments at all
    for _ in range(60):
        assignment = claim_next(user=user, study=study)
        submit(user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported"))
    items = list(study.items.values_list("pk", flat=True))
    Assignment.objects.bulk_create(  # the table grows: other annotators' closed assignments
        Assignment(
            study=study, item_id=item_id, annotator=other, max_slots=3, status=Assignment.Status.SKIPPED, slot=None
        )
        for other in others
        for item_id in items
    )
    assert Assignment.objects.filter(annotator=user).count() == 60 and Assignment.objects.count() == 860
    read = _assignment_rows_read(_fresh_part(_candidates_plan(study, user)))
    # The fresh part passes the user's 60 items (slots taken: first in the index) and CANDIDATES fresh ones,
    # probing each item's three assignments at most; the whole table is 860 rows, the user's 60
    # assignments read per candidate over 5,000
    assert read <= (60 + CANDIDATES) * 3, read
