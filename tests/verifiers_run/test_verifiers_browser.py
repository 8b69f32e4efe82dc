"""The verifiers page in a real browser: the static poller shows a run's progress live, Stop stops it.

Uses the browser fixtures of tests/browser (Debian's Chromium through
Playwright; skipped with a reason where Chromium is missing). The run is a
baseline processed by this test process, as a worker would, while the page
is open; the page must follow without a reload, log no console error, report
no CSP violation and send nothing away from 127.0.0.1.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from metaeval.models import VerifierRun
from metaeval.verifiers.runner.orchestration import run_to_completion
from metaeval.verifiers.services import create_verifier, start_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.urls("tests.verifiers_run.urls"),
    pytest.mark.django_db(transaction=True),
]


def log_in(page, username: str, next_path: str) -> None:
    page.goto(f"{reverse('login')}?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}")
    with page.expect_navigation():
        page.press("#id_password", "Enter")
    assert page.url.endswith(next_path)


def test_progress_is_live_and_a_run_can_be_stopped(page, guard, researcher, claims_study):
    overlap = create_verifier(study=claims_study, name="overlap", kind="baseline_overlap")
    majority = create_verifier(study=claims_study, name="majority", kind="baseline_majority", created_by=researcher)
    claims_study.items.filter(external_id="c1").update(gold_label="supported")
    running = start_run(verifier=overlap, enqueue=False)
    queued = start_run(verifier=majority, enqueue=False)
    path = reverse("verifiers:list", args=[claims_study.slug])
    log_in(page, researcher.username, path)

    row = page.locator(f'tr[data-run-status-url$="/runs/{running.pk}/status.json"]')
    assert row.locator('[data-field="status"]').text_content() == "Queued"
    assert row.locator('[data-field="done"]').text_content() == "0"
    run_to_completion(running)  # what the worker does while the researcher watches
    row.locator('[data-field="status"]:text-is("Succeeded")').wait_for()
    assert row.locator('[data-field="done"]').text_content() == "6"
    assert row.locator('[data-field="progress"]').evaluate("element => [element.value, element.max]") == [6, 6]
    assert row.locator('[data-field="stop"]').count() == 0  # an ended run has nothing to stop

    other = page.locator(f'tr[data-run-status-url$="/runs/{queued.pk}/status.json"]')
    with page.expect_navigation():
        other.locator('[data-field="stop"] button').click()
    assert VerifierRun.objects.get(pk=queued.pk).status == "stopped"
    assert (
        page.locator(f'tr[data-run-status-url$="/runs/{queued.pk}/status.json"] [data-field="status"]').text_content()
        == "Stopped"
    )
    guard.assert_clean(page)
