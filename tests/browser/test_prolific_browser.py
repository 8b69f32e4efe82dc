"""The Prolific page in a real browser (issue 34), against the local fake Prolific: a researcher connects the
study, reads the submissions beside Claimlab's record, approves the suggested one, rejects the one that failed
its attention checks with Prolific's reason, previews a bonus and pays it after the confirmation. Screenshots
at 1280x800 and 390x844 (under $CLAIMLAB_SCREENSHOTS when set, else the test's tmp dir); no page scrolls
sideways; the token is in no page.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.crowd import prolific_client
from tests.annotation.crowd.prolific_support import TOKEN, A, B, G, fake_prolific, scene
from tests.browser.screens import assert_reachable, shoot_sizes

pytestmark = pytest.mark.browser

REASON = (
    "Thank you for taking part. Two of the attention checks were answered against the instructions shown with "
    "them, so this submission cannot be approved."
)


@pytest.mark.django_db(transaction=True)
def test_a_researcher_reviews_and_bonuses_on_prolific_from_claimlab(
    live_server, page, guard, shots, researcher, monkeypatch
):
    monkeypatch.setattr(prolific_client, "RETRY_BACKOFF_SECONDS", 0.0)
    with fake_prolific() as fake:
        s = scene(fake, researcher, slug="prolific-browser")
        # Start unconnected, as a researcher does: connect from the page.
        s.link.prolific_study_id, s.link.prolific_token_encrypted = "", ""
        s.link.save(update_fields=["prolific_study_id", "prolific_token_encrypted"])

        url = reverse("annotation:participants_prolific", args=[s.study.slug])
        page.goto(f"{reverse('login')}?next={reverse('annotation:study_participants', args=[s.study.slug])}")
        page.locator("#id_username").fill(researcher.username)
        page.locator("#id_password").fill(f"pw-{researcher.username}")
        with page.expect_navigation():
            page.locator("button[type=submit]").click()
        with page.expect_navigation():
            page.locator("#prolific-link").click()
        assert page.url.endswith(url)
        shoot_sizes(page, shots, "prolific-connect")
        page.locator("#id_study_id").fill(s.prolific.id)
        page.locator("#id_token").fill(TOKEN)
        with page.expect_navigation():
            page.locator("#prolific-connect").click()
        page.locator("#submission-table").wait_for()
        assert "Claim checking" in page.locator(".messages").inner_text()

        row_a = page.locator(f'tr[data-panel-id="{A}"]')
        assert row_a.locator(".suggestion").inner_text().startswith("Approve")
        assert row_a.locator(".claimlab-outcome").inner_text() == "Completed"
        assert page.locator(f'tr[data-panel-id="{B}"] .suggestion').inner_text().startswith("Reject (FAILED_CHECK)")
        shoot_sizes(page, shots, "prolific-submissions")
        page.set_viewport_size({"width": 390, "height": 844})
        assert_reachable(page, "#approve-selected")
        assert_reachable(page, f'tr[data-panel-id="{A}"] input[type=checkbox]')
        page.set_viewport_size({"width": 1280, "height": 800})

        row_a.locator("input[type=checkbox]").check()
        with page.expect_navigation():
            page.locator("#approve-selected").click()
        assert "Approved 1 submission(s)" in page.locator(".messages").inner_text()
        assert fake.submission(A)["status"] == "APPROVED"

        page.locator(f'tr[data-panel-id="{B}"] input[type=checkbox]').check()
        page.locator("#id_rejection_category").select_option("FAILED_CHECK")
        page.locator("#id_message").fill(REASON)
        with page.expect_navigation():
            page.locator("#reject-selected").click()
        assert "Rejected 1 submission(s)" in page.locator(".messages").inner_text()
        assert fake.submission(B)["status"] == "REJECTED"

        page.locator("input[name=basis][value=fixed]").check()
        page.locator("#id_amount").fill("0.50")
        page.locator("#id_panel_ids").fill(f"{A}, {G}")
        with page.expect_navigation():
            page.locator("#bonus-preview").click()
        assert page.locator("#bonus-total").inner_text().startswith("2 participants, 1.00 GBP in total")
        shoot_sizes(page, shots, "prolific-bonus-preview")
        assert fake.pays == {}
        with page.expect_navigation():
            page.locator("#bonus-pay").click()
        assert "Paid bonuses to 2 participant(s), 1.00 GBP" in page.locator(".messages").inner_text()
        assert fake.paid_lines() == [f"{A},0.50", f"{G},0.50"]
        assert TOKEN not in page.content()
        shoot_sizes(page, shots, "prolific-after")
        assert fake.problems == []
    guard.assert_clean(page)
