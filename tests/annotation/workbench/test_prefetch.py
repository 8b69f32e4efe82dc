"""The next item claimed ahead, and submit returning the next assignment (issue 15, §1-§2).

The service's guarantees must hold with two leases per annotator: exactly N per item, the
item on screen first, nothing handed out beyond the one ahead, the unseen one given back
only while it is still unseen; and the one-statement claim on PostgreSQL must store the
same randomisation as the step-by-step one.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from accounts.services import issue_token
from annotation.lib.randomisation import left_system_for, queue_position
from annotation.models import Annotation, Assignment, Item
from annotation.workbench.services import (
    LeaseLost,
    SubmittedAnswer,
    claim_next,
    next_after_submit,
    release_ahead,
    submit,
)
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db

SUPPORTED = SubmittedAnswer(label="supported")


def test_ahead_is_another_item_and_asking_again_claims_nothing_more():
    study, (a1, *_) = make_study(items=5)
    current = claim_next(user=a1, study=study)
    ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
    assert ahead is not None and ahead.item_id != current.item_id
    assert claim_next(user=a1, study=study, ahead_of=current.pk).pk == ahead.pk  # a reload: the same one
    assert claim_next(user=a1, study=study).pk == current.pk  # the oldest is the one on screen
    assert Assignment.objects.filter(annotator=a1, status="active").count() == 2
    submit(user=a1, study=study, assignment_id=current.pk, answer=SUPPORTED)
    assert claim_next(user=a1, study=study).pk == ahead.pk  # the one fetched ahead is now current


def test_ahead_of_an_item_that_is_not_yours_any_more_is_refused():
    study, (a1, a2, _) = make_study(items=5)
    current = claim_next(user=a1, study=study)
    with pytest.raises(LeaseLost):
        claim_next(user=a2, study=study, ahead_of=current.pk)
    submit(user=a1, study=study, assignment_id=current.pk, answer=SUPPORTED)
    with pytest.raises(LeaseLost):
        claim_next(user=a1, study=study, ahead_of=current.pk)


@pytest.mark.parametrize("kind", ["verification", "preference"])
def test_exactly_n_with_every_annotator_holding_one_ahead(kind):
    """Three annotators, N = 2, each always holding the next item: every item gets exactly 2 answers."""
    answer = SUPPORTED if kind == "verification" else SubmittedAnswer(choice="left_slight")
    study, users = make_study(kind, n=2, items=7)
    shown = {user.pk: claim_next(user=user, study=study) for user in users}
    active = True
    while active:
        active = False
        for user in users:
            current = shown[user.pk]
            if current is None:
                continue
            active = True
            claim_next(user=user, study=study, ahead_of=current.pk)
            submit(user=user, study=study, assignment_id=current.pk, answer=answer)
            shown[user.pk] = claim_next(user=user, study=study)
    per_item = Counter(Annotation.objects.filter(assignment__study=study).values_list("assignment__item", flat=True))
    assert sorted(per_item.values()) == [2] * 7
    assert not Assignment.objects.filter(study=study, status="active").exists()
    for assignment in Assignment.objects.filter(study=study).select_related("item"):
        # the randomisation stored is the seed's, whichever claim path took the slot
        key = str(assignment.annotator_id)
        assert assignment.queue_position == queue_position(study.seed, key, assignment.item.external_id)
        assert assignment.left_system == left_system_for(
            study.seed, assignment.item.external_id, assignment.slot, study.systems
        )


def test_the_fresh_claim_takes_the_lowest_free_slot_and_bumps_the_counter_once():
    study, (a1, a2, a3) = make_study(items=1, n=3)
    first = claim_next(user=a1, study=study)
    second = claim_next(user=a2, study=study)
    Assignment.objects.filter(pk=first.pk).update(status="skipped", slot=None)  # slot 0 given back...
    Item.objects.filter(pk=first.item_id).update(slots_taken=1)  # ... and its counter with it
    third = claim_next(user=a3, study=study)
    assert (second.slot, third.slot) == (1, 0)
    assert Item.objects.get(pk=first.item_id).slots_taken == 2


def test_a_counter_behind_the_held_slots_is_repaired_not_overfilled():
    study, (a1, a2, a3) = make_study(items=1, n=2)
    held = claim_next(user=a1, study=study)
    claim_next(user=a2, study=study)
    Item.objects.filter(pk=held.item_id).update(slots_taken=0)  # edited by hand: says empty, is full
    assert claim_next(user=a3, study=study) is None
    assert Item.objects.get(pk=held.item_id).slots_taken == 2
    assert Assignment.objects.filter(item_id=held.item_id).count() == 2


def test_an_unseen_item_goes_back_and_may_come_back_to_the_same_annotator():
    study, (a1, *_) = make_study(items=2, n=1)
    current = claim_next(user=a1, study=study)
    ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
    assert not release_ahead(user=a1, study=study, assignment_id=current.pk, updated_at=current.updated_at)
    assert release_ahead(user=a1, study=study, assignment_id=ahead.pk, updated_at=ahead.updated_at)
    assert not Assignment.objects.filter(pk=ahead.pk).exists()
    assert Item.objects.get(pk=ahead.item_id).slots_taken == 0
    again = claim_next(user=a1, study=study, ahead_of=current.pk)
    assert again.item_id == ahead.item_id  # released, not skipped: it may be served again


def test_an_item_renewed_since_it_was_handed_out_is_not_released():
    study, (a1, *_) = make_study(items=3)
    current = claim_next(user=a1, study=study)
    ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
    later = timezone.now() + timedelta(seconds=5)
    renewed = claim_next(user=a1, study=study, ahead_of=current.pk, now=later)  # another tab of theirs
    assert renewed.pk == ahead.pk
    assert not release_ahead(user=a1, study=study, assignment_id=ahead.pk, updated_at=ahead.updated_at)
    assert Assignment.objects.get(pk=ahead.pk).status == "active"


def test_someone_elses_item_is_never_released():
    study, (a1, a2, _) = make_study(items=3)
    current = claim_next(user=a1, study=study)
    ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
    claim_next(user=a2, study=study)
    assert not release_ahead(user=a2, study=study, assignment_id=ahead.pk, updated_at=ahead.updated_at)
    assert Assignment.objects.filter(pk=ahead.pk, status="active").exists()


def test_next_after_submit_says_when_the_held_item_was_lost():
    study, (a1, a2, _) = make_study(items=4, n=1)
    current = claim_next(user=a1, study=study)
    ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
    submit(user=a1, study=study, assignment_id=current.pk, answer=SUPPORTED)
    Assignment.objects.filter(pk=ahead.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    taken = claim_next(user=a2, study=study)  # reclaims a1's expired lease
    assert taken.item_id == ahead.item_id
    following, lost = next_after_submit(a1, study, ahead.pk)
    assert lost and following is not None and following.item_id not in (current.item_id, ahead.item_id)


# --- the API: submit returns the next assignment -------------------------------------------


def submit_url(assignment_id: int) -> str:
    return reverse("api-assignment-submit", args=[assignment_id])


def test_api_submit_with_next_is_one_round_trip_per_label(client):
    study, (a1, *_) = make_study(items=3, n=1)
    client.force_login(a1)
    response = client.post(reverse("api-assignment-next", args=[study.slug]))
    assignment_id = response.json()["assignment"]["id"]
    seen = [assignment_id]
    while True:
        reply = client.post(
            submit_url(assignment_id), {"label": "supported", "next": True}, content_type="application/json"
        )
        assert reply.status_code == 200, reply.content
        body = reply.json()
        assert body["assignment"] == {**body["assignment"], "id": assignment_id, "status": "submitted"}
        if body["next"] is None:
            break
        assert body["next"]["item"]["kind"] == "verification" and "gold" not in body["next"]["item"]
        assignment_id = body["next"]["assignment"]["id"]
        seen.append(assignment_id)
    assert len(set(seen)) == 3 and Annotation.objects.count() == 3
    assert body["progress"]["done"] == 3


def test_api_submit_with_holding_returns_the_one_after_it(client):
    study, (a1, *_) = make_study(items=4, n=1)
    client.force_login(a1)
    current = claim_next(user=a1, study=study)
    ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
    body = client.post(
        submit_url(current.pk),
        {"label": "supported", "next": True, "holding": ahead.pk},
        content_type="application/json",
    ).json()
    assert body["holding_lost"] is False
    assert body["next"]["assignment"]["id"] not in (current.pk, ahead.pk)
    assert Assignment.objects.filter(annotator=a1, status="active").count() == 2


def test_api_holding_without_next_is_a_clear_400(client):
    study, (a1, *_) = make_study(items=2)
    client.force_login(a1)
    current = claim_next(user=a1, study=study)
    reply = client.post(submit_url(current.pk), {"label": "supported", "holding": 5}, content_type="application/json")
    assert reply.status_code == 400 and "holding" in reply.content.decode()
    assert not Annotation.objects.exists()


def test_api_submit_with_next_costs_fewer_statements_than_two_requests_and_stays_flat(client):
    """The same number of statements for a 10- and a 1,000-item study, and fewer than next + submit apart."""
    counts = {}
    for size in (10, 1000):
        study, (a1, *_) = make_study(items=size, n=1, slug=f"flat-{size}")
        client.force_login(a1)
        current = claim_next(user=a1, study=study)
        with CaptureQueriesContext(connection) as one_trip:
            reply = client.post(
                submit_url(current.pk), {"label": "supported", "next": True}, content_type="application/json"
            )
        following = reply.json()["next"]["assignment"]["id"]
        with CaptureQueriesContext(connection) as two_trips:
            client.post(submit_url(following), {"label": "supported"}, content_type="application/json")
            client.post(reverse("api-assignment-next", args=[study.slug]))
        counts[size] = (len(one_trip), len(two_trips))
    assert counts[10] == counts[1000], counts
    assert counts[10][0] < counts[10][1], counts  # no second authentication, study lookup or progress count


# --- the page: background submit and the item ahead ------------------------------------------


def test_the_page_fetches_ahead_and_a_background_submit_brings_the_one_after(client):
    study, (a1, *_) = make_study(items=4, n=1)
    client.force_login(a1)
    current = claim_next(user=a1, study=study)
    reply = client.post(reverse("annotation:annotate_ahead", args=[study.slug, current.pk]))
    ahead = reply.json()["ahead"]
    assert ahead["id"] != current.pk and f'data-assignment="{ahead["id"]}"' in ahead["html"]
    # its "back" key will revise the item shown before it
    assert reverse("annotation:annotate_revise", args=[study.slug, current.pk]) in ahead["html"]
    reply = client.post(
        reverse("annotation:annotate_submit", args=[study.slug, current.pk]),
        {"label": "supported", "holding": ahead["id"]},
        HTTP_X_CLAIMLAB_WORKBENCH="1",
    )
    body = reply.json()
    assert reply.status_code == 200 and body["saved"] and body["progress"]["done"] == 1
    assert body["ahead"]["id"] not in (current.pk, ahead["id"])
    assert Annotation.objects.get().assignment_id == current.pk


def test_a_background_submit_that_fails_says_why_in_json(client):
    study, (a1, a2, _) = make_study(items=3)
    client.force_login(a1)
    current = claim_next(user=a1, study=study)
    url = reverse("annotation:annotate_submit", args=[study.slug, current.pk])
    bad = client.post(url, {"label": "maybe"}, HTTP_X_CLAIMLAB_WORKBENCH="1")
    assert bad.status_code == 400 and bad.json()["saved"] is False and "maybe" in bad.json()["error"]
    client.force_login(a2)
    theirs = client.post(url, {"label": "supported"}, HTTP_X_CLAIMLAB_WORKBENCH="1")
    assert theirs.status_code == 409 and "no longer assigned" in theirs.json()["error"]
    ahead = client.post(reverse("annotation:annotate_ahead", args=[study.slug, current.pk]))
    assert ahead.status_code == 409
    assert not Annotation.objects.exists()


def test_ahead_for_an_item_answered_meanwhile_is_a_200_that_claims_nothing_and_a_lost_one_a_409(client):
    """workbench.js asks ahead and sends an answer at once; when the answer is served first the ahead
    request is not an error (the browser would log a 409): the answer's reply brings the next item."""
    study, (a1, *_) = make_study(items=4, n=1)
    client.force_login(a1)
    current = claim_next(user=a1, study=study)
    reply = client.post(
        reverse("annotation:annotate_submit", args=[study.slug, current.pk]),
        {"label": "supported"},
        HTTP_X_CLAIMLAB_WORKBENCH="1",
    )
    following = reply.json()["ahead"]["id"]
    ahead = client.post(reverse("annotation:annotate_ahead", args=[study.slug, current.pk]))
    assert ahead.status_code == 200 and ahead.json() == {"ahead": None, "answered": True}
    assert list(Assignment.objects.filter(annotator=a1, status="active").values_list("pk", flat=True)) == [following]
    # one that was lost, not answered, is still a 409
    Assignment.objects.filter(pk=following).update(status="skipped", slot=None)
    lost = client.post(reverse("annotation:annotate_ahead", args=[study.slug, following]))
    assert lost.status_code == 409 and "no longer assigned" in lost.json()["error"]


