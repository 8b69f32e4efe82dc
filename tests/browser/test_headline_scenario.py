"""Issue 11's "done when", in the browser with no command line and no admin.

A new researcher account creates a preference study (the VeriScore study's
shape: 120 items, two systems' claim lists, 3 annotators) and a verification
study (30 items), writes instructions with a nested list and sees them
rendered, uploads the items, invites three annotators by link and opens both
studies. The three annotators, each in their own browser, sign up through the
link, join the second study through its link, and label everything with the
keyboard. The researcher watches the progress page update by itself, closes
the studies, and downloads the report (HTML, CSV, LaTeX, SVG and PDF charts)
with Fleiss kappa and its interval.

The annotators judge by what they see on screen (the list with the "Good"
claims, the claim's stated verdict), so their labels agree in system space
whatever the counterbalanced sides, except where one annotator is set to
differ: the kappa the report shows is checked against statsmodels on the
stored labels.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from annotation.models import Annotation, Item, Study
from tests.browser.fixtures import RECORD_CSP
from tests.support.page_waits import wait_until
from tests.support.workbench_browser import submit_item, wait_saved

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
PASSWORD = "quiet-lantern-harbour-71"
ANNOTATORS = ("ann", "bea", "cai")
N_PREFERENCE, N_VERIFICATION = 120, 30
INSTRUCTIONS = (
    "# How to judge\n\n"
    "1. Read the text.\n"
    "2. Decide:\n"
    "   - **supported** - the evidence confirms the claim.\n"
    "   - **contradicted** - the evidence refutes it.\n"
)


def preference_file(folder: Path) -> Path:
    """120 texts; on even items veriscore's list holds the good claims, on odd ones safe's."""
    path = folder / "preference.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for n in range(N_PREFERENCE):
            good, weak = ("veriscore", "safe") if n % 2 == 0 else ("safe", "veriscore")
            lists = {good: [f"Good claim {n}.{k}" for k in range(3)], weak: [f"Weak claim {n}.{k}" for k in range(2)]}
            record = {"id": f"p-{n:03d}", "source": f"Text number {n} about a person.", "lists": lists}
            record["domain"] = "bio" if n < 60 else "news"
            out.write(json.dumps(record) + "\n")
    return path


def verification_file(folder: Path) -> Path:
    path = folder / "verification.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for n in range(N_VERIFICATION):
            verdict = ("supported", "contradicted", "inconclusive")[n % 3]
            out.write(json.dumps({"id": f"c-{n:02d}", "claim": f"Claim {n} is {verdict}.", "context": "Ctx."}) + "\n")
    return path


def new_page(browser, live_server, errors: list[str], viewport=DESKTOP):
    context = browser.new_context(viewport=viewport, base_url=live_server.url, accept_downloads=True)
    context.set_default_timeout(15_000)
    context.add_init_script(RECORD_CSP)
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    return context, page


def create_study(page, *, kind: str, name: str, slug: str, systems: str = "") -> None:
    page.goto(reverse("annotation:my_studies"))
    with page.expect_navigation():
        page.click("#new-study")
    page.check(f"input[name=kind][value={kind}]")
    page.fill("#id_name", name)
    page.fill("#id_slug", slug)
    page.fill("#id_annotators_per_item", "3")
    if systems:
        page.fill("#id_systems", systems)
    page.locator("#id_instructions").fill(INSTRUCTIONS)
    nested = page.locator("#instructions-preview ol > li > ul > li")
    nested.first.wait_for()  # the live preview renders the nested list as annotators will see it
    assert nested.count() == 2
    with page.expect_navigation():
        page.click("#create-study")
    assert page.locator(".prose ol > li > ul > li").count() == 2


def upload_items(page, slug: str, path: Path) -> None:
    page.goto(reverse("annotation:study_detail", args=[slug]))
    page.select_option("#id_what", "items")
    page.set_input_files("#id_file", str(path))
    with page.expect_navigation():
        page.click("#import button[type=submit], form[enctype='multipart/form-data'] button[type=submit]")


def invite_link(page, slug: str) -> str:
    page.goto(reverse("annotation:study_members", args=[slug]))
    page.fill("#id_invite-max_uses", "3")
    with page.expect_navigation():
        page.click("#create-invite button[type=submit]")
    return page.locator("#new-invite-url").inner_text().strip()


def set_status(page, slug: str, status: str) -> None:
    page.goto(reverse("annotation:study_detail", args=[slug]))
    if status in ("closed", "paused"):  # Close and Pause ask first, in a dialog (issue 34)
        page.click(f"#status-actions button[value={status}]")
        with page.expect_navigation():
            page.click("#status-dialog-yes")
        return
    with page.expect_navigation():
        page.click(f"#status-actions button[value={status}]")


def answer_preference(page, annotator: int, turn: int) -> None:
    """The list with the good claims, strongly; the third annotator says "slightly" on every 6th item."""
    good_is_first = "Good claim" in page.locator("#wb-list-1").inner_text()
    key = ("1", "5") if annotator != 2 or turn % 6 else ("2", "4")
    submit_item(page, key[0] if good_is_first else key[1], "Enter")


def answer_verification(page, annotator: int, turn: int) -> None:
    """The verdict the claim states; the second annotator says "inconclusive" on every 5th item."""
    claim = page.locator("#wb-claim").inner_text()
    verdict = next(label for label in ("supported", "contradicted", "inconclusive") if label in claim)
    if annotator == 1 and turn % 5 == 0:
        verdict = "inconclusive"
    submit_item(page, str(1 + ("supported", "contradicted", "inconclusive").index(verdict)), "Enter")


def stored_fleiss(study: Study, categories: list[str]) -> float:
    rows: dict[int, list[int]] = {}
    for item_id, label in Annotation.objects.filter(assignment__study=study).values_list(
        "assignment__item_id", "label"
    ):
        rows.setdefault(item_id, []).append(categories.index(label))
    table, _ = aggregate_raters(np.array(list(rows.values())), n_cat=len(categories))
    return float(fleiss_kappa(table, method="fleiss"))


@pytest.mark.django_db(transaction=True)
def test_a_new_researcher_runs_a_preference_and_a_verification_study_from_the_browser(browser, live_server, tmp_path):
    researchers = Group.objects.create(name="researchers")
    researchers.permissions.add(Permission.objects.get(codename="add_study"))
    lead = User.objects.create_user(username="rosa", password=PASSWORD)
    lead.groups.add(researchers)
    errors: list[str] = []
    contexts = []
    try:
        context, page = new_page(browser, live_server, errors)
        contexts.append(context)
        page.goto(reverse("login"))
        page.fill("#id_username", "rosa")
        page.fill("#id_password", PASSWORD)
        with page.expect_navigation():
            page.keyboard.press("Enter")

        create_study(page, kind="preference", name="Claim lists", slug="claim-lists", systems="veriscore, safe")
        create_study(page, kind="verification", name="Claim checks", slug="claim-checks")
        upload_items(page, "claim-lists", preference_file(tmp_path))
        upload_items(page, "claim-checks", verification_file(tmp_path))
        assert Item.objects.filter(study__slug="claim-lists").count() == N_PREFERENCE
        assert Item.objects.filter(study__slug="claim-checks").count() == N_VERIFICATION
        links = {slug: invite_link(page, slug) for slug in ("claim-lists", "claim-checks")}
        for slug in links:
            set_status(page, slug, "open")
        assert set(Study.objects.values_list("status", flat=True)) == {"open"}

        # The researcher keeps the progress page open (its refresh timer on a controllable clock).
        progress_context, progress = new_page(browser, live_server, errors)
        contexts.append(progress_context)
        progress.clock.install()
        progress_context.add_cookies(context.cookies())
        progress.goto(reverse("annotation:study_progress", args=["claim-lists"]))
        labels_so_far = progress.locator('[data-field="annotations"]')
        assert labels_so_far.inner_text() == "0"

        pages = []
        for n, name in enumerate(ANNOTATORS):
            annotator_context, annotator_page = new_page(browser, live_server, errors, PHONE if n == 2 else DESKTOP)
            contexts.append(annotator_context)
            annotator_page.goto(links["claim-lists"])
            annotator_page.fill("#id_username", name)
            annotator_page.fill("#id_password1", PASSWORD)
            annotator_page.fill("#id_password2", PASSWORD)
            with annotator_page.expect_navigation():
                annotator_page.click("#invite-signup button[type=submit]")
            assert annotator_page.url.endswith(reverse("annotation:annotate", args=["claim-lists"]))
            annotator_page.keyboard.press("Escape")  # the instructions shown on the first item
            pages.append(annotator_page)

        for turn in range(N_PREFERENCE):
            for n, annotator_page in enumerate(pages):
                answer_preference(annotator_page, n, turn)
            if turn == 9:  # the progress page catches up on its next tick, without a reload
                for annotator_page in pages:
                    wait_saved(annotator_page)  # answers go out in the background
                progress.clock.run_for(11_000)
                wait_until(
                    progress, "() => document.querySelector('[data-field=annotations]').textContent.trim() === '30'"
                )
        for annotator_page in pages:
            assert annotator_page.locator("#wb-done").is_visible()
            annotator_page.goto(links["claim-checks"])
            with annotator_page.expect_navigation():
                annotator_page.click("#invite-join button[type=submit]")
            annotator_page.keyboard.press("Escape")
        for turn in range(N_VERIFICATION):
            for n, annotator_page in enumerate(pages):
                answer_verification(annotator_page, n, turn)
        for annotator_page in pages:
            assert annotator_page.locator("#wb-done").is_visible()
        progress.clock.run_for(11_000)
        wait_until(
            progress,
            f"() => document.querySelector('[data-field=annotations]').textContent.trim() === '{3 * N_PREFERENCE}'",
        )

        for slug in links:
            set_status(page, slug, "closed")
        assert set(Study.objects.values_list("status", flat=True)) == {"closed"}

        # The report, and every download a paper needs.
        preference = Study.objects.get(slug="claim-lists")
        expected = stored_fleiss(preference, preference.labels)
        page.goto(reverse("metaeval:report", args=["claim-lists"]))
        report = json.loads(page.request.get(reverse("metaeval:report_download", args=["claim-lists", "json"])).text())
        fleiss = report["agreement"]["fleiss_kappa"]
        assert fleiss["value"] == pytest.approx(expected, abs=1e-9)
        low, high = fleiss["ci"]
        assert low <= fleiss["value"] <= high and low < high
        assert f"{fleiss['value']:.3f}"[:4] in page.locator("main").inner_text()
        for fmt, marker in (("html", b"<html"), ("csv", b"fleiss"), ("tex", b"\\begin{tabular}")):
            with page.expect_download() as download:
                page.click(f"a[href*='report.{fmt}']")
            body = Path(download.value.path()).read_bytes()
            assert marker in body.lower() if fmt == "csv" else marker in body, fmt
        for ext, marker in (("svg", b"<svg"), ("pdf", b"%PDF")):
            chart = page.request.get(reverse("metaeval:report_chart", args=["claim-lists", "labels", ext]))
            assert chart.status == 200 and marker in chart.body()[:400], ext
        checks = Study.objects.get(slug="claim-checks")
        check_report = page.request.get(reverse("metaeval:report_download", args=["claim-checks", "json"])).json()
        assert check_report["agreement"]["fleiss_kappa"]["value"] == pytest.approx(
            stored_fleiss(checks, checks.labels), abs=1e-9
        )
        assert Annotation.objects.filter(assignment__study=checks).count() == 3 * N_VERIFICATION
        assert errors == []
    finally:
        for context in contexts:
            context.close()
