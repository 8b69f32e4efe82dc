"""Issue 34 in Chromium: Close and Pause ask in a native dialog; the invite and participant links have
copy buttons (Clipboard API, else the text selected) with a "Copied" status; the report's reference
rule is a control. Screenshots at 1280 and 390 px in /tmp/claimlab-screens (tests/browser/screens.py).
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from playwright.sync_api import expect

from annotation.members.services import add_members
from annotation.models import Study
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from tests.browser.screens import SHOTS, shoot_sizes
from tests.conftest import jsonl, verification_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "tall-violet-harbour-42"


def _study() -> Study:
    get_user_model().objects.create_user(username="rita", password=PASSWORD)
    study = create_study(slug="pilot", name="Pilot", kind="verification", annotators_per_item=2)
    add_members(study=study, usernames=["rita"], role="researcher")
    import_items(study=study, stream=jsonl(*(verification_item(f"c-{n}") for n in range(1, 4))), fmt="jsonl")
    import_annotations(
        study=study,
        stream=jsonl(
            *(
                {
                    "item": f"c-{n}",
                    "annotator": worker,
                    "label": "supported" if worker == "w1" or n != 2 else "contradicted",
                }
                for n in range(1, 4)
                for worker in ("w1", "w2")
            )
        ),
        fmt="jsonl",
    )
    return study


def _log_in(page, path: str) -> None:
    page.goto(f"{reverse('login')}?next={path}")
    page.locator("#id_username").fill("rita")
    page.locator("#id_password").fill(PASSWORD)
    with page.expect_navigation():
        page.locator("button[type=submit]").click()


def test_close_and_pause_ask_in_a_dialog(page, guard):
    _study()
    _log_in(page, reverse("annotation:study_detail", args=["pilot"]))
    close = page.locator("#status-actions button[value=closed]")
    close.focus()
    page.keyboard.press("Enter")  # keyboard: the dialog opens, its Cancel has the focus
    dialog = page.locator("#status-dialog")
    assert dialog.is_visible() and "Close Pilot?" in dialog.inner_text()
    SHOTS.mkdir(parents=True, exist_ok=True)
    shoot_sizes(page, SHOTS, "issue34-close-dialog")
    page.keyboard.press("Escape")
    assert not dialog.is_visible()
    assert page.evaluate("document.activeElement.value") == "closed"  # the focus is back on the button
    page.locator("#status-actions button[value=paused]").click()
    page.locator("#status-dialog-no").click()
    assert Study.objects.get(slug="pilot").status == "open"
    page.locator("#status-actions button[value=paused]").click()
    with page.expect_navigation():
        page.locator("#status-dialog-yes").click()
    assert Study.objects.get(slug="pilot").status == "paused"
    assert "now paused" in page.locator(".messages").inner_text()
    with page.expect_navigation():  # Resume needs no confirmation
        page.locator("#status-actions button[value=open]").click()
    assert Study.objects.get(slug="pilot").status == "open"
    guard.assert_clean(page)


def test_the_confirmation_page_without_javascript(browser, live_server):
    _study()
    context = browser.new_context(java_script_enabled=False, base_url=live_server.url)
    try:
        page = context.new_page()
        _log_in(page, reverse("annotation:study_detail", args=["pilot"]))
        with page.expect_navigation():
            page.locator("#status-actions button[value=closed]").click()
        assert "Close Pilot?" in page.locator("#status-question").inner_text()
        assert Study.objects.get(slug="pilot").status == "open"
        shoot_sizes(page, SHOTS, "issue34-close-confirm-page")
        with page.expect_navigation():
            page.locator("#status-confirm-yes").click()
        assert Study.objects.get(slug="pilot").status == "closed"
    finally:
        context.close()


def test_copy_buttons_copy_the_links_and_say_so(page, guard, live_server):
    _study()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    _log_in(page, reverse("annotation:study_members", args=["pilot"]))
    with page.expect_navigation():
        page.locator("#create-invite button[type=submit]").click()
    url = page.locator("#new-invite-url").inner_text().strip()
    button = page.locator("#copy-invite-url")
    button.focus()
    page.keyboard.press("Enter")
    # a locator's wait, not a string evaluated in the page: its CSP (script-src 'self') refuses eval
    expect(page.locator("#copy-invite-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == url
    shoot_sizes(page, SHOTS, "issue34-invite-copied")

    page.goto(reverse("annotation:study_participants", args=["pilot"]))
    link = page.locator("#link-url").inner_text().strip()
    page.locator("#copy-link-url").click()
    expect(page.locator("#copy-link-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == link
    shoot_sizes(page, SHOTS, "issue34-participant-link-copied")
    guard.assert_clean(page)


def test_without_the_clipboard_api_the_link_is_selected(page, guard):
    _study()
    page.add_init_script("Object.defineProperty(navigator, 'clipboard', { value: undefined })")
    _log_in(page, reverse("annotation:study_participants", args=["pilot"]))
    link = page.locator("#link-url").inner_text().strip()
    page.locator("#copy-link-url").click()
    assert "Selected" in page.locator("#copy-link-status").inner_text()
    assert page.evaluate("window.getSelection().toString().trim()") == link
    guard.assert_clean(page)


def test_the_report_reference_rule_is_a_control(page, guard):
    study = _study()
    _log_in(page, reverse("metaeval:report", args=["pilot"]) + "?k=5")
    select = page.locator("#reference-choice")
    assert select.input_value() == study.reference_rule
    page.keyboard.press("Tab")  # the control is reachable
    select.select_option("gold")
    with page.expect_navigation():
        page.locator("#reference-apply").click()
    assert "reference=gold" in page.url and "k=5" in page.url
    assert page.locator("#reference-choice").input_value() == "gold"
    assert "gold" in page.locator("#reference-choice-note").inner_text()
    shoot_sizes(page, SHOTS, "issue34-report-reference")
    guard.assert_clean(page)
