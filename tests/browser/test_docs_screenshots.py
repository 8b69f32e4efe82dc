"""The user guide's screenshots (docs/researcher.md): the demo's main pages at 1280 px.

The whole demo is loaded as `make run` loads it (load_demo, then load_demo_verifiers), and
each page is opened as the demo researcher or an annotator; the test checks that every page
rendered its main heading, so it runs in `make test` like any browser test. It writes the
PNGs only when CLAIMLAB_DOCS_SCREENSHOTS names a folder, e.g. to refresh the guide's:

    CLAIMLAB_DOCS_SCREENSHOTS=docs/img make test PYTEST_ARGS="-n0 tests/browser/test_docs_screenshots.py"
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.urls import reverse

from annotation.studies.demo import DEMO_ANNOTATORS, DEMO_RESEARCHER, load_demo
from metaeval.verifiers.services.demo import load_demo_verifiers

from .screens import SCREENS
from .test_demo_three_annotators import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: name of the PNG -> (who looks, URL name, its arguments, the main heading the page must show)
PAGES = {
    "study-list": (DEMO_RESEARCHER, "annotation:my_studies", [], "My studies"),
    "study": (DEMO_RESEARCHER, "annotation:study_detail", ["factcheck-gpt"], "Factcheck-GPT"),
    "annotate-verification": (DEMO_ANNOTATORS[0], "annotation:annotate", ["factcheck-gpt"], "Factcheck-GPT"),
    "annotate-preference": (DEMO_ANNOTATORS[0], "annotation:annotate", ["factscore-pref"], "FActScore"),
    "progress": (DEMO_RESEARCHER, "annotation:study_progress", ["xsum-factuality"], "Progress and quality control"),
    "report": (DEMO_RESEARCHER, "metaeval:report", ["xsum-factuality"], "Report: XSum"),
}


@pytest.mark.django_db(transaction=True)
def test_the_guides_pages_render_their_main_heading_at_1280_px(browser, live_server, guard):
    passwords = load_demo().passwords
    load_demo_verifiers()
    folder = os.environ.get("CLAIMLAB_DOCS_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
    contexts = {}
    for name, (who, url_name, args, heading) in PAGES.items():
        if who not in contexts:
            context = browser.new_context(viewport=SCREENS["laptop"], base_url=live_server.url)
            context.set_default_timeout(30_000)
            context.route("**/*", lambda route: keep_local(route, live_server.url, guard))
            page = context.new_page()
            page.on("pageerror", lambda error: guard.page_errors.append(str(error)))
            page.on("console", lambda m: guard.console_errors.append(m.text) if m.type == "error" else None)
            log_in(page, who, passwords[who], reverse("annotation:my_studies"))
            contexts[who] = (context, page)
        page = contexts[who][1]
        page.goto(reverse(url_name, args=args))
        page.wait_for_load_state("networkidle")
        if page.locator("#wb-help[open]").count():  # the instructions open on an annotator's first item
            page.keyboard.press("Escape")
            page.locator("#wb-help").evaluate("(details) => details.removeAttribute('open')")
        page.evaluate("() => window.scrollTo(0, 0)")
        assert page.viewport_size == SCREENS["laptop"] and SCREENS["laptop"]["width"] == 1280
        assert heading in page.locator("h1").first.inner_text(), (name, page.locator("h1").first.inner_text())
        if folder:
            page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)
    for context, _ in contexts.values():
        context.close()
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []


def keep_local(route, server: str, guard) -> None:
    """The pages need nothing from the internet: a request elsewhere is aborted and recorded."""
    if route.request.url.startswith(server):
        route.continue_()
    else:
        guard.external_requests.append(route.request.url)
        route.abort()
