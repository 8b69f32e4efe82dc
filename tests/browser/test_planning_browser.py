"""The planning page, the study page's precision card and the report's annotator quality, at 1280 and 390 px.

Screenshots go to CLAIMLAB_SCREENSHOTS (default /tmp/claimlab-screens), as in test_fit_screens.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.browser.screens import assert_fits, assert_reachable, shoot, verification
from tests.browser.test_workbench_browser import log_in

pytestmark = pytest.mark.browser


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_planning_page_study_card_and_annotator_quality_fit(screen_context, guard, screen, annotator, researcher):
    study = verification(annotator, researcher)
    page = screen_context(screen)
    log_in(page, researcher.username, reverse("metaeval:plan"))
    assert page.locator("#sign-test-items").inner_text() == "90 decisive items"
    assert_fits(page, f"planning page ({screen})")
    assert_reachable(page, "#plan-form button[type=submit]")
    shoot(page, "plan-preference", screen)
    page.select_option("select[name=kind]", "verification")
    page.fill("input[name=kappa_b]", "0.75")
    with page.expect_navigation():
        page.click("#plan-form button[type=submit]")
    assert page.locator("#kappa-items").is_visible() and page.locator("#difference-items").is_visible()
    page.locator("#plan-answer").scroll_into_view_if_needed()
    assert_fits(page, f"planning page, verification ({screen})")
    shoot(page, "plan-verification", screen)
    page.goto(reverse("annotation:study_detail", args=[study.slug]))
    page.wait_for_selector("#precision-width")  # the card comes after the page
    page.locator("#precision").scroll_into_view_if_needed()
    assert "wide on 40 items" in page.locator("#precision").inner_text()
    assert_fits(page, f"study page ({screen})")
    shoot(page, "study-precision", screen)
    page.goto(reverse("metaeval:report", args=[study.slug]) + "?reference=dawid_skene")
    page.locator("#annotator-quality").scroll_into_view_if_needed()
    assert "dawid_skene" in page.locator("#reference-rule").inner_text()
    assert page.locator("#annotator-quality-table tbody tr").count() == 2
    assert_fits(page, f"report, annotator quality ({screen})")
    shoot(page, "report-annotator-quality", screen)
    assert guard.page_errors == [] and guard.console_errors == [] and guard.external_requests == []
