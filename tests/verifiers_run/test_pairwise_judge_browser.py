"""A preference study's verifiers page and report in a real browser, at laptop and phone width.

The pairwise judge is added through the page's own block, run against the
loopback server on the real factscore-pref items, and its report section is
shown beside the human ceiling. Screenshots go to $CLAIMLAB_SCREENSHOTS
(default: the pytest tmp dir) for a person to look at.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from django.db import connection
from django.urls import reverse

from metaeval.models import Verifier
from metaeval.verifiers.runner.orchestration import run_to_completion
from metaeval.verifiers.services import start_run
from tests.support.factscore_pref import judge_answer, make_study
from tests.verifiers_run.conftest import operator_endpoint
from tests.verifiers_run.test_verifiers_browser import log_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.urls("tests.verifiers_run.urls"),
    pytest.mark.django_db(transaction=True),
]
SIZES = {"laptop": (1280, 800), "phone": (390, 844)}


def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("CLAIMLAB_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_worker(run) -> None:
    try:
        run_to_completion(run)
    finally:
        connection.close()


def fits_the_screen(page, selector: str) -> bool:
    """The block ends inside the viewport (its own wide tables scroll inside it)."""
    return page.locator(selector).evaluate("el => el.getBoundingClientRect().right <= window.innerWidth + 1")


def test_add_run_and_read_a_pairwise_judge(page, guard, researcher, fake_server, tmp_path):
    fake_server.answer = judge_answer
    study = make_study(researcher=researcher)
    endpoint = operator_endpoint(fake_server.base_url)
    path = reverse("verifiers:list", args=[study.slug])
    log_in(page, researcher.username, path)
    form = page.locator("#pairwise-judge-form")
    form.locator("#id_name").fill("judge")
    form.locator("#id_model").fill("fake-model")
    form.locator("#id_endpoint").select_option(endpoint)
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    judge = Verifier.objects.get(study=study)
    assert judge.preset == "pairwise_judge"
    assert page.locator("#verifiers").get_by_text("pairwise_judge").count() == 1
    run = start_run(verifier=judge, enqueue=False)
    worker = threading.Thread(target=run_worker, args=(run,))  # as a worker would; Playwright's loop owns this thread
    worker.start()
    worker.join()
    run.refresh_from_db()
    assert (run.status, run.done) == ("succeeded", 120)

    folder = shots(tmp_path)
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        page.goto(path)
        page.locator("#pairwise-judge").scroll_into_view_if_needed()
        page.screenshot(path=str(folder / f"pairwise-verifiers-{size}.png"), full_page=True)
        assert fits_the_screen(page, "#pairwise-judge"), size
        page.goto(reverse("metaeval:report", args=[study.slug]))
        section = page.locator("#pairwise-judges")
        assert section.get_by_text("Accuracy on non-tie items").count() == 1
        assert section.get_by_text("Human ceiling").count() >= 1
        section.scroll_into_view_if_needed()
        section.screenshot(path=str(folder / f"pairwise-report-{size}.png"))
        assert fits_the_screen(page, "#pairwise-judges"), size
    guard.assert_clean(page)
