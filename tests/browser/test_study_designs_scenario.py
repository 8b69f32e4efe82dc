"""Issue 32's scenario in a real browser, by the keyboard alone: a preference study with extra questions,
questionnaires, a comprehension quiz, training and two between-subject conditions, run through a crowd link.

The study asks a tick box "verifiable" on every claim of both lists (target claim) and a 1-5 "confidence"
Likert for the item. Its crowd link leads each participant through consent and instructions to a pre-study
questionnaire (age, a number), a one-question comprehension quiz (two attempts), two gold training items with
feedback, two items of the study, a post-study questionnaire (a Likert) and the end page with the completion
code. Two conditions: "hidden" (no suggestion) and "shown:judge" (a pairwise judge's verdict shown as the
machine suggestion, in the screen's terms).

Two participants, each on their own device: one at 1280x800 who passes the quiz at once and starts first (the
study's seed gives them "hidden"), one at 390x844 who fails the quiz once and then passes ("shown"). Only the
keyboard: Tab to a questionnaire's controls, Space and the arrow keys on radios, digits typed into a number;
on an item page `q` to each question, its digit, Esc, the label key and Enter; Enter on the training
feedback's Continue (autofocused).

Then: the answers stored per system are exactly what was keyed, the failed quiz attempt is kept, the training
answers scored, no item is answered more than its N; the researcher's report page has the questions,
conditions, training and questionnaires sections; the export and the notebook client carry every answer with
the condition. Screenshots: designs-*.png in $CLAIMLAB_SCREENSHOTS (default /tmp/claimlab-screens).

Last, two promises the participant's pages make are checked (recorded on the way, asserted at the end so the
whole scenario runs first): the keys a questionnaire's hint names (`q`, the digits) work there, and the
training feedback's "Enter" key cap can be read on its button. Each failure message names the template.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from accounts.services import issue_token
from annotation.lib.pseudonyms import pseudonyms
from annotation.lib.randomisation import keyed_hash
from annotation.members.services import add_members
from annotation.models import (
    Annotation,
    Assignment,
    Item,
    Participant,
    ParticipantLink,
    QuestionnaireResponse,
    Study,
    StudyMember,
    TrainingAnswer,
)
from annotation.studies.services import create_study, update_study
from annotation.transfer.exports import export_chunks
from annotation.transfer.services.item_import import import_items
from annotation.vocab import preference_as_seen
from annotation.workbench.training import training_assignment
from metaeval.client import Claimlab
from metaeval.models import Prediction, Verifier
from tests.annotation.crowd_support import arrival_url
from tests.browser.screens import SCREENS, SHOTS, assert_fits, local_panel_link, shoot
from tests.conftest import jsonl, preference_item
from tests.support.crowd_browser import device
from tests.support.page_waits import wait_until
from tests.support.workbench_browser import log_in, shown_item, submit_item

pytestmark = pytest.mark.browser

SLUG = "designs"
SYSTEMS = ["sysalpha", "sysbeta"]
CONDITIONS = ["hidden", "shown:judge"]

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
QUIZ_FEEDBACK = "A ticked box says the claim can be checked against a source, not that it is true."
QUESTIONNAIRES = {
    "pre": [{"key": "age", "type": "number", "prompt": "Your age", "min": 18, "max": 120, "integer": True}],
    "quiz": {
        "attempts": 2,
        "questions": [
            {
                "key": "meaning",
                "type": "single",
                "prompt": "What does a ticked 'Can this claim be checked?' box say?",
                "options": ["true", "checkable", "long"],
                "correct": "checkable",
                "feedback": QUIZ_FEEDBACK,
            }
        ],
    },
    "post": [{"key": "clear", "type": "likert", "prompt": "The instructions were clear"}],
}

#: The study's items: four to annotate (the judge's verdict on each, system space) and two gold training items.
LISTS = {
    "r-1": {"sysalpha": ["Alpha one.", "Alpha two."], "sysbeta": ["Beta one."]},
    "r-2": {"sysalpha": ["Alpha three."], "sysbeta": ["Beta two.", "Beta three."]},
    "r-3": {"sysalpha": ["Alpha four.", "Alpha five.", "Alpha six."], "sysbeta": ["Beta four."]},
    "r-4": {"sysalpha": ["Alpha seven."], "sysbeta": ["Beta five.", "Beta six."]},
}
JUDGE = {"r-1": "a_slight", "r-2": "b_strong", "r-3": "tie", "r-4": "b_slight"}
TRAINING = [
    {"item": "t-1", "explanation": "Both lists state **the same** facts."},
    {"item": "t-2", "explanation": "Only the first system's list covers the source."},
]
TRAINING_GOLD = {"t-1": "tie", "t-2": "a_strong"}
CHOICES = {"1": "left_strong", "2": "left_slight", "3": "tie", "4": "right_slight", "5": "right_strong"}


def _seed_giving_the_second_person(condition: str) -> int:
    """A study seed under which the second person to start gets `condition` (annotation/conditions/services)."""
    keys = [entry.split(":")[0] for entry in CONDITIONS]
    for seed in range(1000):
        if sorted(keys, key=lambda key: keyed_hash(seed, "condition", "0", key))[1] == condition:
            return seed
    raise AssertionError("no seed found")


SEED = _seed_giving_the_second_person("shown")


@dataclass
class Person:
    """One participant: their device's size, how they answer, and what they were shown and keyed."""

    pid: str
    screen: str
    condition: str
    fails_quiz: bool
    age: int
    clear: int  # the post-study Likert
    labels: tuple[str, str]  # the label key on each of their two items
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)  # item -> the stored answer
    suggestions: list[str] = field(default_factory=list)  # the machine suggestion on each item ("" none)
    # What the pages promised and did (asserted at the end, after the whole scenario has run):
    quiz_keys: tuple[int, bool] = (-1, True)  # on the quiz page: key caps shown, the "q moves" hint shown
    continue_contrast: float = 0.0  # the Continue button's "Enter" key cap on the training feedback
    submit_contrast: float = 0.0  # the item page's Submit button's "Enter" key cap, for comparison


