"""Checks stay checks (issue 29, finding 2): attention and qualification items are never handed out as
items, to participants or annotators, take no slot, and every participant meets the checks the rule implies.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.crowd import services as crowd
from annotation.crowd.selectors import link_warnings
from annotation.members.services import add_members
from annotation.models import Assignment, Item, Participant, ParticipantCheck
from annotation.transfer.services.annotation_import import import_annotations
from annotation.workbench.services import LeaseLost, SubmittedAnswer, claim_next, submit
from tests.annotation.crowd_support import at_items, crowd_study, step_url
from tests.conftest import jsonl
from tests.support.threads import as_a_client, run_in_threads

ATTENTION = ["g-0", "g-1", "g-2", "g-3"]
QUOTA, EVERY = 20, 5


def _with_benchmark_labels(study, items: list[str]) -> None:
    """Give items a label by an imported annotator, so they stand 'in progress' at the top of the claim's walk
    (how the issue saw check items handed out first)."""
    records = [{"item": external_id, "annotator": "bench", "label": "supported"} for external_id in items]
    import_annotations(study=study, stream=jsonl(*records), fmt="jsonl")


#: What the item page's form says it shows: a check (the item's id) or an item (the assignment's id).
SHOWN = re.compile(
    r'name="action" value="(check|answer)"><input type="hidden" name="(?:item|assignment)" value="(\d+)"'
)


def _participant_at_the_pages(link, pid: str, ahead: bool) -> list[int]:
    """Work through the step page as a participant does until the session ends; the items answered at each
    check. With `ahead`, the item page's next item is claimed ahead before each answer, as workbench.js does.

    The page is read from its HTML: the test client's captured contexts come from every thread's renders."""
    study = link.study
    client = Client()
    at_items(client, link, pid)
    done, checks_at = 0, []
    for _ in range(QUOTA * 3):
        page = client.get(step_url(study))
        if page.status_code == 503 and b"Busy" in page.content:
            continue  # "try again": a claim lost its races, as a reload would retry it
        assert page.status_code == 200, page.content[:300]
        shown = SHOWN.search(page.content.decode())
        if shown is None:
            assert b'id="end-code"' in page.content, page.content[:300]
            break
        action, pk = shown.groups()
        if action == "check":
            checks_at.append(done)
            client.post(step_url(study), {"action": "check", "item": pk, "label": "supported"})
            continue
        if ahead:
            client.post(reverse("annotation:participant_ahead", args=[study.slug, pk]))
        answer = client.post(step_url(study), {"action": "answer", "assignment": pk, "label": "supported"})
        assert answer.status_code == 302, answer.content[:300]
        done += 1
    return checks_at


def _annotator(study, user, limit: int) -> int:
    done = 0
    while done < limit and (assignment := as_a_client(claim_next, user=user, study=study)) is not None:
        as_a_client(
            submit, user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported")
        )
        done += 1
    return done


@pytest.mark.django_db(transaction=True)
def test_every_participant_meets_every_check_the_rule_implies_and_no_check_is_handed_out_as_an_item():
    """Quota 20, a check after every 5 items, four attention items: each participant who finishes meets
    exactly 3 checks (after items 5, 10 and 15; the answer that reaches the quota ends the session), in
    the link's order, while participants (some fetching ahead) and annotators work at once, and nobody
    is ever given a check item as an item, though the check items carry a benchmark label that puts them
    first in the claim's walk."""
    study, link = crowd_study(
        "checks-crowd",
        items=60,
        gold=6,
        n=3,
        items_per_participant=QUOTA,
        attention_items=ATTENTION,
        attention_every=EVERY,
        attention_fail_limit=2,
        time_limit_minutes=10_000,
    )
    _with_benchmark_labels(study, [f"g-{k}" for k in range(6)])
    add_members(study=study, usernames=["chk-a1", "chk-a2"], role="annotator")
    annotators = list(get_user_model().objects.filter(username__in=["chk-a1", "chk-a2"]))
    assert crowd.attention_checks_due(link) == 3 and link_warnings(link) == []
    participants = [f"P{k}" for k in range(5)]
    jobs = [
        lambda pid=pid, k=k: _participant_at_the_pages(link, pid, ahead=k % 2 == 1)
        for k, pid in enumerate(participants)
    ]
    jobs += [lambda user=user: _annotator(study, user, 30) for user in annotators]
    results = run_in_threads(jobs)

    for pid, checks_at in zip(participants, results[: len(participants)], strict=True):
        participant = Participant.objects.get(study=study, panel_id=pid)
        assert participant.status == Participant.Status.COMPLETED, pid
        assert checks_at == [5, 10, 15], pid
        met = ParticipantCheck.objects.filter(participant=participant).order_by("answered_at", "pk")
        assert [check.item.external_id for check in met] == ATTENTION[:3]
        assert crowd.items_done(participant) == QUOTA
    assert results[len(participants) :] == [30, 30]
    handed_out = Counter(
        Assignment.objects.filter(study=study, item__external_id__in=ATTENTION).values_list("annotator_id", flat=True)
    )
    bench = get_user_model().objects.get(study_memberships__study=study, study_memberships__pseudonym="bench")
    assert handed_out == Counter({bench.pk: len(ATTENTION)})  # only the imported labels, nobody was given one
    assert set(Item.objects.filter(study=study, is_check=True).values_list("slots_taken", flat=True)) == {1}
    served_gold = Assignment.objects.filter(study=study, item__external_id__in=["g-4", "g-5"]).exclude(annotator=bench)
    assert served_gold.exists()  # gold items that are no checks stay ordinary items


@pytest.mark.django_db
def test_an_item_that_becomes_a_check_is_taken_back_from_whoever_holds_it():
    """Held (on screen), fetched ahead or with a lease that ran out: none of them serves the new check as an item."""
    study, _link = crowd_study("checks-held", items=2, gold=3, n=3)
    add_members(study=study, usernames=["h-1", "h-2", "h-3"], role="annotator")
    one, two, three = (get_user_model().objects.get(username=name) for name in ("h-1", "h-2", "h-3"))
    Item.objects.filter(study=study, gold_label="").update(slots_taken=3)  # only the gold items are left
    first = claim_next(user=one, study=study)
    ahead = claim_next(user=one, study=study, ahead_of=first.pk)
    stale = claim_next(user=two, study=study, now=timezone.now() - timedelta(days=1))  # its lease ran out
    checks = {first.item.external_id, ahead.item.external_id, stale.item.external_id}
    crowd.configure_link(study=study, changes={"attention_items": sorted(checks), "attention_every": 2})
    for assignment in (first, ahead, stale):
        assignment.refresh_from_db()
        assert assignment.status == "skipped" and assignment.slot is None
    assert set(Item.objects.filter(study=study, external_id__in=checks).values_list("slots_taken", flat=True)) == {0}
    served = {claim_next(user=user, study=study) for user in (one, two, three)}
    assert all(assignment is None or assignment.item.external_id not in checks for assignment in served)
    with pytest.raises(LeaseLost, match="no longer assigned to you"):
        submit(user=one, study=study, assignment_id=first.pk, answer=SubmittedAnswer(label="supported"))


@pytest.mark.django_db
def test_a_label_given_before_the_item_became_a_check_stands():
    study, _link = crowd_study("checks-before", items=0, gold=2, n=2)
    add_members(study=study, usernames=["b-1"], role="annotator")
    user = get_user_model().objects.get(username="b-1")
    assignment = claim_next(user=user, study=study)
    submit(user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported"))
    crowd.configure_link(study=study, changes={"attention_items": [assignment.item.external_id], "attention_every": 1})
    assignment.refresh_from_db()
    assert assignment.status == "submitted" and assignment.slot is not None


@pytest.mark.parametrize(
    ("quota", "every", "attention", "qualification", "due", "warned"),
    [
        (20, 5, ["g-0", "g-1", "g-2"], [], 3, False),  # after items 5, 10, 15: three are enough
        (20, 5, ["g-0", "g-1"], [], 3, True),
        (21, 5, ["g-0", "g-1", "g-2"], [], 4, True),  # after 5, 10, 15 and 20
        (20, 5, ["g-0", "g-1", "g-2"], ["g-0"], 3, True),  # a qualification item is answered already
        (20, 0, [], [], 0, False),
    ],
)
@pytest.mark.django_db
def test_the_settings_warn_when_there_are_fewer_check_items_than_a_full_quota_needs(
    quota, every, attention, qualification, due, warned
):
    _study, link = crowd_study(
        "checks-warn",
        items=0,
        gold=4,
        items_per_participant=quota,
        attention_items=attention,
        attention_every=every,
        qualification_items=qualification,
        qualification_pass=0,
    )
    assert crowd.attention_checks_due(link) == due
    warnings = link_warnings(link)
    assert bool(warnings) is warned
    if warned:
        usable = len(crowd.usable_attention_items(link))
        assert f"needs {due} attention check item(s)" in warnings[0]
        assert f"participants who finish meet only {usable} check(s)" in warnings[0]


@pytest.mark.django_db
def test_the_participants_page_and_api_show_the_warning(client, researcher):
    study, _link = crowd_study(
        "checks-page",
        researcher=researcher.username,
        items_per_participant=QUOTA,
        attention_items=["g-0", "g-1"],
        attention_every=EVERY,
    )
    client.force_login(researcher)
    page = client.get(reverse("annotation:study_participants", args=[study.slug]))
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="check-warning"' in text and "needs 3 attention check item(s)" in text
    api = client.get(f"/api/studies/{study.slug}/participants")
    assert api.status_code == 200
    [warning] = api.json()["warnings"]
    assert "after items 5, 10, 15" in warning and "meet only 2 check(s)" in warning
    crowd.configure_link(study=study, changes={"attention_items": ["g-0", "g-1", "g-2"]})
    assert client.get(f"/api/studies/{study.slug}/participants").json()["warnings"] == []
    assert (
        'id="check-warning"'
        not in client.get(reverse("annotation:study_participants", args=[study.slug])).content.decode()
    )
