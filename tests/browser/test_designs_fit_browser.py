"""Issue 32's new screens at 1280x800 and 390x844: the training page and its feedback (by the keyboard alone),
the machine suggestion beside the claim in the verifier condition, and the report's "Extra questions",
"Training" and "Conditions" sections.

Each screen must fit (tests/browser/screens.py: no sideways scroll, no table spilling out of its card), its
controls must lie inside the screen's width, and the report's new tables must scroll inside their cards.
No console error, page error, CSP violation or request off 127.0.0.1 (the `guard` fixture).

Screenshots go where the fit tests put theirs ($CLAIMLAB_SCREENSHOTS, default /tmp/claimlab-screens):
training-item-*, training-feedback-wrong-*, training-feedback-right-*, annotate-suggestion-*,
annotate-suggestion-reasoning-*, annotate-no-suggestion-*, report-{questions,training,conditions}-* (each section
whole), report-{questions,conditions}-scrolled-390x844 (its wide tables scrolled to the end) and
report-conditions-screen-* (each <name>-<W>x<H>.png).
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotation.conditions.services import condition_of
from annotation.members.services import add_members
from annotation.models import Assignment, Item, Study, TrainingAnswer
from annotation.studies.services import update_study
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import SubmittedAnswer, claim_next, shown_claim_counts, submit
from annotation.workbench.training import answer_training, next_training_item, training_assignment
from metaeval.models import Prediction, Verifier
from metaeval.verifiers.services.prediction_import import import_predictions
from tests.browser.screens import LONG_URL, SCREENS, SHOTS, assert_fits, assert_reachable, shoot
from tests.conftest import jsonl, preference_item
from tests.support.page_waits import wait_until
from tests.support.workbench_browser import (
    annotate_path,
    log_in,
    preference_study,
    press_and_wait,
    shown_item,
    verification_study,
)

pytestmark = pytest.mark.browser

BOTH = ["laptop", "phone"]

#: Gold training items of a verification study (items c-1, c-2 of tests/support/workbench_browser.py's builder).
#: The first explanation is Markdown with a list and a long unbroken address, as researchers paste them.
TRAINING = [
    {
        "item": "c-1",
        "explanation": (
            "The first passage says **so** in as many words:\n\n"
            "- the claim names the number\n- the passage gives the same number\n\n"
            f"Source: {LONG_URL}"
        ),
    },
    {"item": "c-2", "explanation": "Neither passage is *about* this claim."},
]
GOLD = {"c-1": "supported", "c-2": "inconclusive"}
KEYS = {"supported": "1", "contradicted": "2", "inconclusive": "3"}

CONDITIONS = ["no_suggestion", "verifier_suggestion:judge"]
LABELS = ["supported", "contradicted", "inconclusive"]
RATIONALE = f"The second passage states the claim's number; retrieved from {LONG_URL} and checked twice."

#: The feedback card's left border colour and width, its heading's colour, and the palette's --ok (right) or --err.
MARK = """(right) => {
  const card = getComputedStyle(document.querySelector('.training-feedback'));
  const title = getComputedStyle(document.querySelector('#feedback-title'));
  const hex = getComputedStyle(document.documentElement).getPropertyValue(right ? '--ok' : '--err').trim();
  const rgb = 'rgb(' + [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)).join(', ') + ')';
  return [card.borderLeftColor, title.color, rgb, parseFloat(card.borderLeftWidth)];
}"""

#: The suggestion's and the claim card's backgrounds and left borders: the suggestion must look set apart.
SET_APART = """() => {
  const [mine, claim] = ['.wb-suggestion', '.wb-claim-card'].map((s) => getComputedStyle(document.querySelector(s)));
  return {
    background: [mine.backgroundColor, claim.backgroundColor],
    border: [mine.borderLeftColor, claim.borderLeftColor],
    width: parseFloat(mine.borderLeftWidth),
  };
}"""

#: Where the focus is: the id of the focused element.
FOCUSED = "() => document.activeElement ? document.activeElement.id : null"


def training_path(study: Study) -> str:
    return reverse("annotation:annotate_training", args=[study.slug])


def with_training(study: Study) -> Study:
    for external_id, gold in GOLD.items():
        Item.objects.filter(study=study, external_id=external_id).update(gold_label=gold)
    update_study(study=study, changes={"training": TRAINING})
    study.refresh_from_db()
    return study


# --- 1. the training page and its feedback, by the keyboard ------------------------------------------------


def answer_training_item(page, screen: str, *, position: int, claim: str, label: str) -> None:
    """On training item `position` (1-based): it fits, its controls are reachable; the label's key, then Enter."""
    where = page.locator(".wb-bar .wb-count strong")
    expect(where).to_have_text(f"item {position} of {len(TRAINING)}")
    assert where.evaluate("(element) => element.getClientRects().length") == 1, "'item n of m' is split over lines"
    expect(page.locator("h1 #wb-training")).to_have_text("Training")
    assert page.locator("#wb-claim").inner_text() == claim
    assert page.locator(".wb-banner").inner_text().startswith("Training:")
    assert page.locator(".wb-suggestion").count() == 0  # the study has no conditions
    assert_fits(page, f"training item {position} ({screen})")
    assert_reachable(page, "#answer-form .opt")
    assert_reachable(page, "#wb-submit")
    assert_reachable(page, ".wb-tools summary")
    if screen == "phone":  # the answer panel follows the item: a link leads to it, as on the study's items
        assert_reachable(page, ".wb-jump")
    else:
        assert not page.locator(".wb-jump").is_visible()
    page.evaluate("() => window.scrollTo(0, 0)")
    page.keyboard.press(KEYS[label])
    assert page.locator(f'input[name=label][value="{label}"]').is_checked()
    if position == 1:
        shoot(page, "training-item", screen)
    press_and_wait(page, "Enter")


