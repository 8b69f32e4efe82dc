"""The progress page counts what people did (issue 29, finding 8).

Why: every assignment given up is stored as "skipped", whoever gave it up. The progress page counted
as an annotator's skips the items fetched ahead and given back when a crowd participant's session
ended, and a member's items given back when they were deactivated; it counted a live lease closed
with the study as timed out; and it listed a participant who had withdrawn as any other annotator,
and offered them as an adjudicator. Skips must be the skips pressed, time-outs the leases that ran out.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.adjudication.selectors import adjudicator_choices
from annotation.adjudication.services import set_can_adjudicate
from annotation.crowd import services as crowd
from annotation.crowd.ahead import claim_ahead
from annotation.errors import ServiceError
from annotation.members.membership import set_member_active
from annotation.members.services import add_members
from annotation.models import Assignment, Participant, Study, StudyMember
from annotation.progress import tally
from annotation.progress.selectors import AnnotatorRow, annotator_quality, items_with_slots
from annotation.studies.services import change_status
from annotation.workbench.services import claim_next, release_ahead, skip
from tests.annotation.crowd_support import crowd_study

pytestmark = pytest.mark.django_db


def _annotator(make_user, study: Study, name: str) -> User:
    user = make_user(name)
    add_members(study=study, usernames=[name], role="annotator")
    return user


def _rows(study: Study) -> dict[str, AnnotatorRow]:
    names = dict(StudyMember.objects.filter(study=study).values_list("user__username", "pseudonym"))
    by_pseudonym = {row.pseudonym: row for row in annotator_quality(study)}
    return {username: by_pseudonym[pseudonym] for username, pseudonym in names.items() if pseudonym in by_pseudonym}


def _held(user: User, study: Study) -> Assignment:
    assignment = claim_next(user=user, study=study)
    assert assignment is not None
    return assignment


def _everything_given_up(make_user, researcher: User) -> tuple[Study, Participant]:
    """One study where each way of giving an item up happens once, by a different person.

    ann presses skip (after fetching an item ahead and releasing it); ben holds an item until the
    lease runs out and cat takes it over; dan is deactivated holding an item; a crowd participant
    withdraws holding the item on screen and the one fetched ahead; eve holds an item when the
    study closes.
    """
    study, link = crowd_study(items=12, n=2, gold=0, researcher=researcher.username, items_per_participant=4)
    ann, ben, cat, dan, eve = (_annotator(make_user, study, name) for name in ("ann", "ben", "cat", "dan", "eve"))

    shown = _held(ann, study)
    ahead = claim_next(user=ann, study=study, ahead_of=shown.pk)
    assert ahead is not None
    stamp = Assignment.objects.get(pk=ahead.pk).updated_at
    assert release_ahead(user=ann, study=study, assignment_id=ahead.pk, updated_at=stamp)
    skip(user=ann, study=study, assignment_id=shown.pk)

    lapsed = _held(ben, study)
    Assignment.objects.filter(pk=lapsed.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    assert _held(cat, study).item_id == lapsed.item_id  # taken over: ben's lease ran out

    _held(dan, study)
    set_member_active(study=study, member=StudyMember.objects.get(study=study, user=dan), active=False)

    participant = crowd.arrive(link=link, ids=crowd.PanelIds("leaver", "S1", "X1"))
    crowd.accept_consent(participant=participant)
    crowd.start(participant=participant, link=link)
    on_screen = crowd.claim_for(participant)
    assert on_screen is not None and claim_ahead(participant, link, shown_id=on_screen.pk) is not None
    crowd.withdraw(participant=participant)

    _held(eve, study)
    change_status(study=study, status=Study.Status.CLOSED)
    study.refresh_from_db()
    # Every one of them is stored as skipped: only ann's was pressed, only ben's timed out.
    assert Assignment.objects.filter(study=study, status=Assignment.Status.SKIPPED).count() == 7
    return study, participant


def test_skips_are_the_skips_pressed_and_time_outs_the_leases_that_ran_out(make_user, researcher):
    study, participant = _everything_given_up(make_user, researcher)
    rows = _rows(study)
    counted = {name: (row.skipped, row.timed_out) for name, row in rows.items() if name in {"ann", "ben", "dan", "eve"}}
    assert counted == {"ann": (1, 0), "ben": (0, 1), "dan": (0, 0), "eve": (0, 0)}
    left = next(row for row in rows.values() if row.pseudonym == participant.member.pseudonym)
    assert (left.skipped, left.timed_out, left.left_study) == (0, 0, "withdrawn")
    assert all(row.left_study == "" for name, row in rows.items() if name in {"ann", "ben", "cat", "dan", "eve"})
    # The per-item table says the same.
    items = list(items_with_slots(study))
    assert (sum(item.n_skipped for item in items), sum(item.n_timed_out for item in items)) == (1, 1)
    # And the counters the table is read from (issue 35) equal a count from the rows.
    assert tally.counted(study) == tally.counted_from_rows(study)


def test_the_progress_page_marks_the_withdrawn_participant(client: Client, make_user, researcher):
    study, participant = _everything_given_up(make_user, researcher)
    client.force_login(researcher)
    page = client.get(reverse("annotation:study_progress", args=[study.slug]), {"quality": "now"})
    text = page.content.decode()
    assert page.status_code == 200
    row = text.split(f'data-annotator="{participant.member.pseudonym}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-left-study="withdrawn"' in row
    assert text.count("data-left-study=") == 1  # nobody else is marked


def test_a_withdrawn_participant_is_not_offered_as_an_adjudicator(client: Client, make_user, researcher):
    study, participant = _everything_given_up(make_user, researcher)
    member = participant.member
    offered = set(adjudicator_choices(study).values_list("pseudonym", flat=True))
    assert member.pseudonym not in offered and {"ann", "rita"} <= set(
        adjudicator_choices(study).values_list("user__username", flat=True)
    )
    client.force_login(researcher)
    page = client.get(reverse("annotation:adjudication_queue", args=[study.slug]))
    assert member.pseudonym not in {m.pseudonym for m in page.context["members"]}
    with pytest.raises(ServiceError, match="crowd participant"):
        set_can_adjudicate(member=member, allowed=True)
    client.post(reverse("annotation:member_adjudicator", args=[study.slug, member.pk]), {"can_adjudicate": "1"})
    api = client.patch(
        reverse("api-member-detail", args=[study.slug, member.pk]),
        {"can_adjudicate": True},
        content_type="application/json",
    )
    assert api.status_code == 400
    member.refresh_from_db()
    assert not member.can_adjudicate
