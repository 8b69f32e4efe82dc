"""Issue 34, finding 5 (the researcher's pages): tables that hide columns or fit badly, and a long report with
no way to jump to a section.

At 1280x800 every table of the report (the demo's WiCE study: four verifiers, the one the lab saw 1,483 px
wide; and a study with two annotators, a verifier with a long name and the baselines) fits its box with every
column header inside it, details opened too; the report's section index lists the sections the page shows, its
links are reached by Tab after a skip link, and each one brings its section into view below the sticky index.
At 390x844 a table wider than the screen says so (a visible text cue, a focusable scroll box) and one that
fits says nothing; an agreement row is not made tall by a squeezed note; My studies shows Items and Progress,
the progress page Gold accuracy and Alerts, inside the screen; the participants page's Withdraw confirmation
lies inside the screen. Screenshots (tests/browser/screens.py, $CLAIMLAB_SCREENSHOTS): report-index-*,
report-verifiers-fit-*, report-phone-*, my-studies-phone-*, progress-annotators-phone-*, withdraw-popover-*.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Item, Participant, Study
from annotation.progress.counters import recount_study
from annotation.studies.demo import fixtures_dir, load_demo
from metaeval.verifiers.runner.orchestration import run_to_completion
from metaeval.verifiers.services.demo import load_demo_verifiers
from metaeval.verifiers.services.runs import start_run
from metaeval.verifiers.services.verifiers import ensure_baselines
from tests.annotation.crowd_support import at_items, crowd_study
from tests.browser.screens import VERIFIER, assert_fits, shoot, verification
from tests.support.page_waits import wait_until
from tests.support.workbench_browser import log_in

pytestmark = pytest.mark.browser

#: Each visible table of the report that is wider than the box it sits in, or has a column header outside it.
TABLES_THAT_DO_NOT_FIT = """() => Array.from(document.querySelectorAll('main table'))
  .filter((table) => table.getClientRects().length > 0)
  .flatMap((table) => {
    const box = table.parentElement;
    const edges = box.getBoundingClientRect();
    const section = table.closest('section[id]');
    const name = (section ? section.id : '?') + ' / ' + (table.caption ? table.caption.textContent.trim() : table.id);
    const problems = [];
    if (table.scrollWidth > box.clientWidth + 1) { problems.push(`${name}: ${table.scrollWidth} px in ${box.clientWidth}`); }
    if (box.scrollWidth > box.clientWidth + 1) { problems.push(`${name}: its box scrolls (${box.scrollWidth} px)`); }
    table.querySelectorAll('thead th').forEach((th) => {
      const r = th.getBoundingClientRect();
      if (r.width < 1 || r.left < edges.left - 1 || r.right > edges.right + 1) {
        problems.push(`${name}: header "${th.textContent.trim()}" at ${Math.round(r.left)}-${Math.round(r.right)}`);
      }
    });
    return problems;
  })"""

#: The ids of the report's sections, in page order, and those the index links to.
SECTIONS = """() => [
  Array.from(document.querySelectorAll('#report-content section.card[id]')).map((s) => s.id),
  Array.from(document.querySelectorAll('#report-index ul a')).map((a) => a.getAttribute('href').slice(1)),
]"""

#: Each visible scroll box of the report: whether its table is wider, its cue's state and where the cue is.
SCROLL_BOXES = """() => Array.from(document.querySelectorAll('main .table-scroll'))
  .filter((box) => box.getClientRects().length > 0)
  .map((box) => {
    const cue = box.getAttribute('data-cue') ? document.getElementById(box.getAttribute('data-cue')) : null;
    const shown = !!cue && !cue.hidden && cue.getClientRects().length > 0;
    const c = shown ? cue.getBoundingClientRect() : null;
    const b = box.getBoundingClientRect();
    return {
      name: (box.closest('section[id]') || {}).id + ' / ' + (box.querySelector('caption') || {}).textContent,
      wider: box.scrollWidth > box.clientWidth + 1,
      cue: shown,
      cueText: shown ? cue.textContent : '',
      cueInside: shown && c.left >= 0 && c.right <= window.innerWidth && c.height > 0,
      cueAbove: shown && c.bottom <= b.top + 1,
      focusable: box.getAttribute('tabindex') === '0' && !!box.getAttribute('aria-label'),
    };
  })"""

LABELS = ["supported", "contradicted", "inconclusive"]

#: The element with the focus: its href (a link), else its id.
FOCUSED = "() => { const e = document.activeElement; return e ? (e.getAttribute('href') || e.id || e.tagName) : null; }"


def wice_demo(tmp_path, researcher) -> Study:
    """The demo's WiCE study alone, as `make run` loads it (claims, one human label each, GPT-4 and GPT-3.5
    predictions, the two baselines run), with `researcher` among its researchers."""
    folder = tmp_path / "demo"
    folder.mkdir()
    definitions = json.loads((fixtures_dir() / "studies.json").read_text(encoding="utf-8"))
    (folder / "studies.json").write_text(json.dumps([d for d in definitions if d["slug"] == "wice"]), encoding="utf-8")
    (folder / "wice").symlink_to(fixtures_dir() / "wice")
    load_demo(directory=folder)
    load_demo_verifiers(directory=folder)
    study = Study.objects.get(slug="wice")
    add_members(study=study, usernames=[researcher.username], role="researcher")
    return study


def two_annotators_three_verifiers(annotator, researcher) -> Study:
    """tests/browser/screens.py's study (two annotators, a verifier with a long name) with the two baselines run,
    and eight gold items: w1 labels item c-n labels[n % 3], right on all; w2 differs on every n that is a
    multiple of 3, so it is right on 2 of 8 (a "low gold accuracy" alert: below 60 % on 5 or more)."""
    study = verification(annotator, researcher)
    for baseline in ensure_baselines(study=study):
        run_to_completion(start_run(verifier=baseline, enqueue=False))
    for n in (0, 3, 6, 9, 12, 15, 1, 2):
        Item.objects.filter(study=study, external_id=f"c-{n}").update(gold_label=LABELS[n % 3])
    recount_study(study)  # the gold labels went in behind the services' back: the counters are recounted
    return study


def open_every_details(page) -> None:
    page.evaluate("() => document.querySelectorAll('main details').forEach((d) => { d.open = true; })")


@pytest.mark.django_db(transaction=True)
def test_at_1280_every_report_table_fits_with_every_header_and_the_index_jumps_to_each_section(
    screen_context, guard, annotator, researcher, tmp_path
):
    wice = wice_demo(tmp_path, researcher)
    other = two_annotators_three_verifiers(annotator, researcher)
    page = screen_context("laptop")
    log_in(page, researcher.username, reverse("metaeval:report", args=[wice.slug]))
    for study in (wice, other):
        page.goto(reverse("metaeval:report", args=[study.slug]))
        assert_fits(page, f"report of {study.slug} (1280)")
        assert page.evaluate(TABLES_THAT_DO_NOT_FIT) == [], study.slug
        assert page.locator("#verifier-table tbody tr").count() == (4 if study == wice else 3)
        # The verifiers' columns the lab found hidden: errors, tokens, cost and disagreements, each on screen.
        for header in ("Disagreements", "Errors", "Tokens in", "Tokens out", "Cost", "Parse failures"):
            cell = page.locator("#verifiers th", has_text=header).first
            cell.scroll_into_view_if_needed()
            box = cell.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1280, (study.slug, header, box)
        page.locator("#verifiers").scroll_into_view_if_needed()
        shoot(page, f"report-verifiers-fit-{study.slug}", "laptop")
        open_every_details(page)
        assert page.evaluate(TABLES_THAT_DO_NOT_FIT) == [], f"{study.slug}, details open"
    assert VERIFIER in page.locator("#verifier-table").inner_text()

    # The index: the sections this report shows, in order, each once; nothing else.
    sections, linked = page.evaluate(SECTIONS)
    assert linked == list(dict.fromkeys(sections)) and len(linked) >= 8
    assert {"agreement", "annotator-quality", "verifiers", "verifier-comparisons", "disagreements"} <= set(linked)

    # By the keyboard: Tab from the top reaches the skip link, then every link of the index in order.
    page.goto(reverse("metaeval:report", args=[other.slug]))
    shoot(page, "report-index", "laptop")
    page.evaluate("() => { window.scrollTo(0, 0); document.activeElement.blur(); }")
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("() => !!document.activeElement.closest('#report-index')"):
            break
    assert page.evaluate(FOCUSED) == "#report-content", "the index's first stop is its skip link"
    skip = page.locator("#report-index .skip-link").bounding_box()
    assert skip is not None and skip["width"] > 20, "the skip link shows when focused"
    reached = []
    for _ in linked:
        page.keyboard.press("Tab")
        reached.append(page.evaluate(FOCUSED))
    assert reached == [f"#{section}" for section in linked]

    # Enter on a link: the section is on screen just below the index (which stays at the top), marked current.
    for _ in linked:
        if page.evaluate(FOCUSED) == "#verifiers":
            break
        page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")
    wait_until(page, "() => location.hash === '#verifiers'")
    index = page.locator("#report-index")
    wait_until(
        page, "() => document.querySelector('#report-index a[aria-current]')?.getAttribute('href') === '#verifiers'"
    )
    top = page.locator("#verifiers").bounding_box()["y"]
    nav = index.bounding_box()
    assert abs(nav["y"]) <= 1, "the index sticks to the top of the screen"
    assert nav["y"] + nav["height"] - 1 <= top <= nav["y"] + nav["height"] + 40, (top, nav)
    shoot(page, "report-index-jumped", "laptop")

    # Every link, clicked: its section is not under the index, and on screen.
    for section in linked:
        page.locator(f'#report-index a[href="#{section}"]').click()
        wait_until(page, f"() => location.hash === '#{section}'")
        box = page.locator(f"#{section}").bounding_box()
        nav = index.bounding_box()
        assert nav["y"] + nav["height"] - 1 <= box["y"] < 800, (section, box, nav)

    # The skip link leads past the index: the focus moves to the report's content.
    page.locator("#report-index .skip-link").focus()
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "report-content"
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []


@pytest.mark.django_db(transaction=True)
def test_at_390_wide_tables_say_they_scroll_and_the_key_columns_stay_on_screen(
    screen_context, guard, annotator, researcher
):
    study = two_annotators_three_verifiers(annotator, researcher)
    page = screen_context("phone")
    log_in(page, researcher.username, reverse("metaeval:report", args=[study.slug]))
    assert_fits(page, "report (390)")
    nav = page.locator("#report-index").bounding_box()
    assert nav["height"] <= 48, f"the index takes one line on a phone, not {nav['height']} px"
    shoot(page, "report-phone-top", "phone")

    boxes = page.evaluate(SCROLL_BOXES)
    wide = [box for box in boxes if box["wider"]]
    assert len(wide) >= 3, boxes  # the verifiers, the scores, the comparisons at least
    for box in boxes:
        if box["wider"]:
            assert box["cue"] and box["cueInside"] and box["cueAbove"], box
            assert "scroll sideways" in box["cueText"].lower(), box
            assert box["focusable"], f"{box['name']}: a keyboard cannot scroll it"
        else:
            assert not box["cue"] and not box["focusable"], box
    page.locator("#verifiers").scroll_into_view_if_needed()
    shoot(page, "report-phone-verifiers", "phone")

    # An agreement row: the note has a line of its own, not a column a word wide.
    first = page.locator("#agreement table.estimates tbody tr").first
    note = first.locator("td").last
    assert note.inner_text().strip(), "the first agreement statistic has a note"
    assert note.bounding_box()["width"] >= 250 and first.bounding_box()["height"] <= 140
    labels = first.evaluate(
        "(row) => Array.from(row.cells).map((cell) => getComputedStyle(cell, '::before').content.replace(/\"/g, ''))"
    )
    assert labels[1:4] == ["Value", "95% CI", "Items"], labels  # each value under its label
    page.locator("#agreement").scroll_into_view_if_needed()
    shoot(page, "report-phone-agreement", "phone")

    # My studies: each study's Items and Progress on screen.
    page.goto(reverse("annotation:my_studies"))
    assert_fits(page, "My studies (390)")
    row = page.locator(f'#my-studies tr[data-study="{study.slug}"]')
    for field, text in (("items", "40"), ("progress", "80 of 120")):
        cell = row.locator(f'[data-field="{field}"]')
        assert text in cell.inner_text()
        inside(cell, f"My studies' {field}")
    shoot(page, "my-studies-phone", "phone")

    # The progress page: each annotator's Gold accuracy and Alerts on screen.
    page.goto(reverse("annotation:study_progress", args=[study.slug]))
    page.locator("#annotator-table").wait_for()
    assert_fits(page, "progress (390)")
    rows = page.locator("#annotator-table tbody tr[data-annotator]")
    assert rows.count() >= 2
    texts = []
    for index in range(rows.count()):
        for field in ("gold-accuracy", "alerts"):
            cell = rows.nth(index).locator(f'[data-field="{field}"]')
            inside(cell, f"progress {field} #{index}")
            texts.append(cell.inner_text())
    assert any("8 / 8 (100%)" in text for text in texts) and any("2 / 8 (25%)" in text for text in texts), texts
    assert any("low gold accuracy" in text for text in texts), texts
    page.locator("#annotators").scroll_into_view_if_needed()
    shoot(page, "progress-annotators-phone", "phone")
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_the_withdraw_confirmation_stays_inside_the_screen_and_withdraws(screen_context, guard, screen, researcher):
    study, link = crowd_study("fit-crowd", researcher=researcher.username)
    for pid in ("5f0a0000000000000000000a", "5f0b0000000000000000000b"):
        at_items(Client(), link, pid)
    page = screen_context(screen)
    log_in(page, researcher.username, reverse("annotation:study_participants", args=[study.slug]))
    assert_fits(page, f"participants ({screen})")
    row = page.locator('#payment-table tr[data-panel-id="5f0a0000000000000000000a"]')
    opener = row.get_by_role("button", name="Withdraw", exact=True)
    opener.scroll_into_view_if_needed()
    opener.click()
    popover = row.locator(".withdraw-pop")
    assert popover.evaluate("(element) => element.matches(':popover-open')")
    box, width, height = popover.bounding_box(), page.viewport_size["width"], page.viewport_size["height"]
    assert box["x"] >= 8 and box["x"] + box["width"] <= width - 8, (box, width)
    assert box["y"] >= 0 and box["y"] + box["height"] <= height, (box, height)
    assert page.evaluate("() => document.activeElement.textContent") == "Cancel"  # the safe choice first
    shoot(page, "withdraw-popover", screen)
    page.keyboard.press("Escape")
    assert not popover.evaluate("(element) => element.matches(':popover-open')")
    assert page.evaluate("() => document.activeElement.textContent") == "Withdraw"  # back where it was
    assert Participant.objects.get(study=study, panel_id="5f0a0000000000000000000a").status != "withdrawn"
    opener.click()
    with page.expect_navigation():
        popover.get_by_role("button", name="Yes, withdraw").click()
    assert Participant.objects.get(study=study, panel_id="5f0a0000000000000000000a").status == "withdrawn"
    assert Participant.objects.get(study=study, panel_id="5f0b0000000000000000000b").status != "withdrawn"
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []


def inside(locator, what: str) -> None:
    """The element, scrolled to, is visible and lies inside the screen's width."""
    locator.scroll_into_view_if_needed()
    assert locator.is_visible(), f"{what} is hidden"
    box = locator.bounding_box()
    width = locator.page.viewport_size["width"]
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (what, box)
