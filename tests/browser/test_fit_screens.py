"""Pages that fit their screen: the annotate pages, the report and the progress page at 1280x800 and 390x844.

Each page is checked for horizontal scrolling of the whole page
(``scrollWidth <= innerWidth``), for every control being reachable inside the
screen's width, and for tables that are wider than their card scrolling inside
it. Screenshots go to CLAIMLAB_SCREENSHOTS (default /tmp/claimlab-screens) to
be looked at; nothing is asserted on them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import Annotation, Assignment, Item, Study
from annotation.services import add_members, create_study, import_annotations, import_items
from metaeval.verifiers.services import import_predictions

from ..conftest import jsonl, preference_item, verification_item
from .test_workbench_browser import HIDE, log_in

pytestmark = pytest.mark.browser

SCREENS = {"laptop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
SHOTS = Path(os.environ.get("CLAIMLAB_SCREENSHOTS", "/tmp/claimlab-screens"))
LONG_URL = "https://example.org/" + "a-very-long-path-segment-without-any-break/" * 8 + "page.html"
VERIFIER = "gpt-4o-mini-2024-07-18 with the VeriScore ternary prompt & a long name"

NO_PAGE_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"
CARDS_SPILLING = """() => Array.from(document.querySelectorAll('.card')).filter((card) => {
  const style = getComputedStyle(card);
  return card.scrollWidth > card.clientWidth + 1 && !['auto', 'scroll'].includes(style.overflowX);
}).map((card) => card.id || card.className)"""


def shoot(page, name: str, screen: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = SCREENS[screen]
    page.screenshot(path=str(SHOTS / f"{name}-{size['width']}x{size['height']}.png"), full_page=False)


WIDEST = """() => Array.from(document.querySelectorAll('body *'))
  .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
  .slice(0, 5).map((el) => el.tagName + '.' + el.className + '#' + el.id)"""


def assert_fits(page, what: str) -> None:
    width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert page.evaluate(NO_PAGE_SCROLL), (
        f"{what}: the page is {width[0]} px wide on a {width[1]} px screen; beyond it: {page.evaluate(WIDEST)}"
    )
    assert page.evaluate(CARDS_SPILLING) == [], f"{what}: a table spills out of its card"


def assert_reachable(page, selector: str) -> None:
    """Every element matching `selector` is visible and, scrolled to, lies inside the screen's width."""
    elements = page.locator(selector)
    assert elements.count() > 0, selector
    inner = page.evaluate("() => window.innerWidth")
    for index in range(elements.count()):
        element = elements.nth(index)
        element.scroll_into_view_if_needed()
        assert element.is_visible(), f"{selector} #{index} is hidden"
        box = element.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= inner + 1, (selector, index, box)


@pytest.fixture
def screen_context(browser, live_server, guard):
    """A browser context of the given screen size with the same guards as `page` (no external requests)."""
    contexts = []

    def make(screen: str):
        context = browser.new_context(viewport=SCREENS[screen], base_url=live_server.url)
        context.set_default_timeout(10_000)

        def route(route) -> None:
            if route.request.url.startswith(live_server.url):
                route.continue_()
            else:
                guard.external_requests.append(route.request.url)
                route.abort()

        context.route("**/*", route)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: guard.page_errors.append(str(error)))
        page.on("console", lambda m: guard.console_errors.append(m.text) if m.type == "error" else None)
        return page

    yield make
    for context in contexts:
        context.close()


def verification(annotator, researcher) -> Study:
    study = create_study(
        slug="fit-verify", name="Fit verify", kind="verification", annotators_per_item=3, evidence_judgements=True
    )
    add_members(study=study, usernames=[researcher.username], role="researcher")
    add_members(study=study, usernames=[annotator.username], role="annotator")
    passages = [
        {"text": "A passage " * 40, "title": "Source with a long title " * 3, "url": LONG_URL, "source_type": "web"}
        for _ in range(3)
    ]
    claim = "The claim that has to be checked against the evidence, written out at some length. " * 2
    items = [verification_item(f"c-{n}", claim=claim, evidence=passages) for n in range(40)]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    labels = ["supported", "contradicted", "inconclusive"]
    rows = (
        {"item": f"c-{n}", "annotator": who, "label": labels[(n + k * (n % 3 == 0)) % 3]}
        for n in range(40)
        for k, who in enumerate(("w1", "w2"))
    )
    import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl")
    predictions = ({"item": f"c-{n}", "verifier": VERIFIER, "label": labels[n % 3]} for n in range(40))
    import_predictions(study=study, stream=jsonl(*predictions), fmt="jsonl")
    return study


