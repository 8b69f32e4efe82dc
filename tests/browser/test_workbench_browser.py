"""The annotator workbench in a real browser, driven by the keyboard alone.

No mouse clicks anywhere: navigation by address, focus and keys. Every test
ends by checking that the page logged no console error, reported no CSP
violation and sent no request away from 127.0.0.1.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Annotation, AnnotationRevision, Assignment, Item
from tests.support.workbench_browser import (
    HIDE,
    SYSTEMS,
    annotate_path,
    annotations_in_order,
    log_in,
    preference_study,
    press_and_wait,
    shown_item,
    submit_item,
    verification_study,
    wait_saved,
)

pytestmark = pytest.mark.browser

PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


# --- fixtures ------------------------------------------------------------------


@pytest.fixture
def bob(make_user):
    return make_user("bob")


# --- the tests -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_preference_study_with_the_keyboard_alone(page, guard, annotator):
    study = preference_study("kb-pref", [annotator], justification_required=True)
    log_in(page, annotator.username, reverse("annotation:study_detail", args=[study.slug]))
    page.locator("#start-annotating").focus()
    press_and_wait(page, "Enter")

    help_panel = page.locator("#wb-help")
    assert help_panel.get_attribute("open") is not None  # instructions open on the first item
    assert page.locator(".wb-drawer h3").inner_text() == "Compare the lists"
    page.keyboard.press("?")
    assert help_panel.get_attribute("open") is None
    assert "0 of 2 done" in page.locator(".wb-count").inner_text()
    for name in SYSTEMS:
        assert name not in page.content()

    page.keyboard.press("1")
    assert page.locator('input[value="left_strong"]').is_checked()
    page.keyboard.press("Enter")  # no justification yet: a hint, the box gets focus, nothing is sent
    assert page.locator('[data-hint-for="justification"]').is_visible()
    assert page.evaluate("document.activeElement.id") == "id_justification"
    assert not Annotation.objects.exists()
    page.keyboard.type("List 1 covers the source.")
    submit_item(page, "Control+Enter")

    assert "1 of 2 done" in page.locator(".wb-count").inner_text()
    page.keyboard.press("5")
    page.keyboard.press("j")
    page.keyboard.type("5 in a text box is just text")  # shortcuts do not fire while typing
    assert page.locator('input[value="right_strong"]').is_checked()
    submit_item(page, "Control+Enter")
    assert page.locator("#wb-done").is_visible()
    guard.assert_clean(page)

    first, second = annotations_in_order(study)
    assert first.choice == "left_strong" and first.strength == "strong"
    assert first.preferred_system == first.assignment.left_system
    assert first.justification == "List 1 covers the source."
    assert second.choice == "right_strong"
    assert second.preferred_system == next(s for s in SYSTEMS if s != second.assignment.left_system)
    assert second.justification == "5 in a text box is just text"
    for annotation in (first, second):
        assert annotation.label == ("a_strong" if annotation.preferred_system == SYSTEMS[0] else "b_strong")
        assert annotation.active_ms is not None and annotation.active_ms > 0
        assert annotation.source == "web"


@pytest.mark.django_db(transaction=True)
def test_verification_study_with_evidence_judgements_by_keyboard(page, guard, annotator):
    study = verification_study("kb-ver", [annotator], evidence_judgements=True)
    log_in(page, annotator.username, annotate_path(study))
    page.keyboard.press("Escape")  # close the instructions shown on the first item
    assert page.locator("#wb-help").get_attribute("open") is None

    link = page.locator(".passage-title a").first
    assert link.get_attribute("rel") == "noopener noreferrer nofollow" and link.get_attribute("target") == "_blank"
    assert page.locator("#wb-passage-0").get_attribute("class").split().count("is-current") == 1
    page.keyboard.press("u")  # passage 1 useful
    page.keyboard.press("y")  # passage 1 supports; moves on to passage 2
    page.keyboard.press("x")  # passage 2 irrelevant
    page.keyboard.press("s")  # label: supported
    assert page.locator('#wb-passage-1 input[value="irrelevant"]').is_checked()
    submit_item(page, "Enter")

    page.keyboard.press("?")  # the definitions, one key away
    assert page.locator(".wb-drawer").is_visible()
    assert "the evidence confirms every part of the claim" in page.locator(".wb-drawer").inner_text()
    page.keyboard.press("?")
    page.keyboard.press("2")  # label: contradicted (by number)
    page.keyboard.press("Enter")  # passages not judged yet: hint on passage 1, nothing sent
    assert page.locator('[data-hint-for="evidence_0"]').is_visible()
    page.keyboard.press("n")
    page.keyboard.press("]")
    page.keyboard.press("[")
    page.keyboard.press("]")
    page.keyboard.press("n")
    page.keyboard.press("j")
    page.keyboard.type("Passage one says otherwise; y n x are letters here.")
    page.keyboard.press("Escape")  # leave the box; shortcuts work again
    submit_item(page, "Enter")
    assert page.locator("#wb-done").is_visible()
    guard.assert_clean(page)

    first, second = annotations_in_order(study)
    assert first.label == "supported" and first.justification == ""
    assert first.evidence_judgements == [
        {"index": 0, "judgement": "support", "useful": True},
        {"index": 1, "judgement": "irrelevant", "useful": False},
    ]
    assert second.label == "contradicted"
    assert second.justification == "Passage one says otherwise; y n x are letters here."
    assert second.evidence_judgements == [
        {"index": 0, "judgement": "not_support", "useful": False},
        {"index": 1, "judgement": "not_support", "useful": False},
    ]
    assert all(annotation.active_ms and annotation.active_ms > 0 for annotation in (first, second))


@pytest.mark.django_db(transaction=True)
def test_untrusted_text_is_shown_as_text_and_runs_nothing(page, guard, annotator):
    verification = verification_study("xss-ver", [annotator], items=0, evidence_judgements=True)
    Item.objects.create(
        study=verification,
        external_id="xss",
        payload={
            "claim": PAYLOAD,
            "context": PAYLOAD,
            "evidence": [
                {"text": PAYLOAD, "title": PAYLOAD, "url": "javascript:window.__pwned=1", "source_type": PAYLOAD},
                {
                    "text": "Plain.",
                    "title": "Quoted url",
                    "url": 'https://example.org/"><img src=x onerror="window.__pwned=1">',
                    "source_type": "web",
                },
            ],
        },
    )
    preference = preference_study("xss-pref", [annotator], items=0)
    Item.objects.create(
        study=preference,
        external_id="xss",
        payload={
            "source": PAYLOAD,
            "question": PAYLOAD,
            "lists": {SYSTEMS[0]: [PAYLOAD], SYSTEMS[1]: [PAYLOAD, "fine"]},
        },
    )
    log_in(page, annotator.username, annotate_path(verification))
    page.keyboard.press("Escape")
    page.locator("#wb-context summary").focus()
    page.keyboard.press("Enter")  # open the context
    assert page.locator("#wb-claim").inner_text() == PAYLOAD
    assert page.locator("#wb-context p").inner_text() == PAYLOAD
    assert page.locator("#wb-passage-0 .passage-title").inner_text() == PAYLOAD
    assert page.locator("#wb-passage-0 .passage-type").inner_text() == PAYLOAD
    assert page.locator("#wb-passage-0 .passage-text").inner_text() == PAYLOAD
    assert page.locator("#wb-passage-0 a").count() == 0  # a javascript: URL is not made a link
    assert page.locator("#wb-passage-0 .passage-url").inner_text() == "javascript:window.__pwned=1"
    assert (
        page.locator("#wb-passage-1 a").get_attribute("href")
        == 'https://example.org/"><img src=x onerror="window.__pwned=1">'
    )
    assert page.locator(".wb img").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    guard.assert_clean(page)

    page.goto(annotate_path(preference))
    assert page.locator("#wb-source").inner_text() == PAYLOAD
    assert page.locator(".wb-question .text").inner_text() == PAYLOAD
    assert PAYLOAD in page.locator("#wb-list-1").inner_text() and PAYLOAD in page.locator("#wb-list-2").inner_text()
    assert page.locator(".wb img").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert not [url for url in guard.requests if url.rstrip("/").endswith("/x")]
    guard.assert_clean(page)


@pytest.mark.django_db(transaction=True)
def test_reload_and_new_login_resume_the_same_item_in_the_same_order(page, guard, browser, live_server, annotator, bob):
    study = preference_study("resume", [annotator, bob], n=2, items=3)
    log_in(page, annotator.username, annotate_path(study))
    shown = (
        page.locator("#wb-source").inner_text(),
        page.locator("#wb-list-1").inner_text(),
        page.locator("#wb-list-2").inner_text(),
    )
    page.keyboard.press("3")  # chosen, not submitted
    page.reload()
    assert (
        page.locator("#wb-source").inner_text(),
        page.locator("#wb-list-1").inner_text(),
        page.locator("#wb-list-2").inner_text(),
    ) == shown

    page.locator("button:has-text('Log out')").focus()
    press_and_wait(page, "Enter")
    log_in(page, annotator.username, annotate_path(study))
    assert (
        page.locator("#wb-source").inner_text(),
        page.locator("#wb-list-1").inner_text(),
        page.locator("#wb-list-2").inner_text(),
    ) == shown
    # the same item on screen, and nothing claimed beyond it and the one fetched ahead
    held = Assignment.objects.filter(study=study, annotator=annotator)
    assert held.count() <= 2 and str(held.earliest("pk").pk) == shown_item(page)
    guard.assert_clean(page)

    # A second annotator gets one of the items anna holds first (items in progress finish
    # first; anna holds the one on her screen and the one fetched ahead), with the lists swapped.
    other = browser.new_context(viewport={"width": 1366, "height": 768}, base_url=live_server.url)
    try:
        bobs_page = other.new_page()
        log_in(bobs_page, bob.username, annotate_path(study))
        bobs = Assignment.objects.get(pk=int(shown_item(bobs_page)))
        annas = Assignment.objects.get(annotator=annotator, item=bobs.item)
        if annas.pk == int(shown_item(page)):
            assert bobs_page.locator("#wb-source").inner_text() == shown[0]
            assert bobs_page.locator("#wb-list-1").inner_text() == shown[2]
            assert bobs_page.locator("#wb-list-2").inner_text() == shown[1]
    finally:
        other.close()
    left = dict(Assignment.objects.filter(item=bobs.item).values_list("annotator__username", "left_system"))
    assert set(left.values()) == set(SYSTEMS)


@pytest.mark.django_db(transaction=True)
def test_back_revises_an_answer_and_flag_and_skip_work(page, guard, annotator):
    study = verification_study("revise", [annotator], items=3)
    log_in(page, annotator.username, annotate_path(study))
    page.keyboard.press("Escape")
    submit_item(page, "s", "Enter")
    current_claim = page.locator("#wb-claim").inner_text()
    wait_saved(page)
    first = Annotation.objects.get()
    assert first.label == "supported"

    press_and_wait(page, "b")  # back to the previous answer
    assert page.locator(".wb-banner").is_visible()
    assert page.locator('input[value="supported"]').is_checked()
    assert page.locator("#wb-claim").inner_text() == first.assignment.item.payload["claim"]
    press_and_wait(page, "c", "Enter")
    assert page.locator("#wb-claim").inner_text() == current_claim  # back where they were
    first.refresh_from_db()
    assert first.label == "contradicted"
    revision = AnnotationRevision.objects.get(annotation=first)
    assert revision.old_value["label"] == "supported" and revision.new_value["label"] == "contradicted"

    page.keyboard.press("f")
    assert page.evaluate("document.activeElement.id") == "wb-flag-reason"
    page.keyboard.type("The claim is garbled")
    press_and_wait(page, "Enter")
    # the oldest active one is on screen (the other was fetched ahead)
    flagged = Assignment.objects.filter(study=study, annotator=annotator, status=Assignment.Status.ACTIVE).earliest(
        "pk"
    )
    assert flagged.flagged and flagged.flag_reason == "The claim is garbled"
    assert page.locator("#wb-claim").inner_text() == current_claim

    page.keyboard.press("k")
    assert page.evaluate("document.activeElement.id") == "wb-skip-confirm"
    press_and_wait(page, "Enter")
    flagged.refresh_from_db()
    assert flagged.status == Assignment.Status.SKIPPED
    assert page.locator("#wb-claim").inner_text() not in (current_claim, first.assignment.item.payload["claim"])
    assert "1 of 2 done" in page.locator(".wb-count").inner_text()
    guard.assert_clean(page)


@pytest.mark.django_db(transaction=True)
def test_active_time_stops_while_the_tab_is_hidden(page, guard, annotator):
    """On Playwright's fake clock: 5 s visible, 60 s hidden, 2 s visible -> about 7 s, not 67 s."""
    study = preference_study("timer", [annotator], items=1)
    page.clock.install()
    log_in(page, annotator.username, annotate_path(study))
    page.keyboard.press("Escape")
    page.clock.run_for(5_000)
    page.evaluate(HIDE, True)
    page.clock.run_for(60_000)
    page.evaluate(HIDE, False)
    page.clock.run_for(2_000)
    submit_item(page, "3", "Enter")
    guard.assert_clean(page)
    active_ms = Annotation.objects.get().active_ms
    assert 7_000 <= active_ms < 60_000, active_ms
