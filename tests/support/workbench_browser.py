"""Driving the annotator workbench in a browser: study builders, logging in, answering.

Since issue 15 a submit on the annotate page does not navigate when the next item was
fetched ahead: the page swaps it in and sends the answer in the background. `submit_item`
waits for either (the swap, or a navigation), and `wait_saved` for the background sends.
"""

from __future__ import annotations

import time
from contextlib import suppress

from django.urls import reverse
from playwright.sync_api import Error as PlaywrightError

from annotation.members.services import add_members
from annotation.models import Annotation, Study
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from tests.conftest import jsonl, preference_item, verification_item
from tests.support.page_waits import wait_until

SYSTEMS = ["sysalpha", "sysbeta"]

#: The item on screen: its assignment id, "done" when the page has no workbench, None while
#: the page waits for the next item (or is between documents).
SHOWN = """() => {
  const wb = document.querySelector("#wb-stage .wb");
  if (!wb) { return document.readyState === "complete" ? "done" : null; }
  return wb.classList.contains("is-waiting") ? null : wb.dataset.assignment;
}"""


#: Pretend the tab is hidden (true) or visible again (false): the timer must pause and resume.
HIDE = """(hidden) => {
  Object.defineProperty(document, "visibilityState", {value: hidden ? "hidden" : "visible", configurable: true});
  document.dispatchEvent(new Event("visibilitychange"));
}"""


def shown_item(page) -> str | None:
    try:
        return page.evaluate(SHOWN)
    except PlaywrightError:  # the page is navigating: no document to ask
        return None


#: True once the page's first request for the item ahead has its answer, or when there is none to wait
#: for: no workbench script (no attribute), an answer already given on this page (`data-outbox`, after
#: which each answer's reply brings the item ahead), nothing left to fetch.
FIRST_AHEAD_SETTLED = """() => {
  const root = document.documentElement;
  return root.getAttribute("data-outbox") !== null || root.getAttribute("data-ahead") !== "pending";
}"""


def wait_first_ahead(page, *, timeout_ms: float = 5000) -> None:
    """Until the page's first request for the item ahead is answered (at most `timeout_ms`, then on anyway).

    A person reads an item before answering it. An answer that reaches the server before the page's
    first ahead request does gets that request refused with a 409, which the browser logs as a
    console error (the page is right to go on: tested in test_workbench_prefetch with `settled=False`).
    """
    # held on purpose, offline, or the page is navigating: press on
    with suppress(PlaywrightError, AssertionError):
        wait_until(page, FIRST_AHEAD_SETTLED, timeout_ms=timeout_ms)


def submit_item(page, *keys: str, timeout: float = 20.0, settled: bool = True) -> None:
    """Press keys; the last one submits. Returns once another item (or the finish page) shows.

    With `settled` (the default), the first answer on a page waits for its first ahead request
    (`wait_first_ahead`), as a reader would.
    """
    if settled:
        wait_first_ahead(page)
    before = shown_item(page)
    for key in keys:
        page.keyboard.press(key)
    wait_for_next_item(page, before, timeout=timeout)


def wait_for_next_item(page, before: str | None, *, timeout: float = 20.0) -> None:
    """Until the workbench shows something other than `before` (another item, or the finish page)."""
    deadline = time.monotonic() + timeout
    while True:
        now_shown = shown_item(page)
        if now_shown is not None and now_shown != before:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the workbench still shows {before!r} {timeout:.0f} s after submitting")
        page.wait_for_timeout(15)


def wait_saved(page, timeout: float = 20.0) -> None:
    """Until every answer given on this page is confirmed by the server (the outbox is empty)."""
    wait_until(
        page, "() => (document.documentElement.getAttribute('data-outbox') || '0') === '0'", timeout_ms=timeout * 1000
    )


def log_in(page, username: str, next_path: str) -> None:
    """The login form, typed: username (autofocused), Tab, password, Enter."""
    page.goto(f"{reverse('login')}?next={next_path}")
    page.locator("#id_username").focus()
    page.keyboard.type(username)
    page.keyboard.press("Tab")
    page.keyboard.type(f"pw-{username}")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith(next_path)


def press_and_wait(page, *keys: str) -> None:
    """Press keys; the last one submits a form and the page navigates (pages without prefetch)."""
    for key in keys[:-1]:
        page.keyboard.press(key)
    with page.expect_navigation():
        page.keyboard.press(keys[-1])


def annotate_path(study: Study) -> str:
    return reverse("annotation:annotate", args=[study.slug])


def annotations_in_order(study: Study) -> list[Annotation]:
    return list(
        Annotation.objects.filter(assignment__study=study)
        .select_related("assignment", "assignment__item")
        .order_by("assignment__submitted_at", "pk")
    )


def preference_study(slug: str, annotators: list, *, n: int = 1, items: int = 2, **options) -> Study:
    study = create_study(
        slug=slug,
        name=f"Preference {slug}",
        kind="preference",
        annotators_per_item=n,
        systems=SYSTEMS,
        instructions="# Compare the lists\n\nPrefer the list that covers the source.",
        **options,
    )
    add_members(study=study, usernames=[user.username for user in annotators], role="annotator")
    if not items:
        return study
    import_items(
        study=study,
        stream=jsonl(
            *(
                preference_item(
                    f"p-{i}",
                    source=f"Source sentence number {i}.",
                    lists={
                        SYSTEMS[0]: [f"Alpha fact {i}.1", f"Alpha fact {i}.2"],
                        SYSTEMS[1]: [f"Beta fact {i}.1"],
                    },
                )
                for i in range(1, items + 1)
            )
        ),
        fmt="jsonl",
    )
    return study


def verification_study(slug: str, annotators: list, *, items: int = 2, **options) -> Study:
    study = create_study(
        slug=slug,
        name=f"Verification {slug}",
        kind="verification",
        annotators_per_item=1,
        instructions="**supported**: the evidence confirms every part of the claim.",
        **options,
    )
    add_members(study=study, usernames=[user.username for user in annotators], role="annotator")
    passages = [
        {
            "text": "The first passage.",
            "title": "First source",
            "url": "https://example.org/one",
            "source_type": "news",
        },
        {
            "text": "The second passage.",
            "title": "Second source",
            "url": "https://example.org/two",
            "source_type": "wiki",
        },
    ]
    if not items:
        return study
    import_items(
        study=study,
        stream=jsonl(
            *(
                verification_item(f"c-{i}", claim=f"Claim number {i} is true.", evidence=passages)
                for i in range(1, items + 1)
            )
        ),
        fmt="jsonl",
    )
    return study