def check_feedback(page, screen: str, *, right: bool, given: str, expected: str, name: str) -> None:
    """The feedback page: right or not, both answers, the explanation; Continue has the focus, fits, reachable."""
    feedback = page.locator(".training-feedback")
    expect(page.locator("#feedback-title")).to_have_text("Right" if right else "Not quite")
    expect(feedback).to_have_class("card narrow-wide training-feedback " + ("is-right" if right else "is-wrong"))
    text = feedback.inner_text()
    assert f"Your answer: {given}. The expected answer: {expected}." in text, text
    assert page.evaluate(FOCUSED) == "training-continue"  # autofocused: Enter goes on
    border, title, colour, width = page.evaluate(MARK, right)
    assert border == title == colour and width >= 3, f"right or not is not marked in colour: {border, title, colour}"
    assert_fits(page, f"training feedback ({name}, {screen})")
    assert_reachable(page, "#training-continue")
    assert_reachable(page, "#feedback-explanation")
    page.evaluate("() => window.scrollTo(0, 0)")
    shoot(page, name, screen)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", BOTH)
def test_training_by_keyboard_with_feedback_then_the_studys_items(page, guard, annotator, screen):
    study = with_training(verification_study(f"train-{screen}", [annotator], items=4))
    page.set_viewport_size(SCREENS[screen])
    log_in(page, annotator.username, training_path(study))
    page.goto(annotate_path(study))
    assert page.url.endswith(training_path(study)), "the annotate page should send a newcomer to training first"
    page.keyboard.press("Escape")  # the instructions, open on the first item (a first-run screen on a phone)
    assert page.locator("#wb-help").get_attribute("open") is None

    # item 1, answered wrong (contradicted, gold supported): the Markdown explanation, whole, on screen
    answer_training_item(page, screen, position=1, claim="Claim number 1 is true.", label="contradicted")
    check_feedback(
        page, screen, right=False, given="contradicted", expected="supported", name="training-feedback-wrong"
    )
    explanation = page.locator("#feedback-explanation")
    assert explanation.locator("strong").inner_text() == "so"
    assert explanation.locator("li").count() == 2
    assert "**" not in explanation.inner_text()
    assert "1 training item left." in page.locator(".training-feedback").inner_text()
    press_and_wait(page, "Enter")

    # item 2, answered right
    assert page.url.endswith(training_path(study))
    answer_training_item(page, screen, position=2, claim="Claim number 2 is true.", label="inconclusive")
    check_feedback(
        page, screen, right=True, given="inconclusive", expected="inconclusive", name="training-feedback-right"
    )
    assert page.locator("#feedback-explanation em").inner_text() == "about"
    assert "the study's items come next" in page.locator(".training-feedback").inner_text()
    press_and_wait(page, "Enter")

    # the study's own items: never a training item, and no banner
    assert page.url.endswith(annotate_path(study))
    wait_until(page, "() => !!document.querySelector('#wb-stage .wb[data-assignment]')")
    shown = shown_item(page)
    assert shown is not None and shown.isdigit(), shown
    assert Assignment.objects.get(pk=int(shown)).item.external_id in ("c-3", "c-4")
    assert page.locator(".wb-banner").count() == 0
    answers = TrainingAnswer.objects.filter(study=study, annotator=annotator).order_by("pk")
    assert [(answer.item.external_id, answer.correct) for answer in answers] == [("c-1", False), ("c-2", True)]
    guard.assert_clean(page)


# --- 2. the machine suggestion beside the claim --------------------------------------------------------------


def box(page, selector: str) -> dict[str, float]:
    found = page.locator(selector).first.bounding_box()
    assert found is not None, f"{selector} is not laid out"
    return found


@pytest.mark.django_db(transaction=True)
def test_the_verifier_condition_shows_the_machine_suggestion_beside_the_claim(page, guard, annotator, make_user):
    other = make_user("bert")
    study = verification_study("cond", [annotator, other], items=4, conditions=CONDITIONS)
    predictions = [
        {"item": f"c-{n}", "verifier": "judge", "label": LABELS[n % 3], "rationale": RATIONALE} for n in range(1, 5)
    ]
    import_predictions(study=study, stream=jsonl(*predictions), fmt="jsonl")
    seen: dict[str, str] = {}
    for user in (annotator, other):
        page.context.clear_cookies()
        page.set_viewport_size(SCREENS["laptop"])
        log_in(page, user.username, annotate_path(study))
        page.keyboard.press("Escape")  # the instructions, open on the first item
        condition = condition_of(user, study)
        seen[condition] = user.username
        shown = shown_item(page)
        assert shown is not None and shown.isdigit(), shown
        item = Assignment.objects.get(pk=int(shown)).item
        for screen in BOTH:
            page.set_viewport_size(SCREENS[screen])
            page.evaluate("() => window.scrollTo(0, 0)")
            if condition == "no_suggestion":
                assert page.locator(".wb-suggestion").count() == 0
                assert "Machine suggestion" not in page.locator("body").inner_text()
                assert_fits(page, f"annotate page without a suggestion ({screen})")
                shoot(page, "annotate-no-suggestion", screen)
                continue
            suggestion = page.locator(".wb-suggestion")
            expect(suggestion).to_be_visible()
            assert "from an automatic verifier" in suggestion.inner_text()
            expected = LABELS[int(item.external_id.split("-")[1]) % 3]
            assert suggestion.locator(".wb-suggestion-label").inner_text().lower() == expected
            looks = page.evaluate(SET_APART)  # a machine's, never mistaken for part of the item
            assert looks["background"][0] != looks["background"][1], looks
            assert looks["border"][0] != looks["border"][1] and looks["width"] >= 3, looks
            # beside the claim: right under its card, in the same column, before the evidence, on the first screen
            claim, shown_box, passage = box(page, ".wb-claim-card"), box(page, ".wb-suggestion"), box(page, ".passage")
            assert claim["y"] + claim["height"] <= shown_box["y"] < passage["y"], (claim, shown_box, passage)
            assert abs(shown_box["x"] - claim["x"]) <= 1 and abs(shown_box["width"] - claim["width"]) <= 1
            assert shown_box["y"] + shown_box["height"] <= SCREENS[screen]["height"], "below the first screen"
            if screen == "laptop":  # the answer panel stays beside it, not under it
                answer = box(page, "#wb-answer")
                assert answer["x"] >= shown_box["x"] + shown_box["width"]
            assert_fits(page, f"annotate page with the suggestion ({screen})")
            assert_reachable(page, ".wb-suggestion summary")
            shoot(page, "annotate-suggestion", screen)
            suggestion.locator("summary").click()  # its reasoning, with a long address in it
            expect(suggestion.locator("details p")).to_have_text(RATIONALE)
            assert_fits(page, f"annotate page with the suggestion's reasoning open ({screen})")
            page.evaluate("() => window.scrollTo(0, 0)")
            shoot(page, "annotate-suggestion-reasoning", screen)
            suggestion.locator("summary").click()
    assert set(seen) == {"no_suggestion", "verifier_suggestion"}, seen  # two people, one in each condition
    guard.assert_clean(page)


# --- 3. the report's new sections ------------------------------------------------------------------------

