"""Real threads claiming and answering at once (issue 3, point 8; docs/architecture.md, Tests and benchmarks).

Runs against whatever database the suite runs on: the file-based SQLite test
database (config/settings_test.py) in the first CI pass, PostgreSQL in the
second. Each thread has its own connection (Django's are per thread) and
closes it when done. The checks are the invariants, not timings: every item
ends with exactly N answers from N different annotators, nobody answers an
item twice, slots are 0..N-1 and left/right stays counterbalanced.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError
from django.utils import timezone

from annotation.members.services import add_members
from annotation.models import Annotation, AnnotationRevision, Assignment, Item
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from annotation.workbench import services as assignments
from annotation.workbench.services import (
    ClaimContention,
    LeaseLost,
    SubmittedAnswer,
    claim_next,
    lease_length,
    skip,
    submit,
)
from tests.conftest import jsonl, preference_item
from tests.support.deadlock import database_error, deadlock
from tests.support.threads import as_a_client, run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)

ITEMS = 60
N = 3
WORKERS = 16
QUITTERS = 4
CHOICES = ("left_strong", "left_slight", "tie", "right_slight", "right_strong")


def make_preference_study(slug: str, items: int, n: int, annotators: list[str]):
    study = create_study(slug=slug, name=slug, kind="preference", annotators_per_item=n)
    add_members(study=study, usernames=annotators, role="annotator")
    import_items(study=study, stream=jsonl(*(preference_item(f"p-{k:03d}") for k in range(items))), fmt="jsonl")
    study.refresh_from_db()
    users = {user.username: user for user in get_user_model().objects.filter(username__in=annotators)}
    return study, [users[name] for name in annotators]


def test_many_annotators_at_once_give_every_item_exactly_n_answers():
    names = [f"w{k:02d}" for k in range(WORKERS)] + [f"q{k}" for k in range(QUITTERS)]
    study, users = make_preference_study("race", ITEMS, N, names)
    workers, quitters = users[:WORKERS], users[WORKERS:]
    base = timezone.now()
    # Half the workers run on a clock ahead of everyone's leases: they reclaim what
    # the quitters abandon and, now and then, what a slow worker is still holding.
    fast_clock = base + lease_length() + timedelta(minutes=30)

    def claim(user, now, outcome: Counter[str]):
        """claim_next as a client uses it (`as_a_client`): sixteen threads claiming without pause from
        60 items sometimes lose ten races in a row, and the service then says "try again"."""

        def contended() -> None:
            outcome["contended"] += 1

        return as_a_client(claim_next, user=user, study=study, now=now, on_contention=contended)

    def work(user, now, seed: int) -> dict[str, int]:
        rng = random.Random(seed)
        outcome: Counter[str] = Counter()
        while (assignment := claim(user, now, outcome)) is not None:
            try:
                if rng.random() < 0.08:
                    as_a_client(skip, user=user, study=study, assignment_id=assignment.pk, now=now)
                    outcome["skipped"] += 1
                else:
                    answer = SubmittedAnswer(choice=rng.choice(CHOICES))
                    as_a_client(submit, user=user, study=study, assignment_id=assignment.pk, answer=answer, now=now)
                    outcome["submitted"] += 1
            except LeaseLost:  # a faster clock took it over between claim and answer
                outcome["lost"] += 1
        return outcome

    def quit_after(user, answers: int) -> dict[str, int]:
        """Answer a few items (slowly: a fast worker may take one over), then claim one more and walk away."""
        outcome: Counter[str] = Counter()
        for _ in range(answers):
            assignment = claim(user, base, outcome)
            if assignment is None:
                return outcome
            try:
                submit(
                    user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(choice="tie"), now=base
                )
                outcome["submitted"] += 1
            except LeaseLost:
                outcome["lost"] += 1
        outcome["abandoned"] = int(claim(user, base, outcome) is not None)
        return outcome

    # Quitters go first (so that each surely holds a lease when it walks away:
    # SQLite's lock is not fair and a late thread can find the study finished).
    quit = run_in_threads([(lambda user=user, k=k: quit_after(user, answers=k)) for k, user in enumerate(quitters)])
    first = run_in_threads(
        [(lambda user=user, k=k: work(user, fast_clock if k % 2 else base, seed=k)) for k, user in enumerate(workers)]
    )
    # Whatever is still held now has its lease run out by tomorrow: everyone finishes the study.
    tomorrow = base + timedelta(days=1)
    second = run_in_threads(
        [(lambda user=user, k=k: work(user, tomorrow, seed=100 + k)) for k, user in enumerate(workers)]
    )

    assignments = list(
        Assignment.objects.filter(study=study).values(
            "item_id", "annotator_id", "slot", "status", "left_system", "lease_expires_at", "pk"
        )
    )
    by_item: dict[int, list[dict]] = defaultdict(list)
    for row in assignments:
        by_item[row["item_id"]].append(row)
    assert len(by_item) == ITEMS
    # Nobody was ever given one item twice (answered, skipped or lost).
    pairs = Counter((row["item_id"], row["annotator_id"]) for row in assignments)
    assert max(pairs.values()) == 1
    assert not [row for row in assignments if row["status"] == "active"]
    for item_id, rows in by_item.items():
        answered = [row for row in rows if row["status"] == "submitted"]
        assert len(answered) == N, f"item {item_id}: {len(answered)} answers"
        assert len({row["annotator_id"] for row in answered}) == N
        assert sorted(row["slot"] for row in answered) == list(range(N))
        assert all(row["slot"] is None for row in rows if row["status"] == "skipped")
        sides = Counter(row["left_system"] for row in answered)
        assert sorted(sides.values()) == [1, 2], f"item {item_id} not counterbalanced: {sides}"
    assert set(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == {N}
    assert Annotation.objects.filter(assignment__study=study).count() == ITEMS * N
    assert not AnnotationRevision.objects.exists()
    # Answers are in system space, whatever side the preferred list was shown on.
    for annotation in Annotation.objects.filter(assignment__study=study).select_related("assignment"):
        side = annotation.choice.split("_")[0]
        if side in ("left", "right"):
            left = annotation.assignment.left_system
            expected = left if side == "left" else ({"veriscore", "safe"} - {left}).pop()
            assert annotation.preferred_system == expected
    # Every abandoned lease was taken over, and is recorded as such on the quitter's row.
    totals = sum((Counter(outcome) for outcome in quit + first + second), Counter())
    abandoned = totals["abandoned"]
    assert abandoned == QUITTERS
    quitter_ids = {user.pk for user in quitters}
    lost_by_quitters = [row for row in assignments if row["annotator_id"] in quitter_ids and row["status"] == "skipped"]
    assert len(lost_by_quitters) == abandoned
    assert all(row["lease_expires_at"] is not None for row in lost_by_quitters)
    # The threads' own accounts agree with the database.
    assert totals["submitted"] == ITEMS * N
    skipped_rows = [row for row in assignments if row["status"] == "skipped"]
    assert len(skipped_rows) == totals["skipped"] + totals["lost"] + abandoned
    assert len([row for row in skipped_rows if row["lease_expires_at"] is None]) == totals["skipped"]


def test_one_user_clicking_next_in_many_tabs_at_once_holds_one_assignment():
    study, (user,) = make_preference_study("tabs", 10, 2, ["solo"])
    results = run_in_threads([lambda: claim_next(user=user, study=study).pk for _ in range(12)])
    assert len(set(results)) == 1
    assert Assignment.objects.filter(annotator=user).count() == 1


def test_a_crowd_racing_for_the_last_slots_never_over_assigns():
    names = [f"c{k:02d}" for k in range(16)]
    study, users = make_preference_study("last", 2, 3, names)
    results = run_in_threads([lambda user=user: claim_next(user=user, study=study) for user in users])
    got = [assignment for assignment in results if assignment is not None]
    assert len(got) == 6  # 2 items x 3 slots, and 10 annotators told there is nothing left
    per_item = Counter(assignment.item_id for assignment in got)
    assert sorted(per_item.values()) == [3, 3]
    for item_id in per_item:
        slots = Assignment.objects.filter(item_id=item_id).values_list("slot", flat=True)
        assert sorted(slots) == [0, 1, 2]


def test_double_submit_from_two_threads_stores_one_annotation():
    study, (user,) = make_preference_study("double", 3, 1, ["clicker"])
    assignment = claim_next(user=user, study=study)
    answer = SubmittedAnswer(choice="left_slight")
    run_in_threads(
        [lambda: submit(user=user, study=study, assignment_id=assignment.pk, answer=answer) for _ in range(8)]
    )
    assert Annotation.objects.filter(assignment=assignment).count() == 1
    assert not AnnotationRevision.objects.exists()


@pytest.mark.parametrize(("sqlstate", "retried"), [("40P01", True), ("40001", True), ("57014", False), (None, False)])
def test_a_claim_that_postgresql_picks_as_a_deadlock_victim_is_retried_and_other_errors_are_not(sqlstate, retried):
    """The deadlock between a takeover and a fresh claim on one item (test above, on PostgreSQL, now and
    then) rolls one claim back whole: that one is retried; a cancelled statement (57014) is not a race."""
    assert assignments._lost_race(database_error("database error", sqlstate)) is retried


def _counting_deadlocks(monkeypatch, times: int) -> list[int]:
    """The answer fails `times` times as a deadlock's victim would: step by step, in its counter step (which
    locks the item after the assignment), after the annotation row is written, so a retry has to start
    clean; in one statement (PostgreSQL's common submit, workbench/submit_sql.py), with nothing written,
    as PostgreSQL rolls back a statement it picks as the victim."""
    from annotation.workbench import answers, submit_sql

    calls: list[int] = []
    real_added, real_in_one = answers.answer_added, submit_sql.submit_with_first_answer

    def answer_added(**kwargs):
        calls.append(1)
        if len(calls) <= times:
            raise deadlock()
        return real_added(**kwargs)

    def submit_with_first_answer(**kwargs):
        calls.append(1)
        if len(calls) <= times:
            raise deadlock()
        return real_in_one(**kwargs)

    monkeypatch.setattr(answers, "answer_added", answer_added)
    monkeypatch.setattr(submit_sql, "submit_with_first_answer", submit_with_first_answer)
    return calls


@pytest.mark.parametrize("shown_left", [False, True], ids=["step-by-step", "one-statement"])
def test_an_answer_picked_as_a_deadlock_victim_is_stored_once_on_the_retry(monkeypatch, shown_left):
    """A submit locks its assignment, then its item; a claim locks an item, then waits on its assignments:
    on PostgreSQL under load (the crowd test, now and then) the submit can be the victim. It is sent again.
    With the side shown (`shown_left`), PostgreSQL's submit is one statement (workbench/submit_sql.py)."""
    from annotation.models import AnnotatorCount

    study, (user,) = make_preference_study("victim", 2, 1, ["solo"])
    assignment = claim_next(user=user, study=study)
    calls = _counting_deadlocks(monkeypatch, times=2)
    submit(
        user=user,
        study=study,
        assignment_id=assignment.pk,
        answer=SubmittedAnswer(choice="left_slight"),
        shown_left=assignment.left_system if shown_left else None,
    )
    assert len(calls) == 3
    assert Annotation.objects.filter(assignment=assignment).count() == 1
    assert Assignment.objects.get(pk=assignment.pk).status == "submitted"
    assert list(AnnotatorCount.objects.filter(study=study).values_list("annotations", "complete")) == [(1, 1)]


def test_an_answer_that_keeps_losing_says_so_and_stores_nothing(monkeypatch):
    study, (user,) = make_preference_study("loser", 2, 1, ["solo"])
    assignment = claim_next(user=user, study=study)
    _counting_deadlocks(monkeypatch, times=assignments.CLAIM_ATTEMPTS)
    with pytest.raises(ClaimContention, match="not saved, send it again"):
        submit(user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(choice="left_slight"))
    assert not Annotation.objects.filter(assignment=assignment).exists()
    assert Assignment.objects.get(pk=assignment.pk).status == "active"  # still theirs to answer


def test_an_answer_failing_for_another_database_reason_is_not_retried(monkeypatch):
    from annotation.workbench import answers

    study, (user,) = make_preference_study("cancelled", 2, 1, ["solo"])
    assignment = claim_next(user=user, study=study)
    calls: list[int] = []

    def cancelled(**kwargs):
        calls.append(1)
        raise database_error("canceling statement due to statement timeout", "57014")

    monkeypatch.setattr(answers, "answer_added", cancelled)
    with pytest.raises(OperationalError, match="statement timeout"):
        submit(user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(choice="left_slight"))
    assert len(calls) == 1
    assert not Annotation.objects.exists()


def test_a_background_answer_that_keeps_losing_is_a_503_the_page_sends_again(monkeypatch, client):
    study, (user,) = make_preference_study("bg-loser", 2, 1, ["solo"])
    assignment = claim_next(user=user, study=study)
    _counting_deadlocks(monkeypatch, times=assignments.CLAIM_ATTEMPTS)
    client.force_login(user)
    response = client.post(
        f"/studies/{study.slug}/annotate/{assignment.pk}/",
        {"choice": "left_slight", "justification": "fuller list"},
        headers={"X-Claimlab-Workbench": "1"},
    )
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "1"
    assert "send it again" in response.json()["error"]
    assert not Annotation.objects.exists()