def preference(annotator) -> Study:
    study = create_study(
        slug="fit-pref", name="Fit preference", kind="preference", annotators_per_item=1, systems=["alpha", "beta"]
    )
    add_members(study=study, usernames=[annotator.username], role="annotator")
    claims = [f"Claim {n}: a fact stated in one sentence of moderate length." for n in range(8)]
    item = preference_item(
        "p-1", question="Question: Tell me a bio of Ada Lovelace.", lists={"alpha": claims, "beta": claims[:5]}
    )
    import_items(study=study, stream=jsonl(item), fmt="jsonl")
    return study


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_annotate_pages_fit_and_every_control_is_reachable(screen_context, guard, screen, annotator, researcher):
    verify, prefer = verification(annotator, researcher), preference(annotator)
    page = screen_context(screen)
    log_in(page, annotator.username, reverse("annotation:annotate", args=[verify.slug]))
    page.keyboard.press("Escape")  # the instructions open on the first item
    page.locator("#wb-help").evaluate("(details) => details.removeAttribute('open')")
    assert_fits(page, f"verification annotate page ({screen})")
    assert page.locator("h1").count() == 1
    shoot(page, "annotate-verification", screen)
    assert_reachable(page, "#answer-form .opt")
    assert_reachable(page, "#wb-submit")
    assert_reachable(page, ".wb-tools summary")
    if screen == "phone":
        assert_reachable(page, ".wb-jump")  # leads to the answer panel, which follows the item
    else:
        assert not page.locator(".wb-jump").is_visible()  # beside the item on a laptop: no need
    page.goto(reverse("annotation:annotate", args=[prefer.slug]))
    page.locator("#wb-help").evaluate("(details) => details.removeAttribute('open')")
    page.evaluate("() => window.scrollTo(0, 0)")
    assert_fits(page, f"preference annotate page ({screen})")
    assert page.locator(".wb-question").inner_text().count("Question") == 0  # the "Question:" is not doubled
    shoot(page, "annotate-preference", screen)
    covered = page.evaluate(
        """() => { const r = document.querySelector('#wb-answer').getBoundingClientRect();
        return Math.max(0, Math.min(r.bottom, innerHeight) - Math.max(r.top, 0)) / innerHeight; }"""
    )
    limit = 0.45 if screen == "laptop" else 0.05
    assert covered <= limit, f"the answer panel covers {covered:.0%} of the first screen ({screen})"
    assert_reachable(page, "#answer-form .opt")
    assert_reachable(page, "#answer-form button[type=submit]")
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_report_tables_scroll_inside_their_cards(screen_context, guard, screen, annotator, researcher):
    study = verification(annotator, researcher)
    page = screen_context(screen)
    log_in(page, researcher.username, reverse("metaeval:report", args=[study.slug]))
    assert_fits(page, f"report ({screen})")
    page.locator("#verifiers").scroll_into_view_if_needed()
    shoot(page, "report-verifiers", screen)
    assert VERIFIER in page.locator("#verifiers").inner_text()
    page.goto(reverse("verifiers:list", args=[study.slug]))
    assert_fits(page, f"verifiers page ({screen})")
    shoot(page, "verifiers", screen)
    assert guard.page_errors == [] and guard.external_requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_progress_page_fits_and_refreshes_itself(screen_context, guard, screen, annotator, researcher):
    study = verification(annotator, researcher)
    page = screen_context(screen)
    page.clock.install()
    log_in(page, researcher.username, reverse("annotation:study_progress", args=[study.slug]))
    assert_fits(page, f"progress ({screen})")
    shoot(page, "progress", screen)
    annotations = page.locator('[data-field="annotations"]')
    assert annotations.inner_text() == "80"
    item = Item.objects.get(study=study, external_id="c-0")
    assignment = Assignment.objects.create(
        study=study,
        item=item,
        annotator=annotator,
        slot=2,
        max_slots=3,
        status="submitted",
        submitted_at=timezone.now(),
    )
    Annotation.objects.create(assignment=assignment, label="supported", raw_label="supported", active_ms=4000)
    page.evaluate(HIDE, True)
    page.clock.run_for(30_000)  # hidden: no refresh however long
    assert annotations.inner_text() == "80"
    assert "Paused" in page.locator("#progress-live-status").inner_text()
    page.evaluate(HIDE, False)  # shown again: refreshed at once
    page.wait_for_function("() => document.querySelector('[data-field=annotations]').textContent === '81'")
    assert page.locator('[data-field="last-hour"]').inner_text() == "1"
    Annotation.objects.filter(assignment=assignment).delete()
    page.clock.run_for(11_000)  # the next tick
    page.wait_for_function("() => document.querySelector('[data-field=annotations]').textContent === '80'")
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []
