"""Driving a crowd participant's pages in a browser: their own device, arrival, consent, answers.

Since issue 15 an item page keeps the next item claimed ahead, as the annotate page does: a
submit navigates only when nothing is ahead (a check, the end); otherwise the next item swaps in
(tests/support/workbench_browser.py's `submit_item` waits for either).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from tests.annotation.crowd_support import arrival_url
from tests.browser.fixtures import RECORD_CSP
from tests.browser.screens import SIZES, shoot_sizes


def device(browser, live_server, problems: list[str], *, viewport: dict | None = None):
    """A fresh browser context (another person's device) that keeps every request on 127.0.0.1."""
    context = browser.new_context(viewport=viewport or SIZES["desktop"], base_url=live_server.url)
    context.set_default_timeout(15_000)
    context.add_init_script(RECORD_CSP)

    def route(route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            problems.append(f"external request: {route.request.url}")
            route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    return context, page


def label_by_keyboard(page, key: str) -> None:
    """Choose a label with its key and submit with Enter, as a participant would; the page loads the next step."""
    page.locator("#wb-claim").wait_for()
    page.wait_for_timeout(300)  # a moment on the item, so the page's active-time counter has something to count
    page.keyboard.press(key)
    with page.expect_navigation():
        page.keyboard.press("Enter")


def consent_and_start(page, link, pid: str, shots: Path | None = None) -> None:
    """Arrive through the link with a panel ID, consent and start: the first item (or check) is on screen."""
    page.goto(arrival_url(link, pid))
    page.locator("#consent-text").wait_for()
    if shots:
        shoot_sizes(page, shots, "participant-consent")
    page.locator("#consent-agree").check()
    with page.expect_navigation():
        page.locator("#consent-submit").click()
    with page.expect_navigation():
        page.locator("#instructions-start").click()
