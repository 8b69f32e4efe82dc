"""Pages that fit their screen: the annotate pages, the report (and its "being computed" page) and the
progress page at 1280x800 and 390x844.

Each page is checked for horizontal scrolling of the whole page
(``scrollWidth <= innerWidth``), for every control being reachable inside the
screen's width, and for tables that are wider than their card scrolling inside
it. Screenshots go to CLAIMLAB_SCREENSHOTS (default /tmp/claimlab-screens) to
be looked at; nothing is asserted on them.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from annotation.models import Annotation, Assignment, Item
from annotation.progress import cache as progress_cache
from annotation.progress.counters import answer_added, recount_study
from annotation.progress.quality_counters import CountedAnswer
from tests.browser.screens import VERIFIER, assert_fits, assert_reachable, preference, shoot, verification
from tests.support.page_waits import wait_until
from tests.support.workbench_browser import HIDE, log_in

pytestmark = pytest.mark.browser


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
    page.locator("#predictions-export").scroll_into_view_if_needed()
    assert (
        page.locator("#predictions-export-csv").is_visible() and page.locator("#predictions-export-jsonl").is_visible()
    )
    shoot(page, "verifiers-export", screen)
    assert guard.page_errors == [] and guard.external_requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_a_big_studys_first_report_page_waits_fits_and_shows_the_report_when_built(
    screen_context, guard, screen, annotator, researcher, settings, monkeypatch
):
    """Past REPORT_INLINE_MAX_LABELS the first view says the report is being computed (nothing waits on the
    build); once the background task has stored its first sections, the page's poll reloads it into
    them (counts, agreement), and once the whole report is built, into the report."""
    from django_tasks_db.models import DBTaskResult

    from metaeval.reporting import cache
    from metaeval.tasks import refresh_report

    real_build = cache.build_report

    def first_sections_on_screen(report_study, options=None, *, on_first_sections=None):
        def first(sections):
            on_first_sections(sections)
            on_first_sections.wait()  # stored (on PostgreSQL by a connection of its own)
            page.clock.run_for(2_000)  # the waiting page's poll: first sections stored, so it reloads
            page.locator("#agreement").first.wait_for()
            notice = page.locator("#report-stale").inner_text()
            assert "The rest of the report is being computed." in notice
            assert page.locator("#scores").count() == 0 and page.locator("#charts").count() == 0
            assert_fits(page, f"report, first sections ({screen})")
            shoot(page, "report-first-sections", screen)

        return real_build(report_study, options, on_first_sections=first)

    monkeypatch.setattr(cache, "build_report", first_sections_on_screen)

    study = verification(annotator, researcher)
    # Lowered after the import: past it an import of labels queues the report itself (metaeval/receivers.py),
    # and this page's own first view is what is shown here.
    settings.REPORT_INLINE_MAX_LABELS = 0
    page = screen_context(screen)
    page.clock.install()
    log_in(page, researcher.username, reverse("metaeval:report", args=[study.slug]))
    assert "The report is being computed." in page.locator("#report-stale").inner_text()
    assert page.locator("#agreement").count() == 0
    assert_fits(page, f"report being computed ({screen})")
    shoot(page, "report-being-computed", screen)
    task = DBTaskResult.objects.get(task_path="metaeval.tasks.refresh_report")
    refresh_report.call(*task.args_kwargs["args"])
    page.clock.run_for(6_000)  # the first sections' poll: the whole report is ready, so it reloads itself
    page.locator("#report-freshness").wait_for()
    assert page.locator("#scores").count() == 1
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_progress_page_fits_and_refreshes_itself(screen_context, guard, screen, annotator, researcher, monkeypatch):
    # The server's clock is not the page's: the annotator table is computed again as soon as labels change.
    monkeypatch.setattr(progress_cache, "QUALITY_REFRESH_SECONDS", 0)
    monkeypatch.setattr(progress_cache, "QUALITY_REFRESH_COST_RATIO", 0)
    study = verification(annotator, researcher)
    page = screen_context(screen)
    page.clock.install()
    log_in(page, researcher.username, reverse("annotation:study_progress", args=[study.slug]))
    page.locator("#annotator-table").wait_for()  # the page has none kept yet: progress.js asks for it at once
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
    answer = Annotation.objects.create(assignment=assignment, label="supported", raw_label="supported", active_ms=4000)
    answer_added(
        study_id=study.pk,
        item_id=item.pk,
        user_id=annotator.pk,
        complete_at=study.slots_per_item,
        answer=CountedAnswer(answer.label, answer.active_ms, answer.source),
    )  # as the submit service counts it
    page.evaluate(HIDE, True)
    page.clock.run_for(30_000)  # hidden: no refresh however long
    assert annotations.inner_text() == "80"
    assert "Paused" in page.locator("#progress-live-status").inner_text()
    page.evaluate(HIDE, False)  # shown again: refreshed at once
    wait_until(page, "() => document.querySelector('[data-field=annotations]').textContent === '81'")
    assert page.locator('[data-field="last-hour"]').inner_text() == "1"
    Annotation.objects.filter(assignment=assignment).delete()
    recount_study(study)  # the row went behind the services' back: the counters are recounted
    page.clock.run_for(11_000)  # the next tick
    wait_until(page, "() => document.querySelector('[data-field=annotations]').textContent === '80'")
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []


@pytest.mark.django_db(transaction=True)
def test_progress_page_asks_again_soon_while_another_request_computes_the_table(
    screen_context, guard, annotator, researcher
):
    """One request computes the annotator table at a time; a page that got "on its way" asks again in 2 s, not 10."""
    study = verification(annotator, researcher)
    claim = progress_cache._key(study) + ":computing"
    cache.add(claim, True)  # another request is computing it (the live server shares this process's cache)
    page = screen_context("laptop")
    page.clock.install()
    log_in(page, researcher.username, reverse("annotation:study_progress", args=[study.slug]))
    wait_until(page, "() => /next in 2 s/.test(document.querySelector('#progress-live-status').textContent)")
    assert page.locator("#quality-pending").count() == 1 and page.locator("#annotator-table").count() == 0
    cache.delete(claim)  # that request is done (here: it gave up), so the next ask computes it
    page.clock.run_for(2_500)
    page.locator("#annotator-table").wait_for()
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_instructions_on_the_first_item_leave_the_answer_controls_free(
    screen_context, guard, screen, annotator, researcher
):
    """Laptop: a side panel beside the item, nothing to close before answering. Phone: a first-run
    screen that one key (or its Close button) dismisses and that does not come back on later items."""
    study = verification(annotator, researcher)
    page = screen_context(screen)
    log_in(page, annotator.username, reverse("annotation:annotate", args=[study.slug]))
    assert page.locator("#wb-help").get_attribute("open") is not None
    shoot(page, "annotate-first-item-instructions", screen)
    assert_fits(page, f"first item with its instructions ({screen})")
    drawer = page.locator(".wb-drawer").bounding_box()
    if screen == "laptop":
        for selector in ("#wb-answer", "#wb-label", "#wb-submit"):
            control = page.locator(selector).bounding_box()
            assert control["x"] + control["width"] <= drawer["x"], f"{selector} is under the instructions"
        page.keyboard.press("?")  # closed once read (answering the first item closes them too)
    else:
        page.keyboard.press("Escape")  # the one key of the first-run screen
    assert page.locator("#wb-help").get_attribute("open") is None
    page.reload()
    assert page.locator("#wb-help").get_attribute("open") is None  # seen: not again unless asked ("?")
    page.keyboard.press("?")
    assert page.locator("#wb-help").get_attribute("open") is not None
    assert not guard.page_errors


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_the_verifier_leaderboard_fits_and_its_table_scrolls_inside_its_card(
    screen_context, guard, screen, annotator, researcher
):
    from metaeval.reporting import ReportOptions
    from metaeval.reporting import cache as report_cache

    study = verification(annotator, researcher)
    report_cache.current_report(study, ReportOptions())  # the leaderboard reads the study's current report
    page = screen_context(screen)
    log_in(page, researcher.username, reverse("metaeval:leaderboard"))
    assert_fits(page, f"leaderboard ({screen})")
    assert VERIFIER in page.locator("#leaderboard tbody").inner_text()
    assert_reachable(page, "a[href='?format=csv']")
    shoot(page, "leaderboard", screen)
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []
