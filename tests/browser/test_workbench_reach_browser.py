"""The annotator's side of issue 34: the label within one screen of the claim on a phone, what a screen
reader is told after an answer or a skip, and single-key shortcuts that can be turned off (WCAG 2.1.4).

A verification item with ten evidence passages, each to be judged, as the pipelines' files have them
(VeriScore and SAFE keep 9-10 search results per claim). Screenshots at 1280x800 and 390x844 go to
CLAIMLAB_SCREENSHOTS (tests/browser/screens.py) and are looked at.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.members.services import add_members
from annotation.models import Annotation, Study
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from tests.browser.screens import SCREENS, assert_fits, shoot
from tests.conftest import jsonl, verification_item
from tests.support.workbench_browser import annotate_path, log_in, submit_item, wait_first_ahead, wait_saved

pytestmark = pytest.mark.browser

PASSAGES = 10

#: The part of the viewport an element covers, and whether it lies wholly inside it.
IN_VIEW = """(selector) => {
  const r = document.querySelector(selector).getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, height: r.height, inside: r.top >= 0 && r.bottom <= innerHeight + 0.5};
}"""


def ten_passage_study(annotator, *, items: int = 3) -> Study:
    study = create_study(
        slug="ten-passages",
        name="Ten passages",
        kind="verification",
        annotators_per_item=1,
        evidence_judgements=True,
        instructions="**supported**: the evidence confirms every part of the claim.",
    )
    add_members(study=study, usernames=[annotator.username], role="annotator")
    evidence = [
        {
            "text": f"Passage {n} of the search results. " + "It says something about the claim at some length. " * 5,
            "title": f"Search result {n}",
            "url": f"https://example.org/result-{n}",
            "source_type": "web",
        }
        for n in range(1, PASSAGES + 1)
    ]
    records = (
        verification_item(f"c-{i}", claim=f"Claim number {i} holds according to the sources.", evidence=evidence)
        for i in range(1, items + 1)
    )
    import_items(study=study, stream=jsonl(*records), fmt="jsonl")
    return study


def close_instructions(page) -> None:
    page.locator("#wb-help").evaluate("(details) => { details.open = false; }")
    page.evaluate("() => window.scrollTo(0, 0)")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_the_label_is_within_one_screen_of_the_claim_and_every_passage_stays_judgeable(
    screen_context, guard, screen, annotator
):
    study = ten_passage_study(annotator)
    page = screen_context(screen)
    log_in(page, annotator.username, annotate_path(study))
    close_instructions(page)
    assert_fits(page, f"ten passages ({screen})")
    assert "#}" not in page.locator("body").inner_text()  # no template comment shows
    height = SCREENS[screen]["height"]
    claim, label = page.evaluate(IN_VIEW, "#wb-claim"), page.evaluate(IN_VIEW, "#wb-label")
    assert claim["inside"] and label["inside"], (claim, label)  # the claim and the labels on the first screen
    shoot(page, "annotate-ten-passages", screen)
    if screen == "phone":
        options = page.locator("#wb-label .opt")
        for index in range(options.count()):  # each choice on the first screen, a target a thumb can hit
            box = options.nth(index).bounding_box()
            assert box["y"] + box["height"] <= height and box["height"] >= 40, box
        bar = page.evaluate(IN_VIEW, "#wb-answer-bar")
        assert bar["height"] / height <= 0.16, f"the answer bar covers {bar['height'] / height:.0%} of the screen"
        expect(page.locator("#wb-bar-submit")).to_be_visible()
        # Half-way down the passages the label and a submit button are still at hand ...
        passages = page.locator("[data-passage]")
        passages.nth(4).scroll_into_view_if_needed()
        passages.nth(4).locator(".passage-judge .opt").first.click()
        assert page.evaluate(IN_VIEW, "#wb-label")["inside"] and page.evaluate(IN_VIEW, "#wb-bar-submit")["inside"]
        shoot(page, "annotate-ten-passages-middle", screen)
        # ... and no passage's judgement is left under the bar: scrolled to, each clears it.
        for n in range(PASSAGES):
            judge = passages.nth(n).locator(".passage-judge")
            judge.scroll_into_view_if_needed()
            box, bar_top = judge.bounding_box(), page.evaluate(IN_VIEW, "#wb-answer-bar")["top"]
            assert box["y"] + box["height"] <= bar_top + 0.5, f"passage {n}'s judgement is under the answer bar"
        page.evaluate("() => window.scrollTo(0, document.documentElement.scrollHeight)")
        submit, bar_top = page.locator("#wb-submit").bounding_box(), page.evaluate(IN_VIEW, "#wb-answer-bar")["top"]
        assert submit["y"] + submit["height"] <= bar_top + 0.5, "the panel's own Submit is under the bar at the end"
        shoot(page, "annotate-ten-passages-end", screen)
        # Tab reaches a passage's control below the bar's top: it is scrolled clear of the bar (WCAG 2.4.11).
        page.evaluate("() => window.scrollTo(0, 0)")
        passages.nth(1).locator("input[data-judgement]").first.focus()
        for _ in range(5):
            page.keyboard.press("Tab")
        focused = page.evaluate("() => document.activeElement.getBoundingClientRect().bottom")
        assert focused <= page.evaluate(IN_VIEW, "#wb-answer-bar")["top"] + 0.5
    else:
        # Beside the item, as before: the panel is not pinned to the bottom and has one Submit.
        assert page.locator("#wb-answer-bar").evaluate("(bar) => getComputedStyle(bar).position") == "static"
        assert not page.locator("#wb-bar-submit").is_visible()
        label_box, passage_box = page.locator("#wb-label").bounding_box(), page.locator(".passage").first.bounding_box()
        assert label_box["x"] >= passage_box["x"] + passage_box["width"]
        expect(page.locator("#wb-submit")).to_be_in_viewport()
    # The keys still work at either size: every passage judged with y, then the label with its key.
    page.evaluate("() => window.scrollTo(0, 0)")
    page.locator("body").click(position={"x": 1, "y": 1})
    for _ in range(PASSAGES):
        page.keyboard.press("y")
    page.keyboard.press("s")
    assert page.locator('input[name=label][value="supported"]').is_checked()
    wait_first_ahead(page)
    first_claim = page.locator("#wb-claim").inner_text()
    if screen == "phone":
        page.locator("#wb-bar-submit").click()  # the bar's own button sends the answer
    else:
        page.keyboard.press("Enter")
    expect(page.locator("#wb-claim")).not_to_have_text(first_claim)
    wait_saved(page)
    answer = Annotation.objects.get(assignment__study=study)
    assert answer.label == "supported" and len(answer.evidence_judgements) == PASSAGES
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []


@pytest.mark.django_db(transaction=True)
def test_a_screen_reader_is_told_the_outcome_and_the_next_item(page, guard, annotator):
    study = ten_passage_study(annotator, items=4)
    log_in(page, annotator.username, annotate_path(study))
    region = page.locator("#wb-announce")
    assert (region.get_attribute("role"), region.get_attribute("aria-live")) == ("status", "polite")
    assert region.inner_text() == ""  # nothing said on arrival
    page.keyboard.press("Escape")
    for _ in range(PASSAGES):
        page.keyboard.press("x")
    submit_item(page, "i", "Enter")  # the page swaps the next item in (fetched ahead)
    claim = page.locator("#wb-claim").inner_text()
    expect(region).to_have_text(f"Answer sent. Next item shown: 1 of 4 done. Claim: {claim}")
    wait_saved(page)
    # A skip is a page load: the server's word and the item now shown are said once the page is there.
    page.keyboard.press("k")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    claim = page.locator("#wb-claim").inner_text()
    expect(region).to_have_text(
        f"Skipped. That item will not be shown to you again. Next item shown: 1 of 3 done. Claim: {claim}"
    )
    assert guard.page_errors == [] and guard.console_errors == []


@pytest.mark.django_db(transaction=True)
def test_single_key_shortcuts_can_be_turned_off_and_stay_off_in_this_browser(page, guard, annotator):
    study = ten_passage_study(annotator, items=3)
    log_in(page, annotator.username, annotate_path(study))
    switch = page.locator("#wb-shortcuts-on")
    expect(switch).to_be_visible()  # in the shortcuts help, open on the first item
    expect(switch).to_be_checked()
    assert page.get_by_label("Single-key shortcuts on").count() == 1  # a named control
    switch.uncheck()
    assert page.evaluate("() => localStorage.getItem('claimlab:shortcuts')") == "off"
    expect(page.locator("#wb-announce")).to_have_text("Single-key shortcuts off.")
    page.keyboard.press("Escape")  # Esc still closes the help
    assert page.locator("#wb-help").get_attribute("open") is None
    for key in ("y", "s", "k", "f", "?", "]"):
        page.keyboard.press(key)
    assert page.locator("input[data-judgement]:checked").count() == 0
    assert page.locator("input[name=label]:checked").count() == 0
    assert page.locator("details[open]").count() == 0  # neither skip, flag nor the help opened
    assert not page.locator("#wb-label .opt kbd").first.is_visible()  # the keys shown on the choices go too
    # Remembered: a reload (and the next item) keeps them off; the page still works by pointer and Enter.
    page.reload()
    expect(page.locator("#wb-shortcuts-on")).not_to_be_checked()
    page.keyboard.press("s")
    assert page.locator("input[name=label]:checked").count() == 0
    for n in range(PASSAGES):
        page.locator("[data-passage]").nth(n).locator('input[data-judgement="n"]').check()
    page.locator('input[name=label][value="contradicted"]').check()
    wait_first_ahead(page)
    before = page.locator(".wb").get_attribute("data-assignment")
    page.keyboard.press("Enter")
    expect(page.locator(".wb")).not_to_have_attribute("data-assignment", before)
    wait_saved(page)
    assert Annotation.objects.get(assignment__study=study).label == "contradicted"
    # On again: the keys work at once.
    page.locator("#wb-help > summary").click()
    page.locator("#wb-shortcuts-on").check()
    assert page.evaluate("() => localStorage.getItem('claimlab:shortcuts')") is None
    page.locator("#wb-help > summary").click()
    page.keyboard.press("s")
    assert page.locator('input[name=label][value="supported"]').is_checked()
    assert guard.page_errors == [] and guard.console_errors == []