def test_the_release_route_needs_the_stamp_and_frees_only_the_unseen_one(client):
    study, (a1, *_) = make_study(items=3, n=1)
    client.force_login(a1)
    current = claim_next(user=a1, study=study)
    ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
    url = reverse("annotation:annotate_release", args=[study.slug, ahead.pk])
    assert client.post(url, {}).status_code == 400
    assert client.post(url, {"updated_at": ahead.updated_at.isoformat()}).json() == {"released": True}
    assert list(Assignment.objects.filter(annotator=a1).values_list("pk", flat=True)) == [current.pk]


def test_a_release_picked_as_a_deadlock_victim_is_done_on_the_retry(monkeypatch):
    """Release deletes the assignment, then frees the item's slot: the same order as a submit, so it can be
    a deadlock's victim on PostgreSQL too. The first attempt is rolled back whole (the row is back)."""
    from annotation.workbench import assignment_sql
    from tests.support.deadlock import deadlock

    study, (a1, *_) = make_study(items=2, n=1)
    current = claim_next(user=a1, study=study)
    ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
    real, calls = assignment_sql.give_slot_back, []

    def give_slot_back(item_id: int) -> int:
        calls.append(item_id)
        if len(calls) == 1:
            raise deadlock()
        return real(item_id)

    monkeypatch.setattr(assignment_sql, "give_slot_back", give_slot_back)
    assert release_ahead(user=a1, study=study, assignment_id=ahead.pk, updated_at=ahead.updated_at)
    assert calls == [ahead.item_id, ahead.item_id]
    assert not Assignment.objects.filter(pk=ahead.pk).exists()
    assert Item.objects.get(pk=ahead.item_id).slots_taken == 0


