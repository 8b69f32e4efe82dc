"""Extra questions (issue 32) in a real browser, by the keyboard alone: the annotate page at 1280 and 390 px,
a crowd participant's item page, and the settings page's live preview.

The study asks three questions: a tick box "verifiable" for each claim of both lists (target claim), a
single choice "coverage" for each list (target list) and a 1-5 "confidence" Likert for the item. The
annotator reaches each question with `q` (unanswered first), answers with a digit while it has the
focus (the digits are also the preference keys: they must not choose a label there), leaves with Esc,
chooses the label with its key and submits with Enter. The stored answers are keyed by system
(Assignment.left_system says which one was List 1), never by screen side.

Screenshots go where the fit tests put theirs (tests/browser/screens.py: $CLAIMLAB_SCREENSHOTS, default
/tmp/claimlab-screens): annotate-questions-<W>x<H>.png (the screen with the last question answered),
annotate-questions-full-<W>x<H>.png (the whole page), participant-questions-*.png and
settings-questions-preview-*.png.
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotation.lib.randomisation import side_coin
from annotation.members.services import add_members
from annotation.models import Annotation, Assignment
from tests.browser.screens import SCREENS, SHOTS, assert_fits, assert_reachable, local_panel_link, shoot
from tests.support.crowd_browser import consent_and_start, device
from tests.support.workbench_browser import (
    SYSTEMS,
    annotate_path,
    log_in,
    preference_study,
    shown_item,
    submit_item,
    wait_saved,
)

pytestmark = pytest.mark.browser

COVERAGE = ["little", "half", "most"]
QUESTIONS = [
    {"key": "verifiable", "type": "check", "prompt": "Can this claim be checked?", "target": "claim"},
    {
        "key": "confidence",
        "type": "likert",
        "prompt": "How sure are you of your choice?",
        "scale": [1, 5],
        "anchors": {"1": "guessing", "5": "certain"},
    },
    {
        "key": "coverage",
        "type": "single",
        "prompt": "How much of the source does this list cover?",
        "target": "list",
        "options": COVERAGE,
    },
]

#: A seed that shows item p-1 with sysbeta as List 1 and p-2 with sysalpha (slot 0 of each): both sides are
#: covered whatever the order the items come in, and List 1 is not always the first system.
SEED = next(seed for seed in range(1000) if side_coin(seed, "p-1") == 1 and side_coin(seed, "p-2") == 0)

#: The name of the question that has the keyboard focus (None outside every question).
FOCUSED_QUESTION = """() => {
  const group = document.activeElement && document.activeElement.closest("[data-question]");
  return group ? group.dataset.question : null;
}"""


def question_names(page) -> list[str]:
    return page.locator("#wb-stage #answer-form [data-question]").evaluate_all(
        "(groups) => groups.map((group) => group.dataset.question)"
    )


def focused_question(page) -> str | None:
    return page.evaluate(FOCUSED_QUESTION)


def claims_shown(page) -> tuple[int, int]:
    return page.locator("#wb-list-1 > li").count(), page.locator("#wb-list-2 > li").count()


def expected_names(claims: tuple[int, int]) -> list[str]:
    """The page's questions in document order: each list's claim boxes, then its coverage; the item's last."""
    names = []
    for side, count in zip(("list_1", "list_2"), claims, strict=True):
        names += [f"q.verifiable.{side}.{index}" for index in range(count)]
        names.append(f"q.coverage.{side}")
    return [*names, "q.confidence"]


def answer_by_keyboard(page, keys: dict[str, str], label_key: str, label_value: str) -> None:
    """`q` to each question in turn, its keys (none: left as it is), Esc, the label key; not submitted yet.

    `keys` maps every question on the page to the keys pressed while it has the focus."""
    names = question_names(page)
    assert set(keys) == set(names)
    for name in names:
        page.keyboard.press("q")
        assert focused_question(page) == name, f"q should move to {name}"
        assert page.locator(f'.wb-q.is-current[data-question="{name}"]').count() == 1
        for key in keys[name]:
            page.keyboard.press(key)
        assert focused_question(page) == name  # a digit answers and stays in the question
    # the digits were the preference keys too: inside a question they chose no label
    assert page.locator("input[name=choice]:checked").count() == 0
    # everything but the boxes left unticked is answered: q goes back to the first of those
    unticked = [name for name in names if name.startswith("q.verifiable") and keys[name].count("1") % 2 == 0]
    page.keyboard.press("q")
    assert focused_question(page) == unticked[0]
    page.keyboard.press("Escape")
    assert focused_question(page) is None
    assert page.locator(".wb-q.is-current").count() == 0
    page.keyboard.press(label_key)  # outside a question, the digit is the label again
    assert page.locator(f'input[name=choice][value="{label_value}"]').is_checked()


def on_screen(page) -> tuple[Assignment, str, str]:
    """The assignment on screen and the systems shown as List 1 and List 2; the lists match them."""
    shown = shown_item(page)
    assert shown is not None, "no item on screen"
    assignment = Assignment.objects.select_related("item").get(pk=int(shown))
    left = assignment.left_system
    right = next(system for system in SYSTEMS if system != left)
    lists = assignment.item.payload["lists"]
    assert claims_shown(page) == (len(lists[left]), len(lists[right]))
    return assignment, left, right


def keys_for_item_one(names: list[str]) -> dict[str, str]:
    """The first claim of each list ticked, the others left; coverage "most" for List 1, "little" for 2; sure: 4."""
    keys = {name: ("1" if name.endswith(".0") else "") for name in names if name.startswith("q.verifiable")}
    return {**keys, "q.coverage.list_1": "3", "q.coverage.list_2": "1", "q.confidence": "4"}


def keys_for_item_two(names: list[str]) -> dict[str, str]:
    """List 2's claims ticked (its first one ticked, unticked, ticked again), List 1's not; 2 is a label key too."""
    boxes = [name for name in names if name.startswith("q.verifiable")]
    keys = {name: ("1" if ".list_2." in name else "") for name in boxes}
    keys["q.verifiable.list_2.0"] = "111"
    keys["q.verifiable.list_1.0"] = "11"  # ticked and unticked again: "no"
    return {**keys, "q.coverage.list_1": "1", "q.coverage.list_2": "2", "q.confidence": "2"}


def shoot_full(page, name: str, screen: str) -> None:
    size = SCREENS[screen]
    page.screenshot(path=str(SHOTS / f"{name}-full-{size['width']}x{size['height']}.png"), full_page=True)


# --- the annotate page ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_extra_questions_answered_by_keyboard_are_stored_per_system(page, guard, annotator, screen):
    study = preference_study(f"qs-{screen}", [annotator], items=2, questions=QUESTIONS, seed=SEED)
    page.set_viewport_size(SCREENS[screen])
    log_in(page, annotator.username, annotate_path(study))
    page.keyboard.press("Escape")  # the instructions shown on the first item (a first-run screen on a phone)
    assert page.locator("#wb-help").get_attribute("open") is None

    # item 1: every control is there, in its place, and fits the screen
    first, left_1, right_1 = on_screen(page)
    names = question_names(page)
    assert names == expected_names(claims_shown(page))
    assert page.locator("#wb-list-1 .wb-claim-qs [data-question]").count() == claims_shown(page)[0]
    assert page.locator("#wb-answer [data-question]").count() == 1  # the item's question, by the label
    assert page.locator('[data-question="q.confidence"] input[type=radio]').count() == 5
    assert "guessing" in page.locator('[data-question="q.confidence"]').inner_text()
    assert_fits(page, f"annotate page with questions ({screen})")
    assert_reachable(page, "#answer-form .wb-q .opt")
    page.evaluate("() => window.scrollTo(0, 0)")
    answer_by_keyboard(page, keys_for_item_one(names), "2", "left_slight")
    assert_fits(page, f"annotate page with questions answered ({screen})")
    shoot(page, "annotate-questions", screen)
    shoot_full(page, "annotate-questions", screen)
    submit_item(page, "Enter")

    # item 2
    second, left_2, right_2 = on_screen(page)
    assert second.pk != first.pk and {left_1, left_2} == set(SYSTEMS)  # each system was List 1 once
    names = question_names(page)
    assert names == expected_names(claims_shown(page))
    assert page.locator(".wb-q input:checked").count() == 0  # nothing carried over from item 1
    answer_by_keyboard(page, keys_for_item_two(names), "5", "right_strong")
    submit_item(page, "Enter")
    assert page.locator("#wb-done").is_visible()
    wait_saved(page)
    guard.assert_clean(page)

    one = Annotation.objects.get(assignment=first)
    assert one.choice == "left_slight" and one.preferred_system == left_1
    assert one.question_answers == {
        "verifiable": {"sysalpha": [True, False], "sysbeta": [True]},
        "confidence": 4,
        "coverage": {left_1: "most", right_1: "little"},
    }
    two = Annotation.objects.get(assignment=second)
    assert two.choice == "right_strong" and two.preferred_system == right_2
    lists = second.item.payload["lists"]
    assert two.question_answers == {
        "verifiable": {left_2: [False] * len(lists[left_2]), right_2: [True] * len(lists[right_2])},
        "confidence": 2,
        "coverage": {left_2: "little", right_2: "half"},
    }


# --- a crowd participant's item page ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_crowd_participant_answers_the_same_questions(browser, live_server, annotator):
    study = preference_study("qs-crowd", [annotator], items=1, questions=QUESTIONS, seed=SEED)
    link = local_panel_link(study, live_server.url, items_per_participant=1)
    problems: list[str] = []
    context, person = device(browser, live_server, problems, viewport=SCREENS["phone"])
    try:
        consent_and_start(person, link, "5f0d0000000000000000000d")
        person.keyboard.press("Escape")  # the instructions' first-run screen
        assignment, left, right = on_screen(person)
        assert left == "sysbeta"  # List 1 is the second system: screen side and system differ
        names = question_names(person)
        assert names == expected_names(claims_shown(person))
        assert person.locator('[data-question="q.confidence"] input[type=radio]').count() == 5
        assert_fits(person, "participant item with questions (phone)")
        person.evaluate("() => window.scrollTo(0, 0)")
        answer_by_keyboard(person, keys_for_item_one(names), "4", "right_slight")
        shoot(person, "participant-questions", "phone")
        person.keyboard.press("Enter")
        # the quota of one: the answer is sent, then the end page with the completion code
        expect(person.locator("#end-code")).to_have_text("DONE123")
        assert person.locator("#end-title").inner_text() == "Thank you: you have finished"
        assert person.evaluate("window.__cspViolations || []") == []
    finally:
        context.close()
    assert problems == [], problems
    stored = Annotation.objects.get(assignment=assignment)
    assert stored.choice == "right_slight" and stored.preferred_system == right
    assert stored.question_answers == {
        "verifiable": {"sysalpha": [True, False], "sysbeta": [True]},
        "confidence": 4,
        "coverage": {left: "most", right: "little"},
    }


# --- the settings page's live preview ----------------------------------------------------------------

DEFINITION = (
    '[{"key": "sure", "type": "likert", "prompt": "How sure are you?", "scale": [1, 3],'
    ' "anchors": {"1": "guessing"}},'
    ' {"key": "verifiable", "type": "check", "prompt": "Can it be checked?", "target": "claim"}]'
)
BAD_DEFINITION = '[{"key": "sure", "type": "slider", "prompt": "How sure are you?"}]'


@pytest.mark.django_db(transaction=True)
def test_settings_preview_renders_typed_questions_and_names_a_bad_one(page, guard, annotator, researcher):
    study = preference_study("qs-settings", [annotator], items=1)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    page.set_viewport_size(SCREENS["laptop"])
    log_in(page, researcher.username, reverse("annotation:study_settings", args=[study.slug]))
    preview = page.locator("#questions-preview")
    assert preview.locator("[data-question]").count() == 0

    page.locator("[data-questions-source]").focus()
    page.keyboard.type(DEFINITION)
    # the Likert once, and the per-claim box on each of the example's two claims (a preference study's target)
    expect(preview.locator('[data-question="q.sure"] input[type=radio]')).to_have_count(3)
    expect(preview.locator("[data-question^='q.verifiable.list_1.']")).to_have_count(2)
    expect(preview).not_to_have_class("is-invalid")
    assert "guessing" in preview.locator('[data-question="q.sure"]').inner_text()
    assert "How sure are you?" in preview.locator('[data-question="q.sure"] legend').inner_text()
    page.locator("#questions-preview").scroll_into_view_if_needed()
    shoot(page, "settings-questions-preview", "laptop")
    page.set_viewport_size(SCREENS["phone"])
    assert_fits(page, "settings page with the questions preview (phone)")
    page.locator("#questions-preview").scroll_into_view_if_needed()
    shoot(page, "settings-questions-preview", "phone")

    page.keyboard.press("Control+a")
    page.keyboard.type(BAD_DEFINITION)
    expect(preview).to_have_class("card wb is-invalid")
    expect(preview).to_contain_text("question 1 (sure): type must be one of")
    assert preview.locator("[data-question]").count() == 0
    assert guard.page_errors == [] and guard.external_requests == []
    # the refused definition's preview answers 400, which Chromium logs; nothing else may be logged
    assert all("status of 400" in message for message in guard.console_errors), guard.console_errors
    assert page.evaluate("window.__cspViolations || []") == []
