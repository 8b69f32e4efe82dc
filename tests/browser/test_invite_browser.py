"""Invite by link, in two browsers: a researcher creates an invite on the members page; a person
who is not logged in opens the link in another browser, signs up, lands on the annotate page
and labels an item. Screenshots of the members page and the sign-up page at 1280x800 and 390x844
(under $CLAIMLAB_SCREENSHOTS when set, else the test's tmp dir); neither page scrolls sideways.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Annotation, Invite, StudyMember
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from tests.browser.screens import SIZES, no_sideways_scroll, shoot_sizes
from tests.conftest import jsonl, verification_item
from tests.support.workbench_browser import shown_item, wait_for_next_item, wait_saved

pytestmark = pytest.mark.browser

PASSWORD = "tall-violet-harbour-42"


@pytest.mark.django_db(transaction=True)
def test_an_invited_person_signs_up_and_labels_an_item(browser, live_server, page, guard, shots):
    User = get_user_model()
    User.objects.create_user(username="rita", password=PASSWORD)
    study = create_study(slug="invited", name="Invited study", kind="verification", annotators_per_item=1)
    add_members(study=study, usernames=["rita"], role="researcher")
    add_members(study=study, usernames=["anna"], role="annotator")
    import_items(study=study, stream=jsonl(*(verification_item(f"c-{n}") for n in range(3))), fmt="jsonl")

    # The researcher creates an invite for two people on the members page.
    members_path = reverse("annotation:study_members", args=["invited"])
    page.goto(f"{reverse('login')}?next={members_path}")
    page.locator("#id_username").fill("rita")
    page.locator("#id_password").fill(PASSWORD)
    with page.expect_navigation():
        page.locator("button[type=submit]").click()
    assert page.locator("#id_role").input_value() == "annotator"  # the add form's default
    page.locator("#id_invite-max_uses").fill("2")
    with page.expect_navigation():
        page.locator("#create-invite button[type=submit]").click()
    link = page.locator("#new-invite-url").inner_text().strip()
    assert link.startswith(live_server.url + "/invite/")
    assert "0 of 2" in page.locator("#invites").inner_text()
    shoot_sizes(page, shots, "members")
    guard.assert_clean(page)

    # Someone not logged in opens the link in another browser and signs up.
    stranger = browser.new_context(viewport=SIZES["desktop"], base_url=live_server.url)
    try:
        other = stranger.new_page()
        errors: list[str] = []
        other.on("pageerror", lambda error: errors.append(str(error)))
        other.goto(link)
        assert "Join Invited study" in other.locator("h1").inner_text()
        shoot_sizes(other, shots, "invite-signup")
        other.set_viewport_size(SIZES["phone"])
        other.locator("#id_username").fill("newbie")
        other.locator("#id_password1").fill(PASSWORD)
        other.locator("#id_password2").fill(PASSWORD)
        with other.expect_navigation():
            other.locator("#invite-signup button[type=submit]").click()
        assert other.url.endswith(reverse("annotation:annotate", args=["invited"]))
        assert no_sideways_scroll(other)

        # ... and labels the first item.
        other.keyboard.press("Escape")  # close the instructions shown on the first item
        claim = other.locator("#wb-claim").inner_text()
        other.locator('input[name="label"][value="supported"]').check()
        before = shown_item(other)
        other.locator("#wb-submit").click()
        wait_for_next_item(other, before)  # the next item, fetched ahead, shows at once
        wait_saved(other)
        assert "1 of 3 done" in other.locator(".wb-count").inner_text()
        assert errors == []
    finally:
        stranger.close()

    newbie = StudyMember.objects.get(study=study, user__username="newbie")
    assert newbie.role == "annotator" and newbie.pseudonym not in ("ann-01", "")
    answer = Annotation.objects.select_related("assignment__item").get(assignment__annotator=newbie.user)
    assert answer.label == "supported" and answer.assignment.item.payload["claim"] == claim
    assert Invite.objects.get().uses == 1

    page.reload()
    assert "1 of 2" in page.locator("#invites").inner_text()
    assert newbie.pseudonym in page.locator("#members").inner_text()
