"""axe-core on the pages people work in (issue 34: crowd panels include screen-reader users).

axe-core's own script (tests/support/axe.py; pinned in requirements-dev.txt, nothing fetched) runs its
WCAG 2.0-2.2 A/AA rules and best practices on every page named in the issue, at 1280x800 and at 390x844:
the researcher's My studies, study overview (with its import form), settings, an import's page,
progress, report and participants pages; the annotator's verification and preference workbench (with
the instructions open, as on a first item, and closed); a crowd participant's consent, instructions,
questionnaire, item and end pages. None may have a violation axe rates serious or critical. Every
violation found is listed at once, by page, with the rule and the elements.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.crowd import services as crowd
from annotation.members.services import add_members
from annotation.models import ImportJob
from annotation.studies.services import update_study
from tests.annotation.crowd_support import arrival_url, crowd_study
from tests.browser.screens import SCREENS, preference, verification
from tests.support.axe import violations
from tests.support.workbench_browser import log_in

pytestmark = pytest.mark.browser

QUESTIONNAIRES = {
    "pre": [
        {"key": "age", "type": "number", "prompt": "Your age", "min": 18, "max": 120, "integer": True},
        {"key": "lang", "type": "single", "prompt": "Your first language", "options": ["English", "Other"]},
    ],
    "post": [{"key": "clear", "type": "likert", "prompt": "The instructions were clear"}],
}


def check(page, name: str, found: dict[str, list[str]]) -> None:
    """axe on the page as it is now: its serious and critical violations, under `name`."""
    page.wait_for_load_state("load")
    problems = violations(page)
    if problems:
        found[name] = problems


def log_out(page) -> None:
    page.context.clear_cookies()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_the_researchers_and_annotators_pages_have_no_serious_violations(
    screen_context, guard, screen, annotator, researcher
):
    verify, prefer = verification(annotator, researcher), preference(annotator)
    crowd_slug = "axe-crowd"
    crowd_study(crowd_slug, items=4, n=1, gold=1, researcher=researcher.username, redirect_url="")
    job = ImportJob.objects.create(
        study=verify,
        what="items",
        file_name="items.jsonl",
        file_format="jsonl",
        status=ImportJob.Status.FAILED,
        error_count=1,
        errors=[{"line": 3, "field": "id", "message": "item 'c-1' already exists in this study"}],
    )
    found: dict[str, list[str]] = {}
    page = screen_context(screen)
    log_in(page, researcher.username, reverse("annotation:my_studies"))
    check(page, "my studies", found)
    pages = {
        "study overview": reverse("annotation:study_detail", args=[verify.slug]),
        "settings": reverse("annotation:study_settings", args=[verify.slug]),
        "import job": reverse("annotation:import_job", args=[verify.slug, job.pk]),
        "progress": reverse("annotation:study_progress", args=[verify.slug]),
        "report": reverse("metaeval:report", args=[verify.slug]),
        "participants": reverse("annotation:study_participants", args=[crowd_slug]),
    }
    for name, path in pages.items():
        page.goto(path)
        check(page, name, found)
    log_out(page)

    log_in(page, annotator.username, reverse("annotation:annotate", args=[verify.slug]))
    assert page.locator("#wb-help").get_attribute("open") is not None
    check(page, "verification workbench, instructions open", found)
    page.keyboard.press("Escape")
    page.locator("#wb-help").evaluate("(details) => { details.open = false; }")
    check(page, "verification workbench", found)
    page.goto(reverse("annotation:annotate", args=[prefer.slug]))
    page.locator("#wb-help").evaluate("(details) => { details.open = false; }")
    check(page, "preference workbench", found)
    assert found == {}, f"{SCREENS[screen]['width']} px:\n" + "\n".join(
        f"{name}: {problem}" for name, problems in found.items() for problem in problems
    )
    assert guard.page_errors == [] and guard.external_requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_a_crowd_participants_pages_have_no_serious_violations(screen_context, guard, screen, researcher):
    study, link = crowd_study("axe-panel", items=4, n=1, gold=0, redirect_url="", items_per_participant=1)
    update_study(study=study, changes={"questionnaires": QUESTIONNAIRES})
    add_members(study=study, usernames=[researcher.username], role="researcher")
    link = crowd.configure_link(study=study, changes={"consent": "You will label **claims**."})
    found: dict[str, list[str]] = {}
    page = screen_context(screen)
    page.goto(arrival_url(link, "5f0a0000000000000000000a"))
    page.locator("#consent-text").wait_for()
    check(page, "consent", found)
    page.locator("#consent-agree").check()
    with page.expect_navigation():
        page.locator("#consent-submit").click()
    seen = []
    for _ in range(6):  # instructions and the pre-study questionnaire, in the order the study asks them
        if page.locator("#wb-claim").count():
            break
        if page.locator("#instructions-start").count():
            seen.append("instructions")
            check(page, "instructions", found)
            button = page.locator("#instructions-start")
        else:
            seen.append("questionnaire")
            check(page, "questionnaire", found)
            page.locator("input[name$=age]").fill("34")
            page.locator("#questionnaire-form input[type=radio]").first.check()
            button = page.locator("#questionnaire-submit")
        with page.expect_navigation():
            button.click()
    assert sorted(seen) == ["instructions", "questionnaire"], seen
    check(page, "item, instructions closed", found)
    page.locator("#wb-help > summary").click()
    check(page, "item, instructions open", found)
    page.locator("#wb-help > summary").click()
    page.evaluate("() => document.activeElement.blur()")  # Enter on the help's summary would toggle it
    page.keyboard.press("s")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    if page.locator("#questionnaire-form").count():  # the post-study questionnaire
        check(page, "post questionnaire", found)
        page.locator("#questionnaire-form input[type=radio]").first.check()
        with page.expect_navigation():
            page.locator("#questionnaire-submit").click()
    page.locator("#end-title").wait_for()
    check(page, "end", found)
    assert found == {}, f"{SCREENS[screen]['width']} px:\n" + "\n".join(
        f"{name}: {problem}" for name, problems in found.items() for problem in problems
    )
    assert guard.page_errors == [] and guard.external_requests == []
