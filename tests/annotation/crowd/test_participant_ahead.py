"""A crowd participant's next item claimed ahead (issue 15 §1, for the crowd): the rules and the routes.

Only a real assignment is claimed ahead (never past a check, the quota or the time limit); a held
lease counts against nothing and every end gives it back; answers sent in the background go through
`submit` and `after_item`; the routes know the participant by their session only, refuse everyone
else's assignments (404), need CSRF and are never cached.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.crowd import services as crowd
from annotation.crowd.ahead import answers_through, claim_ahead
from annotation.models import Annotation, Assignment, Item, Participant
from annotation.studies.services import set_study_status
from tests.annotation.crowd_support import arrival_url, at_items, crowd_study, gold_only_as_checks, step_url

pytestmark = pytest.mark.django_db
#: The header workbench.js sends with an answer from its outbox.
BACKGROUND = {"X-Claimlab-Workbench": "1"}


def ahead_url(study, assignment_id: int) -> str:
    return reverse("annotation:participant_ahead", args=[study.slug, assignment_id])


def release_url(study, assignment_id: int) -> str:
    return reverse("annotation:participant_release", args=[study.slug, assignment_id])


def on_screen(client: Client, study) -> Assignment:
    page = client.get(step_url(study))
    assert page.status_code == 200, page.content[:300]
    return page.context["assignment"]


def ask_ahead(client: Client, study, shown: Assignment) -> dict:
    reply = client.post(ahead_url(study, shown.pk))
    assert reply.status_code == 200, reply.content
    return reply.json()


def answer_in_background(client: Client, study, assignment_id: int, *, holding: int | None = None, **fields):
    data = {"action": "answer", "assignment": assignment_id, "label": "supported", "active_ms": "4000", **fields}
    if holding is not None:
        data["holding"] = holding
    return client.post(step_url(study), data, headers=BACKGROUND)


def active(participant: Participant) -> list[int]:
    return sorted(
        Assignment.objects.filter(annotator=participant.member.user, status="active").values_list("pk", flat=True)
    )


# --- the page and the rules ------------------------------------------------------------


def test_an_item_page_carries_the_participant_routes_and_a_check_page_does_not(client):
    study, link = crowd_study(items_per_participant=3, attention_items=["g-0"], attention_every=1)
    gold_only_as_checks(study)
    at_items(client, link, "cfg")
    page = client.get(step_url(study))
    shown = page.context["assignment"]
    prefetch = page.context["timer"]["prefetch"]
    assert prefetch["ahead_url"] == ahead_url(study, shown.pk)
    assert prefetch["release_url"] == release_url(study, shown.pk)
    assert prefetch["annotate_url"] == step_url(study)
    assert prefetch["progress"] == {"done": 0, "total": 3}
    assert f'data-assignment="{shown.pk}"'.encode() in page.content and b'id="wb-stage"' in page.content
    client.post(step_url(study), {"action": "answer", "assignment": shown.pk, "label": "supported"})
    check = client.get(step_url(study))
    assert check.context["check"] is True and "prefetch" not in check.context["timer"]


def test_ahead_claims_the_next_item_and_a_background_answer_brings_the_one_after(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=4)
    participant = at_items(client, link, "fast")
    first = on_screen(client, study)
    ahead = ask_ahead(client, study, first)["ahead"]
    assert ahead["id"] != first.pk and f'data-assignment="{ahead["id"]}"' in ahead["html"]
    assert f'name="assignment" value="{ahead["id"]}"' in ahead["html"]
    assert active(participant) == [first.pk, ahead["id"]]
    assert ask_ahead(client, study, first)["ahead"]["id"] == ahead["id"]  # asked again: the same one
    reply = answer_in_background(client, study, first.pk, holding=ahead["id"])
    body = reply.json()
    assert reply.status_code == 200 and body["saved"] and body["progress"] == {"done": 1, "total": 4}
    assert body["ahead"]["id"] not in (first.pk, ahead["id"]) and body["holding_lost"] is False
    assert "go" not in body
    answer = Annotation.objects.get()
    assert answer.assignment_id == first.pk and answer.label == "supported" and answer.active_ms == 4000
    participant.refresh_from_db()
    assert participant.status == "working"


def test_the_held_lease_counts_against_nothing_and_the_quota_ends_with_the_code(client):
    """Quota 2: the item ahead is the second; the second answer completes, with no third item claimed."""
    study, link = crowd_study(items=6, n=1, items_per_participant=2)
    participant = at_items(client, link, "quota")
    first = on_screen(client, study)
    second = ask_ahead(client, study, first)["ahead"]
    assert second is not None
    assert crowd.items_done(participant) == 0  # two leases held, nothing counted
    body = answer_in_background(client, study, first.pk, holding=second["id"]).json()
    assert body["saved"] and body["ahead"] is None  # the second is the last of the quota
    participant.refresh_from_db()
    assert participant.status == "working" and active(participant) == [second["id"]]
    body = answer_in_background(client, study, second["id"]).json()
    assert body["saved"] and body["ahead"] is None and body["go"] == step_url(study)
    participant.refresh_from_db()
    assert participant.status == "completed" and active(participant) == []
    assert Assignment.objects.filter(annotator=participant.member.user).count() == 2
    assert b"DONE123" in client.get(step_url(study)).content


def test_nothing_is_claimed_ahead_of_the_last_item_of_the_quota(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=1)
    participant = at_items(client, link, "one")
    shown = on_screen(client, study)
    assert ask_ahead(client, study, shown) == {"ahead": None}
    assert active(participant) == [shown.pk]


def test_nothing_is_claimed_ahead_of_an_attention_check_and_the_check_is_shown_and_scored(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=4, attention_items=["g-0"], attention_every=2)
    gold_only_as_checks(study)
    participant = at_items(client, link, "checked")
    first = on_screen(client, study)
    second = ask_ahead(client, study, first)["ahead"]
    assert second is not None  # after 1 answer no check is due
    body = answer_in_background(client, study, first.pk, holding=second["id"]).json()
    assert body["ahead"] is None  # a check comes after the second item
    assert ask_ahead(client, study, Assignment.objects.get(pk=second["id"])) == {"ahead": None}
    body = answer_in_background(client, study, second["id"]).json()
    assert body["saved"] and body["ahead"] is None and "go" not in body  # the page goes to the step: the check
    assert active(participant) == []
    check = client.get(step_url(study))
    assert check.context["check"] is True and check.context["item"]["claim"] == "Claim g-0 is true."
    client.post(step_url(study), {"action": "check", "item": check.context["check_item"], "label": "supported"})
    participant.refresh_from_db()
    assert participant.checks_passed == 1
    after = on_screen(client, study)
    assert ask_ahead(client, study, after)["ahead"] is not None  # items again: fetched ahead again


def test_answers_through_counts_answers_and_the_open_items_up_to_the_one_on_screen(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=5)
    participant = at_items(client, link, "count")
    first = on_screen(client, study)
    second = claim_ahead(participant, link, shown_id=first.pk)
    assert answers_through(participant, first.pk) == 1  # the one on screen, not the one ahead
    assert answers_through(participant, second.pk) == 2  # an answer on its way, and the one on screen
    answer_in_background(client, study, first.pk)
    assert answers_through(participant, second.pk) == 2


def test_a_participant_out_of_time_gets_nothing_ahead_and_gives_back_what_they_held(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=4, time_limit_minutes=30)
    participant = at_items(client, link, "late")
    shown = on_screen(client, study)
    ahead = ask_ahead(client, study, shown)["ahead"]
    Participant.objects.filter(pk=participant.pk).update(created_at=timezone.now() - timedelta(minutes=31))
    assert ask_ahead(client, study, shown) == {"ahead": None, "go": step_url(study)}
    participant.refresh_from_db()
    assert participant.status == "timed_out" and active(participant) == []
    assert sum(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == 0
    reply = answer_in_background(client, study, shown.pk, holding=ahead["id"])
    assert reply.status_code == 409 and reply.json() == {
        "saved": False,
        "error": "your time for this study ran out",
        "go": step_url(study),
    }
    assert not Annotation.objects.exists()
    end = client.get(step_url(study))
    assert (
        b"Time is up" in end.content and b"Your answer was not saved: your time for this study ran out" in end.content
    )


def test_a_participant_gone_past_the_time_limit_holds_nothing_once_closed(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=4, time_limit_minutes=30)
    participant = at_items(client, link, "gone")
    shown = on_screen(client, study)
    assert ask_ahead(client, study, shown)["ahead"] is not None
    later = timezone.now() + timedelta(minutes=31)  # the tab closed without a word; the leases still run
    assert crowd.close_overdue(study=study, link=link, now=later) == 1
    participant.refresh_from_db()
    assert participant.status == "timed_out" and active(participant) == []
    assert sum(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == 0


def test_withdrawing_gives_back_the_item_held_ahead_and_later_answers_are_refused_clearly(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=4)
    participant = at_items(client, link, "leaver")
    shown = on_screen(client, study)
    ahead = ask_ahead(client, study, shown)["ahead"]
    client.post(step_url(study), {"action": "withdraw"})
    assert active(participant) == []
    assert sum(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == 0
    assert Assignment.objects.get(pk=ahead["id"]).status == "skipped"
    reply = answer_in_background(client, study, shown.pk)
    assert reply.status_code == 409 and reply.json()["error"] == "you have withdrawn from this study"
    assert ask_ahead(client, study, shown) == {"ahead": None, "go": step_url(study)}


def test_the_release_route_gives_the_unseen_item_back_only_with_its_stamp(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=4)
    participant = at_items(client, link, "away")
    shown = on_screen(client, study)
    ahead = ask_ahead(client, study, shown)["ahead"]
    held = Assignment.objects.get(pk=ahead["id"])
    url = release_url(study, held.pk)
    assert client.post(url, {}).status_code == 400
    assert client.post(release_url(study, shown.pk), {"updated_at": shown.updated_at.isoformat()}).json() == {
        "released": False  # the item on screen is never taken away
    }
    assert client.post(url, {"updated_at": held.updated_at.isoformat()}).json() == {"released": True}
    assert active(participant) == [shown.pk]
    assert not Assignment.objects.filter(pk=held.pk).exists()
    assert Item.objects.get(pk=held.item_id).slots_taken == 0  # back in the pool


def test_a_closed_study_refuses_the_answer_and_sends_the_page_to_the_step(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=4)
    at_items(client, link, "closed")
    shown = on_screen(client, study)
    set_study_status(study=study, status="closed")
    reply = answer_in_background(client, study, shown.pk)
    assert reply.status_code == 403 and reply.json()["go"] == step_url(study)
    assert "not open for annotation" in reply.json()["error"]
    page = client.get(step_url(study))
    assert page.status_code == 503 and b"Your answer was not saved" in page.content


def test_a_lost_lease_is_a_409_that_leaves_the_page_on_its_item(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=4)
    at_items(client, link, "lost")
    shown = on_screen(client, study)
    Assignment.objects.filter(pk=shown.pk).update(status="skipped", slot=None)  # its lease ran out, taken over
    reply = answer_in_background(client, study, shown.pk)
    assert reply.status_code == 409 and "go" not in reply.json()
    assert "no longer assigned" in reply.json()["error"]
    assert client.post(ahead_url(study, shown.pk)).status_code == 409
    assert not Annotation.objects.exists()


def test_a_refused_form_is_said_in_json(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=4)
    at_items(client, link, "typo")
    shown = on_screen(client, study)
    reply = answer_in_background(client, study, shown.pk, label="maybe")
    assert reply.status_code == 400 and reply.json()["saved"] is False and "maybe" in reply.json()["error"]
    assert not Annotation.objects.exists()


# --- who may ask -------------------------------------------------------------------------


def test_another_participants_assignment_is_a_404_on_every_route():
    study, link = crowd_study(items=6, n=2, items_per_participant=4)
    alice, bob = Client(), Client()
    at_items(alice, link, "alice")
    at_items(bob, link, "bob")
    hers = on_screen(alice, study)
    her_ahead = ask_ahead(alice, study, hers)["ahead"]
    on_screen(bob, study)
    assert bob.post(ahead_url(study, hers.pk)).status_code == 404
    stamp = {"updated_at": Assignment.objects.get(pk=her_ahead["id"]).updated_at.isoformat()}
    assert bob.post(release_url(study, her_ahead["id"]), stamp).status_code == 404
    reply = answer_in_background(bob, study, hers.pk)
    assert reply.status_code == 404 and reply.json()["saved"] is False
    assert not Annotation.objects.exists()
    assert Assignment.objects.filter(pk__in=[hers.pk, her_ahead["id"]], status="active").count() == 2


def test_a_browser_without_a_participant_is_refused_and_keeps_its_answer():
    study, link = crowd_study(items=6, n=1, items_per_participant=4)
    someone = Client()
    at_items(someone, link, "someone")
    shown = on_screen(someone, study)
    stranger = Client()
    assert stranger.post(ahead_url(study, shown.pk)).status_code == 404
    assert stranger.post(release_url(study, shown.pk), {"updated_at": "2030-01-01T00:00:00+00:00"}).status_code == 404
    reply = answer_in_background(stranger, study, shown.pk)
    assert reply.status_code == 401 and "open the study link again" in reply.json()["error"]  # workbench.js keeps it
    assert not Annotation.objects.exists()


def test_the_routes_need_a_post_with_csrf_and_are_never_cached():
    study, link = crowd_study(items=6, n=1, items_per_participant=4)
    careful = Client(enforce_csrf_checks=True)
    careful.get(arrival_url(link, "csrf"))
    token = careful.get(step_url(study)).context["csrf_token"]
    for action in ("consent", "start"):
        careful.post(step_url(study), {"action": action, "agree": "yes", "csrfmiddlewaretoken": str(token)})
    shown = on_screen(careful, study)
    assert careful.post(ahead_url(study, shown.pk)).status_code == 403  # no token
    assert careful.post(release_url(study, shown.pk), {"updated_at": shown.updated_at.isoformat()}).status_code == 403
    assert answer_in_background(careful, study, shown.pk).status_code == 403
    assert careful.get(ahead_url(study, shown.pk)).status_code == 405
    assert careful.get(release_url(study, shown.pk)).status_code == 405
    reply = careful.post(ahead_url(study, shown.pk), HTTP_X_CSRFTOKEN=str(token))
    assert reply.status_code == 200 and reply.json()["ahead"] is not None
    for response in (reply, careful.post(release_url(study, shown.pk), HTTP_X_CSRFTOKEN=str(token))):
        assert "no-cache" in response["Cache-Control"] and "no-store" in response["Cache-Control"]
    assert not Annotation.objects.exists()


def test_a_time_budget_is_in_the_progress_so_the_page_can_tell_the_answer_that_reaches_it(client):
    study, link = crowd_study(items=6, n=1, items_per_participant=10, budget_minutes=2)
    at_items(client, link, "budget")
    shown = on_screen(client, study)
    ahead = ask_ahead(client, study, shown)["ahead"]
    body = answer_in_background(client, study, shown.pk, holding=ahead["id"], active_ms="90000").json()
    assert body["progress"] == {"done": 1, "total": 10, "active_ms": 90_000, "budget_ms": 120_000}
    assert body["ahead"] is not None  # a budget cannot be foreseen: the page decides after the answer
    body = answer_in_background(client, study, ahead["id"], active_ms="40000").json()
    assert body["saved"] and body["go"] == step_url(study)  # reached: completed, the one ahead given back
    participant = Participant.objects.get(panel_id="budget")
    assert participant.status == "completed" and active(participant) == []


def test_ahead_for_an_item_answered_meanwhile_is_not_an_error_and_claims_nothing(client):
    """The page asks ahead and sends an answer at once; when the answer is served first, the ahead
    request says so (200, "answered"): the answer's reply brought the next item, nothing more is claimed."""
    study, link = crowd_study(items=6, n=1, items_per_participant=4)
    participant = at_items(client, link, "race")
    first = on_screen(client, study)
    body = answer_in_background(client, study, first.pk).json()
    assert body["saved"] and body["ahead"]["id"] != first.pk
    held = active(participant)
    assert ask_ahead(client, study, first) == {"ahead": None, "answered": True}
    assert active(participant) == held == [body["ahead"]["id"]]
