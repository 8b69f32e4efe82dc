"""The report's three faces (CLI, API, page with charts) show the same numbers, offline and CSP-clean."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Annotation, StudyMember
from tests.support.streamed import streamed_body, streamed_json

ASSET = re.compile(r'<(?:script|link|img|iframe|source)\b[^>]*?(?:src|href)="([^"]*)"', re.I)


def cli(*args: str) -> str:
    out = io.StringIO()
    call_command("report", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def cli_json(xsum_study) -> dict:
    return json.loads(cli("xsum-factuality", "--format", "json", "--by-domain", "--binary"))


def test_cli_json_has_the_issue_shape(cli_json):
    for key in (
        "study",
        "kind",
        "n_items",
        "n_annotators",
        "n_annotations",
        "agreement",
        "binary",
        "by_domain",
        "preference",
        "scores",
        "disagreements",
    ):
        assert key in cli_json, key
    agreement = cli_json["agreement"]
    for key in (
        "fleiss_kappa",
        "krippendorff_alpha",
        "pairwise_cohen_kappa",
        "mean_cohen_kappa",
        "percent_agreement",
        "full_agreement",
        "majority_agreement",
        "gwet_ac1",
        "label_distribution",
    ):
        assert key in agreement, key
    assert set(agreement["fleiss_kappa"]) >= {"value", "ci", "n_items"}
    assert round(agreement["fleiss_kappa"]["value"], 3) == 0.774
    assert cli_json["preference"] is None  # a verification study


def test_cli_without_flags_leaves_binary_and_domains_out(xsum_study):
    report = json.loads(cli("xsum-factuality"))
    assert report["binary"] is None and report["by_domain"] is None
    assert report["options"]["binary"] is False


def test_api_returns_the_same_json_as_the_cli(client, demo_researcher, cli_json):
    client.force_login(demo_researcher)
    response = client.get(reverse("api-study-report", args=["xsum-factuality"]), {"by_domain": "true", "binary": "1"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert streamed_json(response) == cli_json


def test_api_is_in_the_openapi_schema(client, demo_researcher):
    client.force_login(demo_researcher)
    schema = client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operation = schema["paths"]["/api/studies/{slug}/report"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"slug", "by_domain", "binary", "source_type"}
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    fields = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"]
    assert {"agreement", "binary", "by_domain", "preference", "scores", "disagreements"} <= set(fields)


def test_cli_csv_is_one_number_per_row(xsum_study):
    rows = list(csv.DictReader(io.StringIO(cli("xsum-factuality", "--format", "csv", "--binary"))))
    assert list(rows[0]) == ["section", "scope", "statistic", "value", "ci_low", "ci_high", "n", "note", "warning"]
    fleiss = next(r for r in rows if r["section"] == "agreement" and r["statistic"] == "fleiss_kappa")
    assert round(float(fleiss["value"]), 3) == 0.774 and fleiss["n"] == "1848"
    assert float(fleiss["ci_low"]) < float(fleiss["value"]) < float(fleiss["ci_high"])
    assert any(r["section"] == "binary" for r in rows)
    assert sum(r["section"] == "disagreement" for r in rows) == 118
    assert any(r["section"] == "scores_human" and r["statistic"] == "veriscore_k" for r in rows)


def test_cli_html_is_a_standalone_document(xsum_study, tmp_path):
    target = tmp_path / "report.html"
    err = io.StringIO()
    call_command("report", "xsum-factuality", "--format", "html", "--output", str(target), stderr=err)
    html = target.read_text(encoding="utf-8")
    assert "Wrote" in err.getvalue() and html.startswith("<!doctype html>")
    assert "0.774" in html and "Disagreements (118 items)" in html
    assert html.count('src="data:image/svg+xml;base64,') == 3  # labels, agreement and annotator charts, embedded
    assert not [u for u in ASSET.findall(html) if re.match(r"^(https?:)?//", u)]


def test_cli_names_an_unknown_study(db):
    with pytest.raises(CommandError, match="no study 'nope'"):
        call_command("report", "nope")


def test_page_shows_numbers_charts_and_linked_disagreements(client, demo_researcher, xsum_study):
    client.force_login(demo_researcher)
    response = client.get(reverse("metaeval:report", args=["xsum-factuality"]))
    assert response.status_code == 200
    html = response.content.decode()
    for text in (
        "Fleiss&#x27; kappa (items with all N ratings)",
        "0.774",
        "[0.734, 0.814]",
        "10 items without all 3 ratings left out",
        "Disagreements (118 items)",
        "FActScore",
        "F1@K",
    ):
        assert text in html, text
    assert 'style="' not in html  # CSP: no inline styles, and only the page's own script files (no inline script)
    assert re.findall(r"<script\b[^>]*>", html) == [
        '<script src="/static/js/report_index.js" defer>',
        '<script src="/static/js/scroll_cue.js" defer>',
    ]
    assert not [u for u in ASSET.findall(html) if re.match(r"^(https?:)?//", u)]
    for name in ("labels", "agreement"):
        svg = reverse("metaeval:report_chart", args=["xsum-factuality", name, "svg"])
        assert f'<img src="{svg}"' in html
        assert reverse("metaeval:report_chart", args=["xsum-factuality", name, "pdf"]) in html
    links = re.findall(r'<a href="(/studies/xsum-factuality/items/[^"]+/)">([^<]+)</a>', html)
    assert len(links) == 100  # the first page of the disagreement list; the other 18 on page 2
    url, item = links[0]
    assert url == reverse("annotation:item_detail", args=["xsum-factuality", item])
    detail = client.get(url)
    assert detail.status_code == 200 and item in detail.content.decode()


@pytest.mark.parametrize("name", ["labels", "agreement"])
def test_chart_routes_serve_svg_and_pdf(client, demo_researcher, xsum_study, name):
    client.force_login(demo_researcher)
    svg = client.get(reverse("metaeval:report_chart", args=["xsum-factuality", name, "svg"]))
    assert svg.status_code == 200 and svg["Content-Type"] == "image/svg+xml"
    body = svg.content.decode()
    assert body.lstrip().startswith("<?xml") and "<svg" in body
    assert "style=" not in body and "<style" not in body and "<script" not in body
    pdf = client.get(reverse("metaeval:report_chart", args=["xsum-factuality", name, "pdf"]))
    assert pdf.status_code == 200 and pdf["Content-Type"] == "application/pdf"
    assert pdf.content.startswith(b"%PDF-")
    assert "attachment" in pdf["Content-Disposition"]


def test_chart_is_revalidated_and_redrawn_when_the_data_changes(client, demo_researcher, xsum_study):
    client.force_login(demo_researcher)
    url = reverse("metaeval:report_chart", args=["xsum-factuality", "labels", "svg"])
    first = client.get(url)
    assert "no-cache" in first["Cache-Control"] and "private" in first["Cache-Control"]
    assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    annotation = Annotation.objects.filter(assignment__study=xsum_study, label="factual").first()
    annotation.label = "not_factual"
    annotation.save()
    second = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert second.status_code == 200 and second["ETag"] != first["ETag"]
    assert second.content != first.content  # 581 / 4983 bars now, redrawn rather than served stale


def test_preference_chart_is_404_for_a_verification_study(client, demo_researcher, xsum_study):
    client.force_login(demo_researcher)
    assert (
        client.get(reverse("metaeval:report_chart", args=["xsum-factuality", "preference", "svg"])).status_code == 404
    )
    assert client.get("/studies/xsum-factuality/report/charts/nosuch.svg").status_code == 404


@pytest.mark.parametrize("fmt,content_type", [("json", "application/json"), ("csv", "text/csv"), ("html", "text/html")])
def test_page_downloads(client, demo_researcher, xsum_study, fmt, content_type):
    client.force_login(demo_researcher)
    response = client.get(reverse("metaeval:report_download", args=["xsum-factuality", fmt]))
    assert response.status_code == 200 and response["Content-Type"].startswith(content_type)
    assert f'filename="xsum-factuality-report.{fmt}"' in response["Content-Disposition"]
    assert "0.774" in streamed_body(response).decode()


def test_study_overview_links_to_the_report(client, demo_researcher, xsum_study):
    client.force_login(demo_researcher)
    html = client.get(reverse("annotation:study_detail", args=["xsum-factuality"])).content.decode()
    assert f'href="{reverse("metaeval:report", args=["xsum-factuality"])}"' in html


def test_renaming_an_annotator_invalidates_the_agreement_chart(client, demo_researcher, xsum_study):
    client.force_login(demo_researcher)
    url = reverse("metaeval:report_chart", args=["xsum-factuality", "agreement", "svg"])
    first = client.get(url)
    StudyMember.objects.filter(study=xsum_study, pseudonym="wid_0").update(pseudonym="slot_zero")
    second = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert second.status_code == 200 and second.content != first.content
