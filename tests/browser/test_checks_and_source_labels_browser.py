"""Issue 29's settings in a real browser: the participants page warns when the check items cannot cover a
full quota, the study settings carry "Count check items in agreement", and the import form asks what a
pipeline file's own labels become. Screenshots at 1280 and 390 px (under $CLAIMLAB_SCREENSHOTS when set);
no page scrolls sideways."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Study
from tests.annotation.crowd_support import crowd_study
from tests.browser.screens import shoot_sizes

pytestmark = pytest.mark.browser


def _log_in(page, researcher, url: str) -> None:
    page.goto(f"{reverse('login')}?next={url}")
    page.locator("#id_username").fill(researcher.username)
    page.locator("#id_password").fill(f"pw-{researcher.username}")
    with page.expect_navigation():
        page.locator("button[type=submit]").click()


@pytest.mark.django_db(transaction=True)
def test_the_check_warning_the_checks_setting_and_the_labels_choice_on_their_pages(
    live_server, page, guard, shots, researcher
):
    study, _link = crowd_study(
        "checks-browser",
        researcher=researcher.username,
        items_per_participant=20,
        attention_items=["g-0", "g-1"],
        attention_every=5,
    )
    _log_in(page, researcher, reverse("annotation:study_participants", args=[study.slug]))
    warning = page.locator("#check-warning")
    assert "needs 3 attention check item(s)" in warning.inner_text()
    warning.scroll_into_view_if_needed()
    shoot_sizes(page, shots, "participants-check-warning")

    page.goto(reverse("annotation:study_settings", args=[study.slug]))
    box = page.locator("#id_checks_in_agreement")
    assert not box.is_checked()
    box.check()
    with page.expect_navigation():
        page.locator("#save-settings").click()
    assert Study.objects.get(pk=study.pk).checks_in_agreement is True
    page.goto(reverse("annotation:study_settings", args=[study.slug]))
    page.locator("#id_checks_in_agreement").scroll_into_view_if_needed()
    shoot_sizes(page, shots, "settings-checks-in-agreement")

    page.goto(reverse("annotation:study_detail", args=[study.slug]))
    choice = page.locator("#id_source_labels")
    assert choice.input_value() == "gold"
    choice.scroll_into_view_if_needed()
    shoot_sizes(page, shots, "import-source-labels")
    guard.assert_clean(page)
