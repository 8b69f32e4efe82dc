"""Issue 3's "done when": three demo annotators, logged in at once, label the demo
studies to the end in the browser; each keeps their own stable order, and every
item ends with exactly N labels from N different people.

The studies are the real demo definitions (fixtures/studies.json, instructions
and options included) loaded by the demo loader, cut to their first items so
the test stays short. The three browsers take turns item by item, so each of
their requests meets the other two's assignments in flight.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest
from django.urls import reverse

from annotation.models import Annotation, Assignment, Study
from annotation.studies.demo import DEMO_ANNOTATORS, fixtures_dir, load_demo
from tests.browser.fixtures import VIEWPORT
from tests.support.workbench_browser import submit_item

pytestmark = pytest.mark.browser

CUT = {"factscore-pref": 4, "factcheck-gpt": 3}


@pytest.fixture
def demo(tmp_path) -> dict[str, str]:
    """The demo's preference and verification studies with their first items; the demo passwords."""
    source = fixtures_dir()
    definitions = [entry for entry in json.loads((source / "studies.json").read_text()) if entry["slug"] in CUT]
    for entry in definitions:
        lines = (source / entry["items"]).read_text(encoding="utf-8").splitlines()[: CUT[entry["slug"]]]
        target = tmp_path / entry["items"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        entry["annotations"] = None
    (tmp_path / "studies.json").write_text(json.dumps(definitions), encoding="utf-8")
    return load_demo(directory=tmp_path).passwords


def log_in(page, username: str, password: str, next_path: str) -> None:
    page.goto(f"{reverse('login')}?next={next_path}")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(password)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith(next_path)


def shown(page, kind: str) -> tuple[str, ...]:
    """What identifies the item on screen, with the lists in their on-screen order."""
    if kind == "preference":
        return tuple(page.locator(selector).inner_text() for selector in ("#wb-source", "#wb-list-1", "#wb-list-2"))
    return (page.locator("#wb-claim").inner_text(),)


def answer(page, kind: str, turn: int) -> None:
    """Answer with the keyboard alone, then submit (the next item is swapped in, or the page navigates)."""
    if kind == "preference":
        page.keyboard.press(str(1 + turn % 5))
        page.keyboard.press("j")
        page.keyboard.type(f"Turn {turn}: coverage.")  # typed key by key, so short
        keys = ["Control+Enter"]
    else:
        for _ in range(page.locator(".passage").count()):
            page.keyboard.press("xyn"[turn % 3])  # judge the current passage; focus moves to the next
        keys = [str(1 + turn % 3), "Enter"]
    submit_item(page, *keys)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("slug", list(CUT))
def test_three_demo_annotators_label_a_demo_study_to_the_end(browser, live_server, guard, demo, slug):
    study = Study.objects.get(slug=slug)
    n_items = CUT[slug]
    path = reverse("annotation:annotate", args=[slug])
    pages = {}
    contexts = []
    try:
        for username in DEMO_ANNOTATORS:
            context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
            contexts.append(context)
            page = context.new_page()
            page.on("pageerror", lambda error: guard.page_errors.append(str(error)))
            log_in(page, username, demo[username], path)
            page.keyboard.press("Escape")  # close the instructions shown on the first item
            pages[username] = page

        seen: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for turn in range(n_items):
            for username, page in pages.items():  # one item each, in turn
                on_screen = shown(page, study.kind)
                assert f"{turn} of {n_items} done" in page.locator(".wb-count").inner_text()
                if turn == 1:  # a reload shows the same item, lists on the same sides
                    page.reload()
                    assert shown(page, study.kind) == on_screen
                for system in study.systems:
                    assert system not in page.content()
                seen[username].append(on_screen)
                answer(page, study.kind, turn)
        for page in pages.values():
            assert page.locator("#wb-done").is_visible()
            assert page.evaluate("typeof window.__pwned") == "undefined"
        assert guard.page_errors == []
    finally:
        for context in contexts:
            context.close()

    # Exactly N answers per item, from N different annotators; each annotator did every item once.
    submitted = Assignment.objects.filter(study=study, status=Assignment.Status.SUBMITTED)
    assert Counter(submitted.values_list("item_id", flat=True)) == dict.fromkeys(
        study.items.values_list("pk", flat=True), 3
    )
    assert Annotation.objects.filter(assignment__study=study).count() == 3 * n_items
    for username in DEMO_ANNOTATORS:
        mine = list(submitted.filter(annotator__username=username).select_related("item").order_by("submitted_at"))
        assert len({a.item_id for a in mine}) == n_items
        # What each person saw, in their order, is what was stored for them (sides included).
        if study.kind == "preference":
            stored = [
                (
                    a.item.payload["source"],
                    *("\n".join(a.item.payload["lists"][s]) for s in (a.left_system, other(study, a))),
                )
                for a in mine
            ]
            assert [(src, l1.replace("\n", ""), l2.replace("\n", "")) for src, l1, l2 in seen[username]] == [
                (src, l1.replace("\n", ""), l2.replace("\n", "")) for src, l1, l2 in stored
            ]
        else:
            assert [s[0] for s in seen[username]] == [a.item.payload["claim"] for a in mine]
    if study.kind == "preference":  # counterbalanced: each item was shown both ways round
        sides = defaultdict(set)
        for item_id, left in submitted.values_list("item_id", "left_system"):
            sides[item_id].add(left)
        assert all(found == set(study.systems) for found in sides.values()), sides


def other(study: Study, assignment: Assignment) -> str:
    return next(system for system in study.systems if system != assignment.left_system)
