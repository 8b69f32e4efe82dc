"""The import form with its "From" choice in a real browser, at laptop and phone width."""

from __future__ import annotations

import json
import os

import pytest
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Item
from annotation.studies.services import create_study
from annotation.transfer.adapters import import_from
from metaeval.models import Prediction
from tests.annotation.transfer.adapters.conftest import sample
from tests.browser.test_workbench_browser import log_in

pytestmark = pytest.mark.browser

EARLY = sample("veriscore", "veriscore_claims_early_7067724.jsonl")
BASELINE = sample("veriscore", "claims_sentence_baseline.jsonl")
SHOTS = os.environ.get("CLAIMLAB_SCREENSHOTS", "")


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
def test_two_extractors_uploaded_from_the_study_page(page, guard, researcher, viewport):
    study = create_study(slug="pref", name="Extractors", kind="preference")
    add_members(study=study, usernames=[researcher.username], role="researcher")
    page.set_viewport_size(viewport)
    log_in(page, researcher.username, reverse("annotation:study_detail", args=["pref"]))
    form = page.locator("form[enctype='multipart/form-data']")
    form.locator("#id_what").select_option("items")
    form.locator("#id_source").select_option("veriscore")
    form.locator("#id_file").set_input_files(str(EARLY))
    form.locator("#id_pair").set_input_files(str(BASELINE))
    form.locator("#id_systems").fill("veriscore,sentences")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= viewport["width"], f"the page scrolls sideways at {viewport['width']} px ({width} px wide)"
    if SHOTS:
        form.scroll_into_view_if_needed()
        page.screenshot(path=f"{SHOTS}/import-form-{viewport['width']}.png", full_page=True)
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    assert "Imported 2 new and updated 0 existing items." in page.content()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= viewport["width"], f"the job page scrolls sideways at {viewport['width']} px ({width} px wide)"
    if SHOTS:
        page.screenshot(path=f"{SHOTS}/import-done-{viewport['width']}.png", full_page=True)
    assert Item.objects.filter(study=study).count() == 2
    guard.assert_clean(page)


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
def test_a_verification_file_uploaded_on_the_verifiers_page(page, guard, researcher, viewport, tmp_path):
    study = create_study(slug="verif", name="Claims", kind="verification")
    add_members(study=study, usernames=[researcher.username], role="researcher")
    record = json.loads(sample("veriscore", "veriscore_verification_excerpt.json").read_text())
    path = tmp_path / "verification_data_sample_3.jsonl"
    path.write_text(json.dumps(record) + "\n")
    import_from(source="veriscore", target="items", study=study, stream=path.open("rb"))
    page.set_viewport_size(viewport)
    log_in(page, researcher.username, reverse("verifiers:list", args=["verif"]))
    form = page.locator(f"form[action='{reverse('verifiers:import_predictions', args=['verif'])}']")
    form.locator("#id_source").select_option("veriscore")
    form.locator("[name=file]").set_input_files(str(path))
    if SHOTS:
        page.screenshot(path=f"{SHOTS}/verifiers-import-{viewport['width']}.png", full_page=True)
    # The form fits the screen (the page's verifier and run tables, above it, scroll on a phone: not this form's).
    box = form.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    assert "Imported 3 new and 0 updated prediction(s)." in page.content()
    assert Prediction.objects.filter(verifier__study=study, parse_status="unparseable").count() == 1
    guard.assert_clean(page)
