"""A claim's own transaction commits without waiting for the disk; nothing else does (lib/lease_commit.py).

What could bend: an answer, skip or flag made asynchronous (it could be lost in a crash after the
annotator was told it was saved), or the setting leaking past the claim into the session (every
later write of that connection asynchronous). So: claims made alone and in their transaction set
it for themselves only, on PostgreSQL; answers, skips and flags never; a claim inside an outer
transaction never (it would apply to the outer writes); and after a claim the session waits again.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.lib.lease_commit import LEASE_ONLY_COMMIT, lease_only_commit_applies
from annotation.models import Item
from annotation.workbench import assignment_sql
from annotation.workbench.services import (
    SubmittedAnswer,
    _assignment_values,
    claim_next,
    flag,
    lease_length,
    skip,
    submit,
)
from tests.support.assignment_study import make_study

ON_POSTGRES = connection.vendor == "postgresql"
pytestmark = pytest.mark.django_db(transaction=True)


def _lease_only_statements(queries: CaptureQueriesContext) -> int:
    return sum(LEASE_ONLY_COMMIT in query["sql"] for query in queries.captured_queries)


def _session_setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit" if ON_POSTGRES else "SELECT 'on'")
        return cursor.fetchone()[0]


def test_claims_alone_and_ahead_commit_without_waiting_and_the_session_waits_again():
    study, (a1, *_) = make_study(items=4, slug="lease-commit")
    with CaptureQueriesContext(connection) as alone:
        current = claim_next(user=a1, study=study)  # PostgreSQL: the one-statement claim, outside a transaction
    with CaptureQueriesContext(connection) as ahead:
        following = claim_next(user=a1, study=study, ahead_of=current.pk)  # in its own transaction
    assert current is not None and following is not None and following.pk != current.pk
    assert _lease_only_statements(alone) == (1 if ON_POSTGRES else 0)
    assert _lease_only_statements(ahead) == (1 if ON_POSTGRES else 0)
    assert _session_setting() == "on"  # local to the claim's transaction: nothing later is asynchronous


def test_answers_skips_and_flags_wait_for_the_disk():
    study, (a1, *_) = make_study(items=4, slug="answers-wait")
    first = claim_next(user=a1, study=study)
    with CaptureQueriesContext(connection) as answering:
        submit(user=a1, study=study, assignment_id=first.pk, answer=SubmittedAnswer(label="supported"))
    second = claim_next(user=a1, study=study)
    with CaptureQueriesContext(connection) as flagging:
        flag(user=a1, study=study, assignment_id=second.pk, reason="garbled")
    with CaptureQueriesContext(connection) as skipping:
        skip(user=a1, study=study, assignment_id=second.pk)
    assert _lease_only_statements(answering) == _lease_only_statements(flagging) == 0
    assert _lease_only_statements(skipping) == 0
    assert _session_setting() == "on"


def test_a_claim_inside_an_outer_transaction_leaves_its_commit_alone():
    """The outer transaction may hold other writes (a crowd participant's, a test's): they must wait."""
    study, (a1, *_) = make_study(items=4, slug="outer")
    with transaction.atomic():
        with CaptureQueriesContext(connection) as inside:
            current = claim_next(user=a1, study=study)
            claim_next(user=a1, study=study, ahead_of=current.pk)
        assert _session_setting() == "on"
    assert _lease_only_statements(inside) == 0


def test_a_claim_in_a_transaction_opened_by_hand_leaves_its_commit_alone():
    """Autocommit off (no atomic block, but a transaction all the same): its other writes must wait too."""
    study, (a1, *_) = make_study(items=4, slug="by-hand")
    transaction.set_autocommit(False)
    try:
        with CaptureQueriesContext(connection) as by_hand:
            claim_next(user=a1, study=study)
        assert _session_setting() == "on"
        transaction.commit()
    finally:
        transaction.set_autocommit(True)
    assert _lease_only_statements(by_hand) == 0


def test_postgresql_evaluates_the_setting_in_the_one_statement_claim():
    """The setting is a select-list entry of a subquery the result reads: the planner must not drop it."""
    if not ON_POSTGRES:
        assert connection.vendor == "sqlite" and not lease_only_commit_applies()  # SQLite has no such setting
        return
    study, (a1, *_) = make_study(items=2, slug="evaluated")
    item = Item.objects.filter(study=study).first()
    now = timezone.now()
    values = _assignment_values(a1, study, now + lease_length(), now)
    with transaction.atomic():  # the statement in a transaction of its own, so the setting can be read after it
        claimed = assignment_sql.claim_first_free_slot(
            [(item.pk, 0, 0)], values, study.systems, 3, alone=True, lease_only=True
        )
        inside = _session_setting()
    assert claimed[1] is not None
    assert inside == "off"
    assert _session_setting() == "on"
