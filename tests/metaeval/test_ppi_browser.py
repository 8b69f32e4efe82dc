"""The report's prediction-powered section in a browser at 1280 and 390 px: its table scrolls inside its card,
the F1@K rows show their counts, and the link to the labelled-items CSV is reachable and downloads the file.
Screenshots go to CLAIMLAB_SCREENSHOTS (tests/browser/screens.py), to be looked at."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from annotation.members.services import add_members
from metaeval.reporting.ppi import ITEM_COLUMNS
from tests.browser.screens import assert_fits, assert_reachable, shoot
from tests.metaeval.test_report_ppi import _responses_study
from tests.support.workbench_browser import log_in

pytestmark = pytest.mark.browser


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_the_ppi_section_fits_and_links_the_labelled_items(screen_context, guard, screen, researcher):
    study, _ = _responses_study()
    add_members(study=study, usernames=[researcher.username], role="researcher")
    page = screen_context(screen)
    report = reverse("metaeval:report", args=[study.slug])
    log_in(page, researcher.username, report)
    page.goto(f"{report}?reference=gold")
    section = page.locator("#ppi")
    section.scroll_into_view_if_needed()
    assert_fits(page, f"report with PPI ({screen})")
    shoot(page, "report-ppi", screen)
    text = section.inner_text()
    assert "F1@K (mean per response), all" in text and "response left out" in text
    assert "random sample of the responses" in text
    assert_reachable(page, "#ppi-items")
    with page.expect_download() as download:
        page.locator("#ppi-items").click()
    body = open(download.value.path(), encoding="utf-8").read()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert list(rows[0]) == ITEM_COLUMNS and {row["verifier"] for row in rows} == {"judge"}
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []
