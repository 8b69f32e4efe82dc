"""A claim of an annotator far ahead of the others stays bounded (assignments.WALK, assignment_sql.fresh_candidates).

The items an annotator has had and that are unfinished stand at the top of the (study,
slots_taken) index, so a claim that walks the index from the top until it finds items the
annotator has not had used to step past all of them: the further ahead, the slower every claim.
The walk now stops after WALK rows and, when those held nothing, walks again from the next level
of slots taken down. Here WALK is 4, so ten items ahead are far ahead.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.utils import timezone

from annotation.models import Assignment, Item
from annotation.workbench import assignment_sql
from annotation.workbench import services as assignments
from annotation.workbench.services import CANDIDATES, SubmittedAnswer, claim_next, skip, submit
from tests.support.assignment_study import make_study

ON_POSTGRES = connection.vendor == "postgresql"
WALK = 4


@pytest.fixture
def short_walk(monkeypatch):
    monkeypatch.setattr(assignments, "WALK", WALK)


def _label(user, study) -> Assignment | None:
    assignment = claim_next(user=user, study=study)
    if assignment is not None:
        submit(user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported"))
    return assignment


def test_an_annotator_far_ahead_goes_on_to_items_nobody_has_started(db, short_walk):
    study, (lead, second, _) = make_study(items=30, annotators=3, slug="walk")
    done = [_label(lead, study) for _ in range(10)]
    assert all(done) and len({a.item_id for a in done}) == 10
    # ten of the lead's unfinished items fill the top of the index, more than a walk looks at:
    # the claim walks on from the items nobody has started, and finds one
    following = claim_next(user=lead, study=study)
    assert following is not None and following.item_id not in {a.item_id for a in done}
    assert Item.objects.get(pk=following.item_id).slots_taken == 1  # nobody had started it
    # the others still finish items in progress first: the lead's are the ones with slots taken
    taken = claim_next(user=second, study=study)
    assert taken is not None and taken.item_id in {a.item_id for a in done} | {following.item_id}


def test_an_annotator_far_ahead_is_told_nothing_is_left_only_when_nothing_is(db, short_walk):
    study, (lead, *_) = make_study(items=12, annotators=3, slug="walk-end")
    labelled = [_label(lead, study) for _ in range(13)]
    assert all(labelled[:12]) and labelled[12] is None
    assert Assignment.objects.filter(annotator=lead, status=Assignment.Status.SUBMITTED).count() == 12


def _item_rows_walked(plan: dict) -> int:
    """Rows that the plan's scans of the item table returned, over all their loops."""
    walked = 0
    if plan.get("Relation Name") == "annotation_item":
        walked += (plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)) * plan.get("Actual Loops", 1)
    return walked + sum(_item_rows_walked(child) for child in plan.get("Plans", []))


def test_the_candidate_read_of_an_annotator_far_ahead_walks_at_most_walk_rows(db, short_walk):
    if not ON_POSTGRES:
        assert connection.vendor == "sqlite"  # no EXPLAIN ANALYZE to count rows with; the walks above run on both
        return
    study, (lead, *_) = make_study(items=60, annotators=3, slug="walk-plan")
    for _ in range(20):
        _label(lead, study)
    captured: list[tuple[str, tuple]] = []

    def capture(execute, sql, params, many, context):
        captured.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        assignment_sql.claim_candidates(
            study.pk, lead.pk, timezone.now(), study.annotators_per_item, CANDIDATES, assignments.WALK
        )
    (sql, params), *_ = captured
    with connection.cursor() as cursor:
        # The walk down the index, as PostgreSQL reads a study's items in production: in a test
        # database, tables of few pages can make reading them all and sorting look as cheap
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            cursor.execute(f"SET LOCAL {setting} = off")
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        explained = cursor.fetchone()[0]
    plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]
    # without the bound the walk passes the lead's 20 unfinished items and goes on to fresh ones
    assert _item_rows_walked(plan) <= WALK


def test_an_annotator_who_skipped_more_items_than_a_walk_looks_at_still_gets_the_next_one(db, short_walk):
    study, (user,) = make_study(n=1, items=12, annotators=1, slug="walk-skips")
    skipped = set()
    for _ in range(WALK + 2):
        assignment = claim_next(user=user, study=study)
        skip(user=user, study=study, assignment_id=assignment.pk)
        skipped.add(assignment.item_id)
    # the skipped items are back at the top of the index (no slot taken), and a walk looks at WALK of them
    following = claim_next(user=user, study=study)
    assert following is not None and following.item_id not in skipped


def test_a_user_who_is_done_is_told_so_after_one_walk_of_the_whole_index(db, short_walk, monkeypatch):
    study, (lead, *_) = make_study(items=8, annotators=3, slug="walk-done")
    for _ in range(8):
        assert _label(lead, study) is not None
    walks = []
    whole = assignment_sql.every_fresh_candidate

    def counted(*args):
        walks.append(args)
        return whole(*args)

    monkeypatch.setattr(assignment_sql, "every_fresh_candidate", counted)
    assert claim_next(user=lead, study=study) is None
    assert len(walks) == 1
