"""Adjudication in the adjudicator's frame (issue 29, finding 7).

Why: the adjudicator's "List 1" is always the study's first system, but an annotator's note speaks
of the list *they* saw as List 1, which is the other system for half of an item's annotators (sides
are counterbalanced by slot). Each answer must say how its annotator saw the lists, on the page and
in the API, without ever naming a system when the study hides the names from adjudicators.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotation.adjudication.selectors import item_for_adjudication
from annotation.adjudication.services import set_adjudication_settings
from annotation.members.services import add_members
from annotation.models import Assignment, Study
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from tests.conftest import jsonl, preference_item

pytestmark = pytest.mark.django_db

NOTE = "List 1 is a bit more faithful"


def _two_annotators_chose_their_list_1(make_user, researcher: User) -> tuple[Study, dict[str, Assignment]]:
    """A preference item labelled through the annotate path by two annotators, who saw the lists in
    opposite orders (slot parity) and both chose "List 1, slight" with the same note: so they
    disagree in system space, and the item is in the adjudication queue."""
    study = create_study(slug="frame", name="Frame", kind="preference", annotators_per_item=2)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    import_items(study=study, stream=jsonl(preference_item("p-1")), fmt="jsonl")
    study.refresh_from_db()
    held: dict[str, Assignment] = {}
    for name in ("ann", "ben"):
        user = make_user(name)
        add_members(study=study, usernames=[name], role="annotator")
        assignment = claim_next(user=user, study=study)
        assert assignment is not None
        submit(
            user=user,
            study=study,
            assignment_id=assignment.pk,
            answer=SubmittedAnswer(choice="left_slight", justification=NOTE),
        )
        held[name] = assignment
    assert {a.left_system for a in held.values()} == set(study.systems)  # the two orders, one each
    return study, held


def _by_pseudonym(study: Study, held: dict[str, Assignment]) -> dict[str, str]:
    """annotator username -> pseudonym (what the adjudication page shows)."""
    return {name: study.members.get(user_id=a.annotator_id).pseudonym for name, a in held.items()}


def test_each_answer_says_how_its_annotator_saw_the_lists(make_user, researcher):
    study, held = _two_annotators_chose_their_list_1(make_user, researcher)
    first = study.systems[0]
    rows = {row["annotator"]: row for row in item_for_adjudication(study.items.get())["annotations"]}
    names = _by_pseudonym(study, held)
    same = next(name for name, a in held.items() if a.left_system == first)
    other = next(name for name in held if name != same)
    kept, turned = rows[names[same]], rows[names[other]]
    # Both chose their List 1: on the page that is List 1 for one and List 2 for the other.
    assert (kept["preferred"], kept["preferred_as_seen"], kept["swapped"]) == ("List 1", "List 1", False)
    assert (turned["preferred"], turned["preferred_as_seen"], turned["swapped"]) == ("List 2", "List 1", True)
    assert turned["lists_seen"] == ["List 2", "List 1"] and kept["lists_seen"] == ["List 1", "List 2"]
    assert "swapped" in turned["frame"] and "swapped" not in kept["frame"]
    assert turned["justification"] == NOTE  # the note itself is never rewritten


def test_the_page_shows_the_frame_and_hides_system_names_unless_allowed(client: Client, make_user, researcher):
    study, held = _two_annotators_chose_their_list_1(make_user, researcher)
    client.force_login(researcher)
    url = reverse("annotation:adjudicate_item", args=[study.slug, "p-1"])
    text = client.get(url).content.decode()
    assert "Saw the lists swapped: their List 1 is List 2 here" in text
    assert "Saw the lists in the order shown here" in text
    assert "(their List 1)" in text  # beside "List 2, slight"
    assert 'data-swapped="yes"' in text and 'data-swapped="no"' in text
    for system in study.systems:
        assert system not in text.replace("csrf", "")  # blinded: no system name anywhere on the page

    set_adjudication_settings(study=study, user=researcher, shows_systems=True)
    text = client.get(url).content.decode()
    for left in {a.left_system for a in held.values()}:
        right = next(system for system in study.systems if system != left)
        assert f"Saw {left} as their List 1 and {right} as their List 2" in text


def test_the_api_carries_the_frame_without_naming_hidden_systems(client: Client, make_user, researcher):
    study, held = _two_annotators_chose_their_list_1(make_user, researcher)
    client.force_login(researcher)
    url = reverse("api-adjudication-item", args=[study.slug, "p-1"])
    response = client.get(url)
    body = response.json()
    assert response.status_code == 200
    seen = sorted((row["swapped"], row["preferred_as_seen"], row["preferred"]) for row in body["annotations"])
    assert seen == [(False, "List 1", "List 1"), (True, "List 1", "List 2")]
    assert all(system not in response.content.decode() for system in study.systems)

    set_adjudication_settings(study=study, user=researcher, shows_systems=True)
    rows = client.get(url).json()["annotations"]
    lefts = {a.left_system for a in held.values()}
    assert {row["lists_seen"][0] for row in rows} == lefts  # each one's List 1, by name
    assert all(row["preferred_as_seen"] == "List 1" and row["preferred"] == row["lists_seen"][0] for row in rows)


def test_an_unrecorded_side_is_said_to_be_unknown(make_user, researcher):
    study, held = _two_annotators_chose_their_list_1(make_user, researcher)
    Assignment.objects.filter(pk=held["ann"].pk).update(left_system="")
    rows = item_for_adjudication(study.items.get())["annotations"]
    unknown = [row for row in rows if row["swapped"] is None]
    assert len(unknown) == 1 and unknown[0]["frame"] == "which list they saw as List 1 is not recorded"
    assert unknown[0]["lists_seen"] == [] and unknown[0]["preferred_as_seen"] == ""
