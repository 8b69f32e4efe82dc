"""Exact N with a crowd (issue 13): 60 simulated participants with random quotas, abandonments and returns.

Participants arrive through the link in bursts (real threads, each its own connection),
label until their own random stopping point or the link's quota, some walk away holding
an item (its lease runs out and someone else takes the slot), some come back later with
the same panel ID and carry on. Runs on whatever database the suite runs on (SQLite
first, PostgreSQL in the second CI pass). The checks are the invariants, not timings.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from annotation.crowd import services as crowd
from annotation.models import Assignment, Item, Participant
from annotation.workbench.services import SubmittedAnswer, claim_next, lease_length, submit
from tests.annotation.crowd_support import crowd_study
from tests.support.threads import as_a_client, run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)

ITEMS, N, PARTICIPANTS, BURST, QUOTA = 40, 3, 60, 12, 4


@dataclass
class Plan:
    pid: str
    stop_after: int  # items this person labels before stopping on their own (their "random quota")
    abandon: bool  # stops holding an item (closes the tab) rather than between items
    returns: bool  # comes back in a later burst with the same panel ID


def session(link, plan: Plan, now: datetime) -> int:
    """One visit through the link; returns the items labelled in it."""
    participant = crowd.arrive(link=link, ids=crowd.PanelIds(plan.pid, "S", "X"))
    crowd.accept_consent(participant=participant)
    crowd.start(participant=participant, link=link)
    participant.refresh_from_db()
    user, study, done = participant.member.user, participant.study, 0
    while not participant.ended and done < plan.stop_after:
        assignment = as_a_client(claim_next, user=user, study=study, now=now)
        if assignment is None:
            crowd.end(participant=participant, status=Participant.Status.COMPLETED, now=now)
            break
        if plan.abandon and done == plan.stop_after - 1:
            return done  # walks away holding the item: its lease runs out
        submit(user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported"), now=now)
        crowd.after_item(participant=participant, link=link, now=now)
        participant.refresh_from_db()
        done += 1
    return done


def test_sixty_participants_in_bursts_give_every_item_exactly_n_distinct_people():
    study, link = crowd_study(
        "crowd-n", items=ITEMS, n=N, gold=0, items_per_participant=QUOTA, time_limit_minutes=10_000
    )
    rng = random.Random(13)
    plans = [
        Plan(f"PID{k:03d}", stop_after=rng.randint(1, QUOTA), abandon=rng.random() < 0.3, returns=rng.random() < 0.3)
        for k in range(PARTICIPANTS)
    ]
    clock = timezone.now()
    step = lease_length() + timedelta(seconds=1)  # between bursts every abandoned lease has run out
    returning: list[Plan] = []
    for start in range(0, PARTICIPANTS, BURST):
        burst = plans[start : start + BURST]
        back = [Plan(p.pid, stop_after=QUOTA, abandon=False, returns=False) for p in returning]
        jobs = [lambda p=p, now=clock: session(link, p, now) for p in burst + back]
        run_in_threads(jobs)
        returning = [p for p in burst if p.returns]
        clock += step
    # Latecomers finish whatever is left, one at a time, as a study's last arrivals would.
    extra = 0
    while Assignment.objects.filter(study=study, status="submitted").count() < ITEMS * N:
        session(link, Plan(f"LATE{extra:03d}", stop_after=QUOTA, abandon=False, returns=False), clock)
        clock += step
        extra += 1
        assert extra < 100, "the study never completed"

    submitted = Assignment.objects.filter(study=study, status="submitted")
    per_item: dict[int, list[int]] = defaultdict(list)
    for item_id, annotator_id in submitted.values_list("item_id", "annotator_id"):
        per_item[item_id].append(annotator_id)
    assert set(per_item) == set(Item.objects.filter(study=study).values_list("pk", flat=True))
    assert all(len(people) == N and len(set(people)) == N for people in per_item.values())
    assert not Assignment.objects.filter(study=study, status="active").exclude(lease_expires_at__lt=clock).exists()
    per_person = Counter(submitted.values_list("annotator_id", flat=True))
    assert max(per_person.values()) <= QUOTA  # nobody labels past the quota, returns included
    participants = Participant.objects.filter(study=study)
    assert participants.count() == PARTICIPANTS + extra  # a return is the same participant, not a new one
    returned = [p.pid for p in plans if p.returns]
    assert participants.filter(panel_id__in=returned).count() == len(returned)
    assert sum(p.abandon for p in plans) > 0 and returned
    slots = Counter(submitted.values_list("slot", flat=True))
    assert set(slots) == set(range(N))


def test_a_capped_link_admits_exactly_the_cap_when_many_arrive_at_once():
    study, link = crowd_study("crowd-cap", items=4, n=2, gold=0, max_participants=5)
    outcomes: list[str] = []

    def arrive(pid: str) -> None:
        try:
            crowd.arrive(link=link, ids=crowd.PanelIds(pid))
            outcomes.append("in")
        except crowd.LinkUnusable:
            outcomes.append("full")

    run_in_threads([lambda pid=f"CAP{k:02d}": arrive(pid) for k in range(12)])
    assert Participant.objects.filter(study=study).count() == 5
    assert sorted(outcomes) == ["full"] * 7 + ["in"] * 5
