"""Crowd settings in Chromium (issue 34, finding 2): the check-item picker with JavaScript (search as you
type, ticks kept across searches, the count against what a full quota needs) and without it (plain GET
search and POST save); the settings page with help, currency and pay basis; the "no places left" page.
Screenshots at 1280 and 390 px (tests/browser/screens.py: no page scrolls sideways).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.urls import reverse

from annotation.models import Item, ParticipantLink
from tests.annotation.crowd_support import arrival_url, crowd_study
from tests.browser.fixtures import RECORD_CSP
from tests.browser.screens import SIZES, shoot_sizes
from tests.support.page_waits import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


#: The results hold exactly one row, the item named (a search's answer has been swapped in).
ONLY_ROW = """(id) => {
  const rows = document.querySelectorAll('#picker-results tbody tr');
  return rows.length === 1 && rows[0].dataset.id === id;
}"""


def _log_in(page, user, path: str) -> None:
    page.goto(f"{reverse('login')}?next={path}")
    page.locator("#id_username").fill(user.username)
    page.locator("#id_password").fill(f"pw-{user.username}")
    with page.expect_navigation():
        page.locator("button[type=submit]").click()


def _study(researcher):
    study, link = crowd_study(
        "crowd-settings",
        items=4,
        gold=30,
        researcher=researcher.username,
        items_per_participant=20,
        attention_items=["g-0"],
        attention_every=5,
        pay_per_hour="9.00",
    )
    Item.objects.filter(study=study, external_id="g-12").update(summary="The Eiffel Tower is in Paris.")
    Item.objects.filter(study=study, external_id="g-27").update(summary="Water boils at 100 °C at sea level.")
    return study, link


def test_the_picker_searches_as_you_type_and_keeps_ticks_across_searches(page, guard, shots, researcher):
    study, _link = _study(researcher)
    settings = reverse("annotation:study_participants", args=[study.slug])
    _log_in(page, researcher, settings)
    assert page.locator("#need-attention").get_attribute("class").endswith("msg msg-warning")
    assert "There is only 1 usable: choose 3 or more." in page.locator("#need-attention").inner_text()
    help_id = page.locator("#id_currency").get_attribute("aria-describedby")
    assert "ISO 4217" in page.locator(f"#{help_id}").inner_text()
    shoot_sizes(page, shots, "crowd-settings")

    with page.expect_navigation():  # to its "load": the deferred picker script listens from then on
        page.locator("#pick-attention").click()
    assert page.locator("#picker-usable").inner_text() == "1" and page.locator("#picker-needed").inner_text() == "3"
    assert page.locator("#picker-short").is_visible()
    address = page.url
    page.locator("#picker-q").fill("eiffel")  # as you type: the results change, the page does not
    wait_until(page, ONLY_ROW, "g-12")
    assert page.url != address
    assert "q=eiffel" in urlsplit(page.url).query
    page.locator('#picker-results input[name=add][value="g-12"]').check()
    assert page.locator("#picker-usable").inner_text() == "2" and page.locator("#picker-short").is_visible()
    page.locator("#picker-q").fill("boils")
    wait_until(page, ONLY_ROW, "g-27")
    page.locator('#picker-results input[name=add][value="g-27"]').check()
    assert page.locator("#picker-usable").inner_text() == "3" and not page.locator("#picker-short").is_visible()
    assert "msg-warning" not in (page.locator("#picker-need").get_attribute("class") or "")
    page.locator("#picker-q").fill("")  # a later page of every gold item, through the pager
    page.locator("#picker-pager a[rel=next]").click()
    page.locator('#picker-results tr[data-id="g-29"]').wait_for()
    assert page.locator('#picker-results input[name=add][value="g-27"]').is_checked()  # still ticked
    shoot_sizes(page, shots, "crowd-picker")
    with page.expect_navigation():
        page.locator("#picker-save").click()
    assert "page=2" in urlsplit(page.url).query  # back to the same search
    assert ParticipantLink.objects.get(study=study).attention_items == ["g-0", "g-12", "g-27"]
    assert page.locator("#picker-listed-table tbody tr").count() == 3
    guard.assert_clean(page)


def test_the_picker_works_as_plain_forms_without_javascript(browser, live_server, shots, researcher):
    study, _link = _study(researcher)
    context = browser.new_context(java_script_enabled=False, viewport=SIZES["desktop"], base_url=live_server.url)
    context.add_init_script(RECORD_CSP)
    external: list[str] = []

    def route(route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            external.append(route.request.url)
            route.abort()

    context.route("**/*", route)
    page = context.new_page()
    _log_in(page, researcher, reverse("annotation:participant_checks", args=[study.slug, "attention"]))
    page.locator("#picker-q").fill("g-1")
    with page.expect_navigation():
        page.locator("#picker-q").press("Enter")  # the GET search form, through the form attribute
    assert "q=g-1" in page.url
    page.locator('#picker-results input[name=add][value="g-12"]').check()
    page.locator('#picker-listed input[name=keep][value="g-0"]').uncheck()
    page.locator("#id_add_ids").fill("g-5, g-6")
    with page.expect_navigation():
        page.locator("#picker-save").click()
    assert ParticipantLink.objects.get(study=study).attention_items == ["g-12", "g-5", "g-6"]
    assert "q=g-1" in page.url and page.locator("#picker-usable").inner_text() == "3"
    page.locator("#id_add_ids").fill("i-01")
    with page.expect_navigation():
        page.locator("#picker-save").click()
    assert "without a gold label cannot score anyone: i-01" in page.locator("#picker-errors").inner_text()
    shoot_sizes(page, shots, "crowd-picker-nojs")
    assert external == []
    context.close()


def test_an_arrival_after_the_cap_sees_no_places_left(browser, live_server, shots):
    study, link = crowd_study("crowd-full", max_participants=1, code_full="NOPLACES", redirect_url="")
    for pid in ("first", "second"):
        context = browser.new_context(viewport=SIZES["desktop"], base_url=live_server.url)
        page = context.new_page()
        page.goto(arrival_url(link, pid))
        if pid == "first":
            assert page.locator("#consent-agree").count() == 1
        else:
            assert page.locator("#end-title").inner_text() == "No places left"
            assert page.locator("#end-code").inner_text() == "NOPLACES"
            shoot_sizes(page, shots, "participant-no-places")
        context.close()
    assert study.participants.count() == 1