QUESTIONS = [
    {"key": "verifiable", "type": "check", "prompt": "Can this claim be checked?", "target": "claim"},
    {
        "key": "confidence",
        "type": "likert",
        "prompt": "How sure are you of your choice?",
        "scale": [1, 5],
        "anchors": {"1": "guessing", "5": "certain"},
    },
]
PREFERENCE_TRAINING = [
    {"item": "t-1", "explanation": "Both lists state **the same** facts."},
    {"item": "t-2", "explanation": "Only the first system's list covers the source."},
]
PREFERENCE_GOLD = {"t-1": "tie", "t-2": "a_strong"}
JUDGE = ["a_slight", "b_strong", "tie", "b_slight", "a_strong", "tie"]
CHOICES = ["left_strong", "left_slight", "tie", "right_slight", "right_strong"]
#: Each annotator's training answers, right or not, item by item: 2, 1, 1 and 0 of 2 right.
TRAINED = [(True, True), (False, True), (True, False), (False, False)]


def screen_choice(study: Study, shown: Assignment, external_id: str, right: bool) -> str:
    """The choice on screen that gives the gold label of a training item (right), or one that does not."""
    gold = PREFERENCE_GOLD[external_id]
    if gold == "tie":
        return "tie" if right else "left_slight"
    first_is_left = shown.left_system == study.systems[0]
    strong = "left_strong" if first_is_left else "right_strong"  # a_strong: the first system much better
    return strong if right else "tie"


#: Per table of a section: whether its content is wider than the card's content box, what scrolls it sideways
#: (the table itself, its .table-scroll wrapper, the whole card, or nothing) and whether what shows of it (that
#: scroller, or the table) lies inside the card.
TABLES = """(section) => {
  const card = section.getBoundingClientRect();
  const style = getComputedStyle(section);
  const room = section.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return Array.from(section.querySelectorAll('table')).map((table) => {
    let scroller = null;
    for (let node = table; node && !scroller; node = node === section ? null : node.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(node).overflowX)) { scroller = node; }
    }
    const kind = !scroller ? 'none' : scroller === section ? 'card' : scroller === table ? 'table' : 'wrapper';
    const box = (kind === 'table' || kind === 'wrapper' ? scroller : table).getBoundingClientRect();
    return {
      wider: table.scrollWidth > room + 1,
      scroller: kind,
      inside: box.left >= card.left - 1 && box.right <= card.right + 1,
    };
  });
}"""


#: Scrolls each table of a section that is wider than its scroller (itself or its wrapper) to its right end
#: (`to`: 1) or back to its start (0); the scroll offsets reached.
SCROLL_TO_END = """(section, to) => Array.from(section.querySelectorAll('table'))
  .map((table) => table.closest('.table-scroll') || table)
  .filter((scroller) => scroller.scrollWidth > scroller.clientWidth + 1)
  .map((scroller) => { scroller.scrollLeft = to * scroller.scrollWidth; return scroller.scrollLeft; })"""


def shoot_section(section, name: str, screen: str) -> None:
    """A screenshot of one report section (all of it, however long), named like `shoot`'s."""
    size = SCREENS[screen]
    SHOTS.mkdir(parents=True, exist_ok=True)
    section.screenshot(path=str(SHOTS / f"{name}-{size['width']}x{size['height']}.png"))


def answers_for(study: Study, assignment: Assignment, number: int) -> dict:
    """The questions answered in screen space: the first claim of each list ticked, a confidence from 1 to 5."""
    counts = shown_claim_counts(study, assignment)
    lists = {f"list_{side + 1}": [index == 0 for index in range(count)] for side, count in enumerate(counts)}
    return {"verifiable": lists, "confidence": 1 + number % 5}


