"""A researcher makes a study in the browser: the form, the live instructions preview, opening it.

Screenshots at 1280x800 and 390x844 go to $CLAIMLAB_SCREENSHOTS (default /tmp/claimlab-studies).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from annotation.models import Study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from tests.conftest import jsonl, verification_item
from tests.support.workbench_browser import log_in

pytestmark = pytest.mark.browser

SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
SHOTS = Path(os.environ.get("CLAIMLAB_SCREENSHOTS", "/tmp/claimlab-studies"))
INSTRUCTIONS = (
    "# Label each claim\n\n"
    "1. Read the claim.\n"
    "2. Give it one label:\n"
    "   - **supported** - the evidence confirms it.\n"
    "   - **contradicted** - the evidence refutes it.\n"
)


def shoot(page, name: str) -> None:
    """Screenshots at both sizes; the page must never scroll sideways."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        page.screenshot(path=str(SHOTS / f"{name}-{size}.png"), full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name} scrolls sideways by {overflow}px at {size}"
    page.set_viewport_size(SIZES["desktop"])


def test_a_researcher_creates_a_study_with_nested_instructions_and_opens_it(page, guard, make_user):
    lead = make_user("lena")
    group = Group.objects.create(name="researchers")
    group.permissions.add(Permission.objects.get(codename="add_study"))
    lead.groups.add(group)
    log_in(page, "lena", reverse("annotation:my_studies"))

    with page.expect_navigation():
        page.click("#new-study")
    page.check("input[name=kind][value=verification]")
    page.fill("#id_name", "Claims pilot")
    page.fill("#id_slug", "claims-pilot")
    page.fill("#id_annotators_per_item", "2")
    page.locator("#id_instructions").fill("")
    page.locator("#id_instructions").press_sequentially(INSTRUCTIONS, delay=2)
    # the live preview (server-rendered, sanitised) shows a list nested in the second item
    nested = page.locator("#instructions-preview ol > li > ul > li")
    nested.first.wait_for()
    assert nested.count() == 2
    assert nested.nth(0).inner_text().startswith("supported - the evidence confirms it.")
    assert page.locator("#instructions-preview h1").inner_text() == "Label each claim"
    assert page.locator("#id_systems").is_hidden()  # preference-only fields are hidden for verification
    shoot(page, "new-study")

    with page.expect_navigation():
        page.click("#create-study")
    assert page.url.endswith(reverse("annotation:study_detail", args=["claims-pilot"]))
    study = Study.objects.get(slug="claims-pilot")
    assert study.status == "draft" and study.annotators_per_item == 2
    assert page.locator(".prose ol > li > ul > li").count() == 2  # the study page, same renderer
    import_items(study=study, stream=jsonl(*(verification_item(f"c-{n}") for n in range(3))), fmt="jsonl")

    with page.expect_navigation():
        page.click("#settings-link")
    assert page.locator("#instructions-preview ol > li > ul > li").count() == 2
    shoot(page, "study-settings")
    with page.expect_navigation():
        page.click("#lifecycle button[value=open]")
    assert page.locator("#study-status").inner_text() == "Open"
    assert Study.objects.get(slug="claims-pilot").status == "open"

    page.goto(reverse("annotation:annotate_preview", args=["claims-pilot"]))
    assert page.locator("#wb-claim").inner_text() == "Claim c-0 is true."
    assert page.locator("#preview-instructions ol > li > ul > li").count() == 2
    shoot(page, "annotate-preview")

    page.goto(reverse("annotation:study_detail", args=["claims-pilot"]))
    shoot(page, "study-detail")
    page.goto(reverse("annotation:formats_help", args=["claims-pilot"]))
    shoot(page, "formats")

    # after the first label, label settings are locked (with the reason) and changes are logged
    import_annotations(study=study, stream=jsonl({"item": "c-0", "annotator": "w1", "label": "supported"}), fmt="jsonl")
    page.goto(reverse("annotation:study_settings", args=["claims-pilot"]))
    assert "Locked: stored labels are canonical labels" in page.locator("#id_labels_helptext").inner_text()
    page.fill("#id_name", "Claims main run")
    with page.expect_navigation():
        page.click("#save-settings")
    assert page.locator("#changes td", has_text="Claims main run").count() == 1
    shoot(page, "study-settings-locked")
    guard.assert_clean(page)
