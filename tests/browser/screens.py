"""Screen sizes, fit checks and the studies the fit tests look at (tests/browser/test_fit_screens.py,
test_planning_browser.py). The `screen_context` fixture is in fixtures.py."""

from __future__ import annotations

import os
from pathlib import Path

from annotation.members.services import add_members
from annotation.models import Study
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.verifiers.services import import_predictions
from tests.conftest import jsonl, preference_item, verification_item

SCREENS = {"laptop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
SHOTS = Path(os.environ.get("CLAIMLAB_SCREENSHOTS", "/tmp/claimlab-screens"))
LONG_URL = "https://example.org/" + "a-very-long-path-segment-without-any-break/" * 8 + "page.html"
VERIFIER = "gpt-4o-mini-2024-07-18 with the VeriScore ternary prompt & a long name"

NO_PAGE_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"
CARDS_SPILLING = """() => Array.from(document.querySelectorAll('.card')).filter((card) => {
  const style = getComputedStyle(card);
  return card.scrollWidth > card.clientWidth + 1 && !['auto', 'scroll'].includes(style.overflowX);
}).map((card) => card.id || card.className)"""


#: The sizes of full-page screenshots, by the name their files carry.
SIZES = {"desktop": SCREENS["laptop"], "phone": SCREENS["phone"]}


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def shoot_sizes(page, directory: Path, name: str) -> None:
    """Full-page screenshots at 1280 and 390 px (`name`-desktop.png, `name`-phone.png); the page must fit each."""
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        page.screenshot(path=str(directory / f"{name}-{size}.png"), full_page=True)
        assert no_sideways_scroll(page), f"{name} scrolls sideways at {viewport['width']} px"
    page.set_viewport_size(SIZES["desktop"])


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


def local_panel_link(study: Study, server_url: str, *, items_per_participant: int):
    """The study's participant link, on, with codes, whose completion page is a local stand-in for the
    panel's (no request leaves 127.0.0.1)."""
    from django.urls import reverse

    from annotation.crowd import services as crowd

    return crowd.configure_link(
        study=study,
        changes={
            "enabled": True,
            "code_completed": "DONE123",
            "code_screened_out": "SCREEN9",
            "code_timed_out": "TIME77",
            "redirect_url": f"{server_url}{reverse('login')}?cc={{code}}",
            "items_per_participant": items_per_participant,
        },
    )