def report_study(annotators: list, researcher) -> Study:
    """A preference study with both questions, two training items and two conditions (one shows a judge),
    every item answered by two of the four annotators after their training."""
    study = preference_study(
        "report-designs", annotators, n=2, items=6, questions=QUESTIONS, conditions=["none", "shown:judge"]
    )
    add_members(study=study, usernames=[researcher.username], role="researcher")
    training = [
        preference_item(
            external_id,
            source=f"Training source {external_id}.",
            lists={"sysalpha": [f"Trained fact {external_id}."], "sysbeta": [f"Other fact {external_id}."]},
            gold=gold,
        )
        for external_id, gold in PREFERENCE_GOLD.items()
    ]
    import_items(study=study, stream=jsonl(*training), fmt="jsonl")
    update_study(study=study, changes={"training": PREFERENCE_TRAINING})
    study.refresh_from_db()
    judge = Verifier.objects.create(
        study=study, name="judge", preset="pairwise_judge", model="m", endpoint="http://127.0.0.1:9/v1"
    )
    for number, label in enumerate(JUDGE, start=1):
        item = Item.objects.get(study=study, external_id=f"p-{number}")
        Prediction.objects.create(verifier=judge, item=item, label=label, cache_key=f"k-{item.pk}", parse_status="ok")
    number = 0
    for who, user in enumerate(annotators):
        for external_id, right in zip(PREFERENCE_GOLD, TRAINED[who], strict=True):
            pending = next_training_item(user, study)
            assert pending is not None and pending.external_id == external_id
            shown = training_assignment(study, pending, user)
            answer = SubmittedAnswer(
                choice=screen_choice(study, shown, external_id, right), questions=answers_for(study, shown, number)
            )
            answer_training(user=user, study=study, item=pending, answer=answer)
        assert next_training_item(user, study) is None
        while (assignment := claim_next(user=user, study=study)) is not None:
            answer = SubmittedAnswer(
                choice=CHOICES[(who * 2 + number) % 5], questions=answers_for(study, assignment, number), active_ms=3000
            )
            submit(user=user, study=study, assignment_id=assignment.pk, answer=answer)
            number += 1
    return study


@pytest.mark.django_db(transaction=True)
def test_the_reports_new_sections_fit_and_their_tables_scroll_inside_their_cards(page, guard, make_user, researcher):
    annotators = [make_user(f"ann{number}") for number in range(1, 5)]
    study = report_study(annotators, researcher)
    page.set_viewport_size(SCREENS["laptop"])
    log_in(page, researcher.username, reverse("metaeval:report", args=[study.slug]))
    wider = {}
    for screen in BOTH:
        page.set_viewport_size(SCREENS[screen])
        assert_fits(page, f"report with the new sections ({screen})")
        questions, training, conditions = (page.locator(f"#{name}") for name in ("questions", "training", "conditions"))
        expect(questions.locator("h2")).to_have_text("Extra questions")
        assert "How sure are you of your choice?" in questions.inner_text()
        assert "Can this claim be checked?" in questions.inner_text()
        # per question its answers (overall, per label or system, per condition) and their agreement;
        # the tick box's per-claim shares too
        assert questions.locator("table").count() == 9
        captions = questions.locator("table caption").all_inner_texts()
        assert "Answers to confidence per label given" in captions, captions
        assert "Answers to verifiable per system" in captions and "Answers to verifiable per condition" in captions
        assert questions.locator("table", has_text="Claims judged True").count() == 1
        expect(training.locator("h2")).to_have_text("Training")
        rows = training.locator("tbody tr td:nth-child(2)").all_inner_texts()
        assert sorted(rows) == ["0 / 2", "1 / 2", "1 / 2", "2 / 2"], rows  # each annotator's, as answered
        assert "2 training items (t-1, t-2)" in training.inner_text()
        expect(conditions.locator("h2")).to_have_text("Conditions")
        measures = conditions.locator("tbody tr td:first-child").all_inner_texts()
        assert "Agreement with the verifier (automation bias)" in measures, measures
        assert "shown − none" in conditions.locator("tbody").inner_text()
        for name, section in (("questions", questions), ("training", training), ("conditions", conditions)):
            tables = section.evaluate(TABLES)
            assert tables, name
            for index, table in enumerate(tables):
                where = f"#{name} table {index} ({screen}): {table}"
                if table["wider"]:  # scrolls by itself: the card's headings and text stay put
                    assert table["scroller"] in ("table", "wrapper"), where
                assert table["inside"], where
            wider[(name, screen)] = sum(table["wider"] for table in tables)
            section.scroll_into_view_if_needed()
            shoot_section(section, f"report-{name}", screen)
            if wider[(name, screen)]:  # each wide table scrolls to its last column (the note), and back
                ends = section.evaluate(SCROLL_TO_END, 1)
                assert len(ends) == wider[(name, screen)] and all(end > 0 for end in ends), ends
                shoot_section(section, f"report-{name}-scrolled", screen)
                section.evaluate(SCROLL_TO_END, 0)
        shoot(page, "report-conditions-screen", screen)
    # on a phone the conditions' seven columns and the questions' estimates do not fit: the checks above saw
    # those tables scroll inside their cards; on a laptop everything fits
    assert wider[("conditions", "phone")] > 0 and wider[("questions", "phone")] > 0, wider
    assert not any(wider[(name, "laptop")] for name in ("questions", "training", "conditions")), wider
    guard.assert_clean(page)
