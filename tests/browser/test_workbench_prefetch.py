"""The next item fetched ahead (issue 15, §1), in a real browser, keyboard only.

Exact N with annotators in lockstep, an answer kept through a lost network, back/revise
after a swap, the held lease given back when the annotator leaves, and one keystroke per
label when the study asks for nothing else.
"""

from __future__ import annotations

from collections import Counter

import pytest
from django.urls import reverse

from annotation.models import Annotation, Assignment, Item
from tests.browser.fixtures import VIEWPORT
from tests.support.page_waits import wait_until
from tests.support.workbench_browser import (
    annotate_path,
    log_in,
    preference_study,
    shown_item,
    submit_item,
    verification_study,
    wait_saved,
)

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def wait_ahead(page) -> None:
    """Until the item after the one on screen has been fetched (the server holds two leases)."""
    wait_until(page, "() => document.documentElement.getAttribute('data-ahead') === 'ready'")


def active_ids(user) -> list[int]:
    return sorted(Assignment.objects.filter(annotator=user, status="active").values_list("pk", flat=True))


@pytest.mark.django_db(transaction=True)
def test_labels_swap_in_without_a_page_load_and_every_answer_is_stored(page, guard, annotator):
    study = verification_study("pf-ver", [annotator], items=6, evidence_judgements=True)
    log_in(page, annotator.username, annotate_path(study))
    page.evaluate("window.__samePage = true")  # gone if the page were loaded again
    first = shown_item(page)
    seen = [first]
    for _ in range(5):
        submit_item(page, "y", "n", "s", "Enter")
        assert page.evaluate("window.__samePage === true")  # swapped in, not navigated
        seen.append(shown_item(page))
    assert len(set(seen)) == 6
    wait_saved(page)
    assert Annotation.objects.filter(assignment__study=study).count() == 5
    assert page.url.endswith(annotate_path(study))
    assert "5 of 6 done" in page.locator(".wb-count").inner_text()
    submit_item(page, "y", "y", "c", "Enter")  # the last one: nothing ahead, so the finish page
    assert page.locator("#wb-done").is_visible()
    stored = Annotation.objects.filter(assignment__study=study)
    assert stored.count() == 6
    assert all(a.active_ms is not None and a.active_ms > 0 for a in stored)
    assert all(len(a.evidence_judgements) == 2 for a in stored)
    guard.assert_clean(page)


@pytest.mark.django_db(transaction=True)
def test_three_annotators_in_lockstep_keep_exactly_n(browser, live_server, make_user):
    annotators = [make_user(f"lock{i}") for i in range(3)]
    study = preference_study("pf-lock", annotators, n=2, items=6)
    pages = []
    for number, user in enumerate(annotators):
        context = browser.new_context(viewport=PHONE if number == 2 else VIEWPORT, base_url=live_server.url)
        context.set_default_timeout(10_000)
        page = context.new_page()
        log_in(page, user.username, annotate_path(study))
        pages.append(page)
    finished: set[int] = set()
    keys = ["1", "3", "5"]
    while len(finished) < 3:
        for number, page in enumerate(pages):
            if number in finished:
                continue
            if shown_item(page) == "done":
                finished.add(number)
                continue
            submit_item(page, keys[number], "Enter")
    per_item = Counter(Annotation.objects.filter(assignment__study=study).values_list("assignment__item_id", flat=True))
    assert set(per_item.values()) == {2} and len(per_item) == 6  # exactly N = 2 on every item
    assert not Assignment.objects.filter(study=study, status="active").exists()
    for item in Item.objects.filter(study=study):
        annotators_of = Annotation.objects.filter(assignment__item=item).values_list("assignment__annotator", flat=True)
        assert len(set(annotators_of)) == 2
    for page in pages:
        page.context.close()


@pytest.mark.django_db(transaction=True)
def test_an_answer_given_offline_is_kept_and_sent_when_back(page, context, guard, annotator):
    study = preference_study("pf-offline", [annotator], items=4)
    log_in(page, annotator.username, annotate_path(study))
    wait_ahead(page)
    context.set_offline(True)
    submit_item(page, "2", "Enter")  # the next item shows at once, from the page
    page.wait_for_selector("#wb-outbox:not([hidden])")
    assert "not yet saved" in page.locator("#wb-outbox").inner_text()
    assert not Annotation.objects.exists()
    assert page.evaluate("JSON.parse(localStorage.getItem('claimlab:outbox:pf-offline')).length") == 1
    context.set_offline(False)
    wait_saved(page)
    answer = Annotation.objects.get()
    assert answer.choice == "left_slight"
    assert page.locator("#wb-outbox").is_hidden()
    # the failed tries while offline are the browser's network errors; nothing else went wrong
    assert all("ERR_INTERNET_DISCONNECTED" in error for error in guard.console_errors), guard.console_errors
    assert not guard.page_errors and not guard.external_requests
    assert page.evaluate("window.__cspViolations") == []