# --- building the study -------------------------------------------------------------------------------


def designs_study(live_server, researcher) -> tuple[Study, ParticipantLink]:
    study = create_study(
        slug=SLUG,
        name="Study designs",
        kind="preference",
        annotators_per_item=1,
        systems=SYSTEMS,
        seed=SEED,
        instructions="# Compare the lists\n\nPrefer the list that covers the source.",
        questions=QUESTIONS,
        conditions=CONDITIONS,
    )
    add_members(study=study, usernames=[researcher.username], role="researcher")
    records = [
        preference_item(external_id, source=f"Source text of {external_id}.", lists=lists)
        for external_id, lists in LISTS.items()
    ]
    records += [
        preference_item(
            external_id,
            source=f"Training source {external_id}.",
            lists={"sysalpha": [f"Trained fact {external_id}."], "sysbeta": [f"Other fact {external_id}."]},
            gold=gold,
        )
        for external_id, gold in TRAINING_GOLD.items()
    ]
    import_items(study=study, stream=jsonl(*records), fmt="jsonl")
    update_study(study=study, changes={"training": TRAINING, "questionnaires": QUESTIONNAIRES})
    judge = Verifier.objects.create(
        study=study, name="judge", preset="pairwise_judge", model="m", endpoint="http://127.0.0.1:9/v1"
    )
    for external_id, label in JUDGE.items():
        item = Item.objects.get(study=study, external_id=external_id)
        Prediction.objects.create(verifier=judge, item=item, label=label, cache_key=f"k-{item.pk}", parse_status="ok")
    link = local_panel_link(study, live_server.url, items_per_participant=2)
    study.refresh_from_db()
    return study, link


# --- the keyboard -------------------------------------------------------------------------------------

FOCUSED = "() => document.activeElement ? document.activeElement.outerHTML.slice(0, 120) : null"
FOCUSED_QUESTION = """() => {
  const group = document.activeElement && document.activeElement.closest("[data-question]");
  return group ? group.dataset.question : null;
}"""


#: The contrast ratio (WCAG) of an element's text against the background it is drawn on (its own background
#: composited over its ancestors').
CONTRAST = """(element) => {
  const rgba = (text) => { const v = text.match(/[\\d.]+/g).map(Number); return v.length === 3 ? [...v, 1] : v; };
  const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3]));
  const luminance = (rgb) => {
    const [r, g, b] = rgb.map((c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const layers = [];
  for (let node = element; node; node = node.parentElement) {
    const colour = rgba(getComputedStyle(node).backgroundColor);
    if (colour[3] > 0) { layers.push(colour); if (colour[3] >= 1) { break; } }
  }
  let background = [255, 255, 255];
  for (const layer of layers.reverse()) { background = over(layer, background); }
  const text = over(rgba(getComputedStyle(element).color), background);
  const [light, dark] = [luminance(text), luminance(background)].sort((a, b) => b - a);
  return (light + 0.05) / (dark + 0.05);
}"""


