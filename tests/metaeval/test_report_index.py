"""The report page's section index (issue 34, finding 5): made from the sections the page shows, so it lists
each of them once, in page order, and nothing the report leaves out. The browser side (sticky, Tab, jumps) is
tests/browser/test_report_index_fit_browser.py."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from metaeval.reporting import build_report
from metaeval.reporting.html_format import report_html
from metaeval.templatetags.report_index import sections_in
from metaeval.verifiers.services import import_predictions
from tests.conftest import jsonl

#: <section class="card ..." id="..."> in the page's HTML, in order (the index's own <nav> is no section).
SECTION = re.compile(r'<section class="card[^"]*" id="([^"]+)"')
INDEX = re.compile(r'<nav class="report-index" id="report-index"[^>]*>(.*?)</nav>', re.S)


def index_links(html: str) -> list[str]:
    nav = INDEX.search(html)
    assert nav, "the page has no section index"
    return re.findall(r'<li><a href="#([^"]+)">', nav.group(1))


def test_sections_are_named_by_their_short_label_or_their_heading_without_its_links():
    html = """
    <section class="stats"><h2>Not a card</h2></section>
    <section class="card" id="verifiers"><h2>Automatic verifiers <a class="tex-link" href="/x">LaTeX</a></h2></section>
    <section class="card collapsed-section" id="brand-new"><h2>A new <em>kind</em> of table
      <a href="/y">LaTeX</a></h2><h2>A second heading</h2></section>
    <section id="no-card"><h2>Left out</h2></section>
    <section class="card" id="verifiers"><h2>The same id again</h2></section>
    <section class="card" id="bare"></section>
    """
    assert sections_in(html) == [("verifiers", "Verifiers"), ("brand-new", "A new kind of table"), ("bare", "bare")]


@pytest.mark.django_db
def test_the_index_lists_every_section_the_report_shows_in_order(client, researcher, loaded_verification_study):
    study = loaded_verification_study
    import_predictions(
        study=study,
        stream=jsonl(*({"item": f"c-{n}", "verifier": "llm-x", "label": "supported"} for n in range(1, 4))),
        fmt="jsonl",
    )
    client.force_login(researcher)
    html = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    shown = list(dict.fromkeys(SECTION.findall(html)))
    links = index_links(html)
    assert links == shown
    assert {"agreement", "verifiers", "disagreements"} <= set(links)
    assert '<a href="#verifiers">Verifiers</a>' in html
    # A skip link leads past the index to the content it wraps, which can take the focus.
    assert '<a class="skip-link" href="#report-content">' in html and '<div id="report-content" tabindex="-1">' in html
    assert html.index('id="report-index"') < html.index('id="report-content"') < html.index('id="agreement"')


@pytest.mark.django_db
def test_a_preference_report_lists_its_own_sections_and_no_verifiers(client, researcher, study):
    """`study` is the seeded preference study (tests/metaeval/conftest.py)."""
    client.force_login(researcher)
    html = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    links = index_links(html)
    assert links == list(dict.fromkeys(SECTION.findall(html)))
    assert "preference" in links and "verifiers" not in links and "verifier-comparisons" not in links


@pytest.mark.django_db
def test_a_report_still_being_computed_has_no_index(client, researcher, loaded_verification_study, settings):
    settings.REPORT_INLINE_MAX_LABELS = 1  # past it the first view only says the report is being computed
    client.force_login(researcher)
    html = client.get(reverse("metaeval:report", args=[loaded_verification_study.slug])).content.decode()
    assert "The report is being computed." in html
    assert 'id="report-index"' not in html and SECTION.search(html) is None


@pytest.mark.django_db
def test_the_standalone_html_file_carries_the_phone_layout(loaded_verification_study):
    """The file written by `manage.py report --format html` inlines fit.css: its estimate tables become cards on
    a phone there too."""
    html = report_html(loaded_verification_study, build_report(loaded_verification_study))
    assert 'class="table compact estimates phone-cards"' in html
    assert ".table.phone-cards tr { display: grid;" in html
