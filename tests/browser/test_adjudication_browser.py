"""An adjudicator resolves a small disagreement queue with the keyboard alone, at laptop and phone
size; screenshots of the item and queue pages (1280x800 and 390x844) go to /tmp for a look."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Adjudication, Annotation, StudyMember
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from tests.conftest import jsonl, verification_item
from tests.support.workbench_browser import log_in, press_and_wait

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/claimlab-adjudication")
#: Per item, the three annotators' labels: c-2, c-3 and c-4 are split, c-1 is unanimous.
LABELS = {
    "c-1": ("supported", "supported", "supported"),
    "c-2": ("supported", "contradicted", "supported"),
    "c-3": ("inconclusive", "contradicted", "contradicted"),
    "c-4": ("supported", "contradicted", "inconclusive"),
}


@pytest.fixture
def queue_study(make_user):
    make_user("ada")
    study = create_study(slug="adj", name="Adjudication demo", kind="verification", annotators_per_item=3)
    add_members(study=study, usernames=["ada"], role="annotator")
    StudyMember.objects.filter(study=study, user__username="ada").update(can_adjudicate=True)
    import_items(study=study, stream=jsonl(*(verification_item(name) for name in LABELS)), fmt="jsonl")
    import_annotations(
        study=study,
        stream=jsonl(
            *(
                {"item": name, "annotator": f"w{n}", "label": label, "justification": f"w{n} on {name}"}
                for name, labels in LABELS.items()
                for n, label in enumerate(labels, start=1)
            )
        ),
        fmt="jsonl",
    )
    return study


def shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_adjudicator_resolves_the_queue_with_the_keyboard(page, guard, queue_study):
    study = queue_study
    queue_path = reverse("annotation:adjudication_queue", args=[study.slug])
    page.set_viewport_size({"width": 1280, "height": 800})
    log_in(page, "ada", queue_path)
    assert page.locator("#adj-size").inner_text() == "3"
    shoot(page, "queue-1280")
    page.locator("#adj-start").focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith(reverse("annotation:adjudicate_item", args=[study.slug, "c-2"]))
    assert page.locator("#adj-answers li").count() == 3
    assert "w2 on c-2" in page.locator("#adj-answers").inner_text()
    shoot(page, "item-1280")

    page.keyboard.press("2")  # contradicted, by number
    page.keyboard.press("j")
    page.keyboard.type("2 is only text here")  # shortcuts do not fire while typing
    page.keyboard.press("Escape")
    assert page.locator("input[name=label][value=contradicted]").is_checked()
    press_and_wait(page, "Enter")
    assert page.url.endswith(reverse("annotation:adjudicate_item", args=[study.slug, "c-3"]))

    page.set_viewport_size({"width": 390, "height": 844})
    shoot(page, "item-390")
    page.keyboard.press("Enter")  # nothing chosen: the hint, and the page stays
    assert page.locator('[data-hint-for="label"]').is_visible()
    assert not Adjudication.objects.filter(item__external_id="c-3").exists()
    press_and_wait(page, "c", "Enter")  # contradicted, by its letter
    press_and_wait(page, "i", "Enter")  # c-4: inconclusive; the queue is done

    assert page.url.endswith(queue_path)
    assert page.locator("#adj-finished").is_visible()
    assert page.locator("#adj-done").inner_text() == "3"
    shoot(page, "queue-390")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the queue page is {width}px wide on a 390px phone"

    stored = dict(Adjudication.objects.filter(study=study).values_list("item__external_id", "label"))
    assert stored == {"c-2": "contradicted", "c-3": "contradicted", "c-4": "inconclusive"}
    assert Adjudication.objects.get(item__external_id="c-2").note == "2 is only text here"
    assert Annotation.objects.filter(assignment__study=study).count() == 12  # annotations untouched
    guard.assert_clean(page)


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_researchers_queue_page_fits(page, guard, queue_study, make_user, width, height):
    """The researcher's queue page (settings, import, adjudicator flags) fits a laptop and a phone."""
    make_user("rita")
    add_members(study=queue_study, usernames=["rita"], role="researcher")
    queue_path = reverse("annotation:adjudication_queue", args=[queue_study.slug])
    page.set_viewport_size({"width": width, "height": height})
    log_in(page, "rita", queue_path)
    assert page.locator("#id_reference_rule").input_value() == "adjudicated_else_majority"
    page.locator("#id_reference_rule").select_option("majority")
    with page.expect_navigation():
        page.locator("form.adj-settings button[type=submit]").click()
    queue_study.refresh_from_db()
    assert queue_study.reference_rule == "majority"
    shoot(page, f"researcher-queue-{width}")
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"the page is {scroll}px wide at {width}px"
    guard.assert_clean(page)


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_preference_item_by_keyboard_with_names_hidden(page, guard, make_user, width, height):
    """A preference item: lists as "List 1/2" (names hidden), each answer says how its annotator saw
    the lists (w2 saw them swapped, so their "List 1" is List 2 here), key 4 picks List 2 slightly better."""
    from tests.conftest import preference_item

    make_user("rita")
    study = create_study(slug="adj-pref", name="Preference adjudication", kind="preference", annotators_per_item=2)
    add_members(study=study, usernames=["rita"], role="researcher")
    import_items(study=study, stream=jsonl(preference_item("p-1")), fmt="jsonl")
    import_annotations(
        study=study,
        stream=jsonl(
            {
                "item": "p-1",
                "annotator": "w1",
                "preferred": "veriscore",
                "strength": "strong",
                "justification": "List 1 has more claims",
                "left_system": "veriscore",
            },
            {
                "item": "p-1",
                "annotator": "w2",
                "preferred": "safe",
                "strength": "slight",
                "justification": "List 1 is a bit more faithful",
                "left_system": "safe",
            },
        ),
        fmt="jsonl",
    )
    study.refresh_from_db()
    page.set_viewport_size({"width": width, "height": height})
    log_in(page, "rita", reverse("annotation:adjudicate_item", args=[study.slug, "p-1"]))
    body = page.locator("main").inner_text() if page.locator("main").count() else page.inner_text("body")
    assert "List 1" in body and "veriscore" not in body
    swapped = page.locator('.adj-frame[data-swapped="yes"]')
    assert swapped.count() == 1 and "their List 1 is List 2 here" in swapped.inner_text()
    shoot(page, f"preference-item-{width}")
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"the page is {scroll}px wide at {width}px"
    press_and_wait(page, "4", "Enter")
    stored = Adjudication.objects.get(item__external_id="p-1")
    assert (stored.label, stored.preferred_system, stored.strength) == ("b_slight", study.systems[1], "slight")
    guard.assert_clean(page)