def tab_to(page, selector: str, *, limit: int = 40) -> None:
    """Press Tab until the element with the focus matches `selector` (as a person tabbing through the page)."""
    for _ in range(limit):
        if page.evaluate("(s) => !!document.activeElement && document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"{limit} Tabs never reached {selector}; the focus is on {page.evaluate(FOCUSED)}")


def enter_and_wait(page) -> None:
    with page.expect_navigation():
        page.keyboard.press("Enter")


def question_names(page) -> list[str]:
    return page.locator("#wb-stage #answer-form [data-question]").evaluate_all(
        "(groups) => groups.map((group) => group.dataset.question)"
    )


def answer_item(page, keys: dict[str, str], label_key: str) -> None:
    """`q` to each question in document order, its keys, Esc, then the label key (not submitted yet)."""
    names = question_names(page)
    assert set(keys) == set(names), (sorted(keys), names)
    for name in names:
        page.keyboard.press("q")
        assert page.evaluate(FOCUSED_QUESTION) == name, f"q should move to {name}"
        for key in keys[name]:
            page.keyboard.press(key)
        assert page.evaluate(FOCUSED_QUESTION) == name
    assert page.locator("input[name=choice]:checked").count() == 0  # the digits answered, they chose no label
    page.keyboard.press("Escape")
    assert page.evaluate(FOCUSED_QUESTION) is None
    page.keyboard.press(label_key)
    assert page.locator(f'input[name=choice][value="{CHOICES[label_key]}"]').is_checked()


def claim_keys(names: list[str], ticked) -> dict[str, str]:
    """Every claim box gets keys: "1" ticks it, "11" ticks and unticks it (a keyed "no")."""
    keys = {}
    for name in names:
        if name.startswith("q.verifiable."):
            _, _, side, index = name.split(".")
            keys[name] = "1" if ticked(side, int(index)) else "11"
    return keys


def boxes(names: list[str], side: str, ticked) -> list[bool]:
    count = sum(1 for name in names if name.startswith(f"q.verifiable.{side}."))
    return [bool(ticked(side, index)) for index in range(count)]


# --- one participant, start to end ---------------------------------------------------------------------


def check_fits(page, person: Person, what: str) -> None:
    assert_fits(page, f"{what} ({person.screen})")


def questionnaire_steps(page, person: Person) -> None:
    """The pre-study questionnaire, then the quiz (failed once by one of them)."""
    expect(page.locator("#questionnaire-title")).to_have_text("Before you start")
    check_fits(page, person, "pre-study questionnaire")
    tab_to(page, 'input[name="q.age"]')
    page.keyboard.type(str(person.age))
    shoot(page, "designs-pre", person.screen)
    tab_to(page, "#questionnaire-submit")
    enter_and_wait(page)

    expect(page.locator("#questionnaire-title")).to_have_text("A short quiz")
    assert "attempt 1 of 2" in page.locator(".questionnaire").inner_text()
    quiz = 'input[name="q.meaning"]'
    if person.fails_quiz:
        tab_to(page, quiz)  # the first option has the focus: Space picks "true", wrong
        page.keyboard.press("Space")
        assert page.locator(f'{quiz}[value="true"]').is_checked()
        tab_to(page, "#questionnaire-submit")
        enter_and_wait(page)
        feedback = page.locator("#quiz-feedback")
        expect(feedback).to_contain_text("1 attempt left")
        expect(feedback).to_contain_text(QUIZ_FEEDBACK)
        assert "attempt 2 of 2" in page.locator(".questionnaire").inner_text()
        check_fits(page, person, "quiz feedback")
        shoot(page, "designs-quiz-failed", person.screen)
    # No script handles keys on a questionnaire page: it must promise none (no key caps, no "q moves" hint).
    form = page.locator("#questionnaire-form")
    person.quiz_keys = (form.locator("kbd").count(), "moves to the next question" in form.inner_text())
    # ... then Tab, Space and an arrow key, which a radio group always takes
    tab_to(page, quiz)
    if page.locator(f"{quiz}:checked").count() == 0:
        page.keyboard.press("Space")  # the first option, then the arrow key moves the choice to the second
    page.keyboard.press("ArrowDown")
    assert page.locator(f'{quiz}[value="checkable"]').is_checked()
    shoot(page, "designs-quiz", person.screen)
    tab_to(page, "#questionnaire-submit")
    enter_and_wait(page)


def training_steps(page, person: Person, study: Study, user) -> None:
    """Two training items, each followed by its feedback page; the second answered wrong on purpose."""
    for number, entry in enumerate(TRAINING):
        external_id = entry["item"]
        page.locator("#wb-training").wait_for()
        page.keyboard.press("Escape")  # the instructions, open on the first item page
        assert page.locator("#wb-help").get_attribute("open") is None
        assert page.locator(".wb-suggestion").count() == 0  # training is no item of the study: no suggestion
        item = Item.objects.get(study=study, external_id=external_id)
        left = training_assignment(study, item, user).left_system
        assert page.locator("#wb-list-1 > li").first.inner_text().startswith(item.payload["lists"][left][0])
        names = question_names(page)
        keys = {**claim_keys(names, lambda side, index: side == "list_1"), "q.confidence": "3"}
        answer_item(page, keys, "3")  # About the same: right for t-1 (tie), wrong for t-2 (a_strong)
        check_fits(page, person, f"training item {number + 1}")
        if number == 0:
            shoot(page, "designs-training", person.screen)
        enter_and_wait(page)

        heading = page.locator("#feedback-title")
        right = TRAINING_GOLD[external_id] == "tie"
        expect(heading).to_have_text("Right" if right else "Not quite")
        expected = preference_as_seen(TRAINING_GOLD[external_id], SYSTEMS, left)
        text = page.locator(".training-feedback").inner_text()
        assert "Your answer: About the same." in text and f"The expected answer: {expected}." in text, text
        assert page.locator("#feedback-explanation").is_visible()
        wait_until(page, "() => document.activeElement && document.activeElement.id === 'training-continue'")
        person.continue_contrast = page.locator("#training-continue kbd").evaluate(CONTRAST)
        check_fits(page, person, f"training feedback {number + 1}")
        shoot(page, f"designs-training-feedback-{number + 1}", person.screen)
        enter_and_wait(page)


def item_steps(page, person: Person, study: Study) -> None:
    """The participant's two items: the suggestion (or none), every claim box and the Likert keyed, a label."""
    for number, label_key in enumerate(person.labels):
        shown = shown_item(page)
        assert shown is not None and shown.isdigit(), f"no item of the study on screen: {shown!r}"
        assignment = Assignment.objects.select_related("item").get(pk=int(shown))
        item = assignment.item
        left = assignment.left_system
        right = next(system for system in SYSTEMS if system != left)
        lists = item.payload["lists"]
        assert page.locator("#wb-list-1 > li").count() == len(lists[left])
        assert page.locator("#wb-list-2 > li").count() == len(lists[right])
        page.keyboard.press("Escape")  # closes the instructions if they are open; nothing otherwise
        suggestion = page.locator(".wb-suggestion")
        if person.condition == "shown":
            expect(suggestion).to_be_visible()
            said = preference_as_seen(JUDGE[item.external_id], SYSTEMS, left)
            text = suggestion.text_content() or ""  # (inner_text is upper-cased by the label's style)
            assert "Machine suggestion" in text and suggestion.get_attribute("aria-label") == "Machine suggestion"
            expect(suggestion.locator(".wb-suggestion-label")).to_have_text(said)
            assert not any(system in text for system in SYSTEMS)  # never names a system
            person.suggestions.append(said)
        else:
            assert suggestion.count() == 0 and "Machine suggestion" not in page.content()
            person.suggestions.append("")
        names = question_names(page)

        def ticked(side: str, index: int, number: int = number) -> bool:
            return (index + number + (side == "list_2")) % 2 == 0

        person.submit_contrast = page.locator("#wb-submit kbd").evaluate(CONTRAST)
        confidence = 2 + number + (person.screen == "phone")
        answer_item(page, {**claim_keys(names, ticked), "q.confidence": str(confidence)}, label_key)
        check_fits(page, person, f"item {number + 1}")
        page.evaluate("() => window.scrollTo(0, 0)")
        shoot(page, f"designs-item-{number + 1}", person.screen)
        if number == 0:
            page.screenshot(path=str(shot_path(f"designs-item-full-{person.screen}")), full_page=True)
        person.expected[item.external_id] = {
            "choice": CHOICES[label_key],
            "left": left,
            "answers": {
                "verifiable": {left: boxes(names, "list_1", ticked), right: boxes(names, "list_2", ticked)},
                "confidence": confidence,
            },
        }
        submit_item(page, "Enter")


def shot_path(name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS / f"{name}.png"


def run_participant(browser, live_server, link: ParticipantLink, study: Study, person: Person) -> None:
    problems: list[str] = []
    context, page = device(browser, live_server, problems, viewport=SCREENS[person.screen])
    try:
        page.goto(arrival_url(link, person.pid))
        page.locator("#consent-text").wait_for()
        check_fits(page, person, "consent")
        tab_to(page, "#consent-agree")
        page.keyboard.press("Space")
        assert page.locator("#consent-agree").is_checked()
        tab_to(page, "#consent-submit")
        enter_and_wait(page)
        page.locator("#instructions-text").wait_for()
        tab_to(page, "#instructions-start")
        enter_and_wait(page)
        user = Participant.objects.get(study=study, panel_id=person.pid).member.user

        questionnaire_steps(page, person)
        training_steps(page, person, study, user)
        item_steps(page, person, study)

        expect(page.locator("#questionnaire-title")).to_have_text("Before you go")
        check_fits(page, person, "post-study questionnaire")
        tab_to(page, 'input[name="q.clear"]')  # the first point has the focus; each arrow moves the choice on
        for _ in range(person.clear - 1):
            page.keyboard.press("ArrowRight")
        assert page.locator(f'input[name="q.clear"][value="{person.clear}"]').is_checked()
        shoot(page, "designs-post", person.screen)
        tab_to(page, "#questionnaire-submit")
        enter_and_wait(page)

        expect(page.locator("#end-code")).to_have_text("DONE123")
        assert page.locator("#end-title").inner_text() == "Thank you: you have finished"
        check_fits(page, person, "end page")
        shoot(page, "designs-end", person.screen)
        assert page.evaluate("window.__cspViolations || []") == []
    finally:
        context.close()
    assert problems == [], problems


# --- the scenario --------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_preference_study_with_questions_questionnaires_training_and_conditions(
    browser, live_server, page, guard, researcher
):
    study, link = designs_study(live_server, researcher)
    people = [
        Person("5f1a0000000000000000001a", "laptop", "hidden", False, 34, 5, ("2", "5")),
        Person("5f1b0000000000000000001b", "phone", "shown", True, 51, 4, ("4", "1")),
    ]
    for person in people:
        run_participant(browser, live_server, link, study, person)

    # --- what was stored ---
    users = {
        person.pid: Participant.objects.select_related("member__user").get(study=study, panel_id=person.pid).member.user
        for person in people
    }
    for person in people:
        user = users[person.pid]
        participant = Participant.objects.get(study=study, panel_id=person.pid)
        assert participant.status == Participant.Status.COMPLETED
        assert StudyMember.objects.get(study=study, user=user).condition == person.condition
        if person.condition == "shown":
            assert all(person.suggestions), person.suggestions
        else:
            assert person.suggestions == ["", ""]
        stored = {
            a.assignment.item.external_id: a
            for a in Annotation.objects.filter(assignment__study=study, assignment__annotator=user).select_related(
                "assignment__item"
            )
        }
        assert set(stored) == set(person.expected)
        for external_id, expected in person.expected.items():
            annotation = stored[external_id]
            assert annotation.choice == expected["choice"]
            assert annotation.assignment.left_system == expected["left"]
            assert annotation.question_answers == expected["answers"], external_id

        responses = [
            (r.kind, r.attempt, r.passed, r.answers)
            for r in QuestionnaireResponse.objects.filter(study=study, respondent=user).order_by("kind", "attempt")
        ]
        quiz = [("quiz", 1, False, {"meaning": "true"})] if person.fails_quiz else []
        quiz += [("quiz", len(quiz) + 1, True, {"meaning": "checkable"})]
        assert sorted(responses, key=lambda r: (r[0], r[1])) == sorted(
            [("pre", 1, None, {"age": person.age}), *quiz, ("post", 1, None, {"clear": person.clear})],
            key=lambda r: (r[0], r[1]),
        )

        training = {
            answer.item.external_id: (answer.label, answer.correct)
            for answer in TrainingAnswer.objects.filter(study=study, annotator=user).select_related("item")
        }
        assert training == {"t-1": ("tie", True), "t-2": ("tie", False)}

    # exact N: each item of the study answered once (N = 1), none twice, training items never handed out
    submitted = Counter(
        Assignment.objects.filter(study=study, status="submitted").values_list("item__external_id", flat=True)
    )
    assert submitted == dict.fromkeys(LISTS, 1)
    assert not Assignment.objects.filter(study=study, item__external_id__in=TRAINING_GOLD).exists()
    assert Annotation.objects.filter(assignment__study=study).count() == len(LISTS)

    # --- the researcher's report ---
    report_path = reverse("metaeval:report", args=[study.slug])
    page.set_viewport_size(SCREENS["laptop"])
    log_in(page, researcher.username, report_path)
    for section in ("questions", "conditions", "training", "questionnaires"):
        expect(page.locator(f"section#{section}")).to_be_visible()
    questionnaires = page.locator("#questionnaires").inner_text()
    assert "2 of 2 people passed (1 at the first attempt; 2 allowed), 1 failed attempt recorded" in questionnaires
    assert "Your age" in questionnaires and "The instructions were clear" in questionnaires
    training_text = page.locator("#training").inner_text()
    assert training_text.count("1 / 2") == 2, training_text
    conditions = page.locator("#conditions").inner_text()
    assert "hidden" in conditions and "shown" in conditions and "judge" in conditions
    questions = page.locator("#questions")
    claims = sum(len(claims) for lists in LISTS.values() for claims in lists.values())
    expect(questions.locator("#question-verifiable")).to_contain_text(f"asked of each claim; {claims} answers")
    expect(questions.locator("#question-confidence")).to_contain_text(f"asked of each item; {len(LISTS)} answers")
    page.locator("#conditions").scroll_into_view_if_needed()
    shoot(page, "designs-report-conditions", "laptop")
    page.locator("#questions").scroll_into_view_if_needed()
    shoot(page, "designs-report-questions", "laptop")
    page.set_viewport_size(SCREENS["phone"])
    assert_fits(page, "report with the study designs' sections (phone)")
    page.locator("#questionnaires").scroll_into_view_if_needed()
    shoot(page, "designs-report-questionnaires", "phone")
    guard.assert_clean(page)

    # --- the export carries every answer and the condition ---
    names = pseudonyms(study)
    rows = [json.loads(line) for line in "".join(export_chunks(study, "jsonl")).splitlines()]
    assert len(rows) == len(LISTS)
    expected_rows = {}
    for person in people:
        annotator = names[users[person.pid].pk]
        for external_id, expected in person.expected.items():
            expected_rows[external_id] = (annotator, person.condition, expected["answers"])
    for row in rows:
        annotator, condition, answers = expected_rows[row["item"]]
        assert (row["annotator"], row["condition"]) == (annotator, condition)
        assert row["q_verifiable"] == answers["verifiable"] and row["q_confidence"] == answers["confidence"]

    # --- the notebook client reads every answer, one row per question and target ---
    lab = Claimlab(live_server.url, issue_token(user=researcher, name="notebook").key)
    frame = lab.question_answers(study.slug)
    got = sorted(
        (r["item"], r["annotator"], r["condition"], r["question"], r["target"], json.dumps(r["value"]))
        for r in frame.to_dict("records")
    )
    want = []
    for external_id, (annotator, condition, answers) in expected_rows.items():
        want.append((external_id, annotator, condition, "confidence", "", json.dumps(answers["confidence"])))
        for system, ticks in answers["verifiable"].items():
            want += [
                (external_id, annotator, condition, "verifiable", f"{system}#{index}", json.dumps(tick))
                for index, tick in enumerate(ticks)
            ]
    assert got == sorted(want)

    # --- what the participant's pages promise: app bugs, each named (the test fails until they are fixed) ---
    broken = []
    for person in people:
        assert person.submit_contrast >= 3, f"the item page's Submit key cap: contrast {person.submit_contrast:.2f}"
        if person.continue_contrast < 3:
            broken.append(
                f"({person.screen}) the crowd training feedback's Continue button shows its key cap 'Enter' at a "
                f"contrast of {person.continue_contrast:.2f}:1 (the item page's Submit: {person.submit_contrast:.2f}:1)"
                ": white text on claimlab.css's light kbd background, because templates/annotation/participant/"
                "training_feedback.html does not load css/workbench.css (which styles '.button.primary kbd'), "
                "unlike templates/annotation/training_feedback.html and participant/questionnaire.html"
            )
        if person.quiz_keys != (0, False):
            broken.append(
                f"({person.screen}) the quiz page promises keys no script handles: {person.quiz_keys[0]} key cap(s), "
                f"the 'q moves to the next question' hint {'shown' if person.quiz_keys[1] else 'absent'}"
            )
    assert broken == [], "\n".join(broken)