#: Statements of one label through the API with `next` (token auth, a fresh slot claimed), by database:
#: the token; the assignment and its study (permission); the submit (PostgreSQL: one statement that
#: also reads the progress, workbench/submit_sql.py; SQLite: a transaction of its UPDATE ... RETURNING, the
#: item read apart, the annotation, the item's count, the counter, then the progress); the claim
#: (PostgreSQL: the candidates, then the one-statement claim that takes the member lock itself, with no
#: transaction, workbench/services._claim_alone; SQLite: a transaction, the member read, the candidates,
#: then step by step); then the study's status read once the claim has committed (a study closed
#: meanwhile gets the lease back: workbench/services._unless_closed_meanwhile, issue 31). BEGIN and
#: COMMIT count.
STATEMENTS_PER_LABEL = {"postgresql": 6, "sqlite": 19}


@pytest.mark.django_db(transaction=True)  # as in production: no test transaction around the request's own
def test_api_submit_with_next_costs_a_known_number_of_statements(client):
    """A change that adds a round trip to the hot path must say so here (benchmarks/annotate_load.py)."""
    study, (a1, *_) = make_study(items=20, n=3, slug="stmts")
    key = issue_token(user=a1, name="bench").key
    headers = {"HTTP_AUTHORIZATION": f"Token {key}"}
    current = client.post(reverse("api-assignment-next", args=[study.slug]), **headers).json()["assignment"]["id"]
    for _ in range(2):  # the second label is the measured one (the first wrote the token's last use)
        with CaptureQueriesContext(connection) as label:
            reply = client.post(
                submit_url(current), {"label": "supported", "next": True}, content_type="application/json", **headers
            )
        assert reply.status_code == 200, reply.content
        current = reply.json()["next"]["assignment"]["id"]
    assert len(label) == STATEMENTS_PER_LABEL[connection.vendor], [query["sql"][:80] for query in label]