@pytest.mark.django_db(transaction=True)
def test_a_lost_lease_is_said_clearly_and_nothing_is_dropped_silently(page, guard, annotator):
    study = preference_study("pf-lost", [annotator], items=3)
    log_in(page, annotator.username, annotate_path(study))
    wait_ahead(page)
    on_screen = int(shown_item(page))
    # The item on screen goes to someone else meanwhile (its lease ran out and it was taken over).
    Assignment.objects.filter(pk=on_screen).update(status="skipped", slot=None)
    submit_item(page, "4", "Enter")
    page.wait_for_selector("#wb-outbox.is-error")
    assert "was not saved" in page.locator("#wb-outbox").inner_text()
    assert not Annotation.objects.filter(assignment_id=on_screen).exists()
    assert not guard.page_errors


@pytest.mark.django_db(transaction=True)
def test_an_answer_that_reaches_the_server_before_the_item_ahead_is_asked_for(page, guard, annotator):
    """The annotator answers before the page's first "ahead" request gets to the server: that
    request is told so (200, "answered"; a 409 here was logged by the browser as a failed load),
    which must not reload the page or say anything; the answer's reply brings the next item and
    the page asks for the one after it."""
    study = preference_study("pf-race", [annotator], items=4)
    held = []

    def hold_first(route) -> None:
        if held:
            route.continue_()
        else:
            held.append(route)  # sent on below, once the answer is saved

    page.route("**/ahead/", hold_first)
    log_in(page, annotator.username, annotate_path(study))
    page.evaluate("window.__samePage = true")
    first = int(shown_item(page))
    for _ in range(250):
        if held:
            break
        page.wait_for_timeout(20)  # lets Playwright hand the request to hold_first
    assert held
    submit_item(page, "1", "Enter", settled=False)  # answered while the first ahead request is held
    wait_saved(page)
    second = int(shown_item(page))
    assert second != first
    with page.expect_response("**/ahead/") as late:
        held[0].continue_()
    assert late.value.status == 200 and late.value.json() == {"ahead": None, "answered": True}
    wait_ahead(page)  # asked again, for the item now on screen
    assert page.evaluate("window.__samePage === true")  # not reloaded
    assert int(shown_item(page)) == second
    assert page.locator("#wb-outbox").is_hidden()
    assert Annotation.objects.get(assignment_id=first).choice == "left_strong"
    assert len(active_ids(annotator)) == 2  # the one on screen and the one ahead
    with page.expect_navigation():
        page.keyboard.press("b")  # back still works
    assert page.url.endswith(reverse("annotation:annotate_revise", args=[study.slug, first]))
    guard.assert_clean(page)


@pytest.mark.django_db(transaction=True)
def test_back_revises_the_answer_just_given(page, guard, annotator):
    study = preference_study("pf-back", [annotator], items=3)
    log_in(page, annotator.username, annotate_path(study))
    first = int(shown_item(page))
    submit_item(page, "1", "Enter")
    with page.expect_navigation():
        page.keyboard.press("b")  # waits for the answer to be on the server, then the revise page
    assert page.url.endswith(reverse("annotation:annotate_revise", args=[study.slug, first]))
    assert page.locator('input[value="left_strong"]').is_checked()
    with page.expect_navigation():
        page.keyboard.press("5")
        page.keyboard.press("Enter")
    assert Annotation.objects.get(assignment_id=first).choice == "right_strong"
    # back on the annotate page: the item fetched ahead earlier is the one shown now
    assert shown_item(page) not in (None, "done", str(first))
    guard.assert_clean(page)


@pytest.mark.django_db(transaction=True)
def test_leaving_the_page_gives_the_item_fetched_ahead_back(page, guard, annotator):
    study = preference_study("pf-leave", [annotator], items=3)
    log_in(page, annotator.username, annotate_path(study))
    wait_ahead(page)
    on_screen = int(shown_item(page))
    for _ in range(100):
        if len(active_ids(annotator)) == 2:
            break
        page.wait_for_timeout(20)
    assert len(active_ids(annotator)) == 2  # the one on screen and the one ahead
    page.goto(reverse("annotation:my_studies"))
    for _ in range(100):
        if active_ids(annotator) == [on_screen]:
            break
        page.wait_for_timeout(20)
    assert active_ids(annotator) == [on_screen]  # the unseen one went back; its slot is free again
    assert sum(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == 1
    guard.assert_clean(page)


@pytest.mark.django_db(transaction=True)
def test_submit_on_label_is_one_keystroke_and_evidence_leads_to_the_label(page, guard, annotator):
    study = verification_study("pf-one", [annotator], items=3, submit_on_label=True, evidence_judgements=True)
    log_in(page, annotator.username, annotate_path(study))
    assert page.locator("#wb-help").get_attribute("open") is not None  # instructions on the first item...
    box = page.locator("#wb-label").bounding_box()
    drawer = page.locator(".wb-drawer").bounding_box()
    assert box["x"] + box["width"] <= drawer["x"]  # ... beside the answer controls, not over them
    page.keyboard.press("y")
    page.keyboard.press("x")  # the last passage: on to the label
    assert "is-next" in page.locator("#wb-label").get_attribute("class")
    submit_item(page, "s")  # the label key submits: 3 keys for 2 passages and a label
    assert page.locator("#wb-help").get_attribute("open") is None  # not again on later items
    submit_item(page, "n", "n", "c")
    wait_saved(page)
    labels = sorted(Annotation.objects.filter(assignment__study=study).values_list("label", flat=True))
    assert labels == ["contradicted", "supported"]
    guard.assert_clean(page)
