"""Which claims the prediction-powered estimates counted as human-labelled (issue 33): the report page's CSV,
the API (CSV and JSON Lines) and the notebook client, each counting what the report's ``ppi`` section counts;
refused to outsiders (404) and annotators (403) like every report route."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from accounts.services import issue_token
from annotation.members.services import add_members
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from metaeval.client import PPI_ITEM_COLUMNS, Claimlab
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.ppi import ITEM_COLUMNS
from tests.conftest import jsonl, verification_item
from tests.metaeval.test_report_ppi import LABELLED, _responses_study, _study

pytestmark = pytest.mark.django_db


def _researcher(study, client):
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(get_user_model().objects.get(username="boss"))


def _csv_rows(response) -> list[dict[str, str]]:
    assert response.status_code == 200, response.content
    assert response.streaming and response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode("utf-8")
    reader = csv.DictReader(io.StringIO(text))
    assert reader.fieldnames == ITEM_COLUMNS
    return list(reader)


def _assert_counts_equal_the_section(rows: list[dict], section: dict) -> None:
    """Per verifier: the claims and responses the file marks labelled / unlabelled / left out are the section's
    n and N, overall and per system, for the share (claims) and F1@K (responses)."""
    assert {row["verifier"] for row in rows} == set(section["verifiers"])
    for name, block in section["verifiers"].items():
        mine = [row for row in rows if row["verifier"] == name]
        claims = Counter(row["claim"] for row in mine)
        assert (claims["labelled"], claims["unlabelled"]) == (block["n_labelled"], block["n_unlabelled"])
        assert (block["overall"]["n"], block["overall"]["N"]) == (block["n_labelled"], block["n_unlabelled"])
        without = sum(row["claim"] == "no prediction" and row["has_reference"] in ("True", True) for row in mine)
        assert without == block["n_labelled_without_prediction"]
        responses = {row["response_id"]: row["response"] for row in mine}
        roles = Counter(responses.values())
        assert (roles["labelled"], roles["unlabelled"]) == (block["f1_at_k"]["n"], block["f1_at_k"]["N"])
        left_out = sum(count for role, count in roles.items() if role.startswith("left out"))
        assert left_out == block["n_responses_left_out"] == sum(block["f1_at_k"]["n_left_out"].values())
        for system, fit in block["by_system"].items():
            claims = Counter(row["claim"] for row in mine if row["system"] == system)
            assert (claims["labelled"], claims["unlabelled"]) == (fit["n"], fit["N"])
        for system, fit in block["f1_at_k_by_system"].items():
            roles = Counter(
                role
                for r, role in responses.items()
                if any(row["response_id"] == r and row["system"] == system for row in mine)
            )
            assert (roles["labelled"], roles["unlabelled"]) == (fit["n"], fit["N"])
        # the reference label is given exactly where an estimate used it
        for row in mine:
            used = row["claim"] == "labelled" or row["response"] == "labelled"
            assert bool(row["reference_label"]) == used, row


def test_the_page_csv_lists_the_claims_the_annotators_labelled_and_counts_as_the_section(client):
    study, truth, predicted, labelled = _study()
    _researcher(study, client)
    rows = _csv_rows(client.get(reverse("metaeval:report_ppi_items", args=[study.slug])))
    assert len(rows) == 80  # one verifier, every claim
    assert {row["item"] for row in rows if row["claim"] == "labelled"} == set(labelled)
    assert len(labelled) == LABELLED
    for row in rows:
        assert row["prediction"] == predicted[row["item"]]
        if row["claim"] == "labelled":
            assert row["reference_label"] == truth[row["item"]]
    _assert_counts_equal_the_section(rows, build_report(study)["ppi"])
    # the report page links it with the page's options
    page = client.get(reverse("metaeval:report", args=[study.slug]) + "?ppi_labelled_share=0.5").content.decode()
    link = reverse("metaeval:report_ppi_items", args=[study.slug])
    assert f'href="{link}?' in page and "ppi_labelled_share=0.5" in page.split(f'href="{link}?')[1].split('"')[0]
    assert "Which claims counted as human-labelled" in page
    halved = _csv_rows(client.get(link + "?ppi_labelled_share=0.5"))
    assert sum(row["claim"] == "labelled" for row in halved) == round(LABELLED / 2)
    _assert_counts_equal_the_section(halved, build_report(study, ReportOptions(ppi_labelled_share=0.5))["ppi"])


def test_the_api_gives_the_same_rows_as_csv_and_json_lines_with_whole_responses(client):
    study, responses = _responses_study()
    _researcher(study, client)
    url = reverse("api-study-report-ppi-items", args=[study.slug])
    for query, options in (
        ("reference=gold", ReportOptions(reference="gold")),
        ("reference=gold&ppi_labelled_share=0.5", ReportOptions(reference="gold", ppi_labelled_share=0.5)),
    ):
        section = build_report(study, options)["ppi"]
        rows = _csv_rows(client.get(f"{url}?{query}"))
        _assert_counts_equal_the_section(rows, section)
        answer = client.get(f"{url}?{query}&format=jsonl")
        assert answer["Content-Type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in b"".join(answer.streaming_content).decode().splitlines()]
        assert [list(line) for line in lines[:1]] == [ITEM_COLUMNS]
        assert [[str(v) if v is not None else "" for v in line.values()] for line in lines] == [
            list(row.values()) for row in rows
        ]
    full = {r for r, (_, pairs) in responses.items() if all(g is not None for g, _ in pairs)}
    every = _csv_rows(client.get(f"{url}?reference=gold"))
    assert {row["response_id"] for row in every if row["response"] == "labelled"} == full - {"resp-05"}
    assert {row["response"] for row in every if row["response_id"] == "resp-05"} == {
        "left out: the verifier has no label for some of its claims"
    }


def test_bad_options_are_refused_by_name_and_a_study_without_estimates_is_404(client):
    study, *_ = _study()
    _researcher(study, client)
    url = reverse("api-study-report-ppi-items", args=[study.slug])
    for query, name in (
        ("ppi_labelled_share=2", "ppi_labelled_share"),
        ("format=xlsx", "format"),
        ("reference=nonsense", "reference"),
        ("k=3", "k"),
    ):
        answer = client.get(f"{url}?{query}")
        assert answer.status_code == 400 and name in answer.content.decode(), (query, answer.content)
    page = client.get(reverse("metaeval:report_ppi_items", args=[study.slug]) + "?ppi_labelled_share=0")
    assert page.status_code == 400
    plain = create_study(slug="plain", name="plain", kind="verification", annotators_per_item=1)
    import_items(study=plain, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    _researcher(plain, client)
    answer = client.get(reverse("api-study-report-ppi-items", args=[plain.slug]))
    assert answer.status_code == 404 and "no verifier has predictions" in str(answer.json())
    assert client.get(reverse("metaeval:report_ppi_items", args=[plain.slug])).status_code == 404


ROUTES = [("metaeval:report_ppi_items", "csv page"), ("api-study-report-ppi-items", "API")]


@pytest.fixture
def guarded(db, client, make_user):
    """The seeded PPI study with a researcher, an annotator of it and an outsider."""
    study, *_ = _study()
    for name in ("owner", "helper", "outsider"):
        make_user(name)
    add_members(study=study, usernames=["owner"], role="researcher")
    add_members(study=study, usernames=["helper"], role="annotator")
    return study


@pytest.mark.parametrize(("route", "what"), ROUTES)
def test_outsiders_get_404_annotators_403_and_anonymous_users_no_file(client, guarded, route, what):
    url = reverse(route, args=[guarded.slug])
    anonymous = client.get(url)
    assert anonymous.status_code in (302, 401, 403) and not getattr(anonymous, "streaming", False)
    client.login(username="outsider", password="pw-outsider")
    assert client.get(url).status_code == 404
    client.login(username="helper", password="pw-helper")
    assert client.get(url).status_code == 403
    client.login(username="owner", password="pw-owner")
    assert client.get(url).status_code == 200
    assert client.get(reverse(route, args=["no-such-study"])).status_code == 404


def test_a_token_of_an_outsider_gets_404(client, guarded, django_user_model):
    token = issue_token(user=django_user_model.objects.get(username="outsider"))
    url = reverse("api-study-report-ppi-items", args=[guarded.slug])
    assert client.get(url, HTTP_AUTHORIZATION=f"Token {token.key}").status_code == 404


def test_the_schema_documents_the_route(client):
    schema = client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    route = schema["paths"]["/api/studies/{slug}/report/ppi-items"]["get"]
    assert route["operationId"] == "study_report_ppi_items"
    assert {p["name"] for p in route["parameters"]} >= {
        "format",
        "reference",
        "include_screened_out",
        "ppi_labelled_share",
    }
    assert {"text/csv", "application/x-ndjson"} <= set(route["responses"]["200"]["content"])
    assert "404" in route["responses"]


@pytest.mark.django_db(transaction=True)
def test_the_notebook_client_reads_the_items_as_a_data_frame(live_server, researcher):
    study, _ = _responses_study()
    add_members(study=study, usernames=[researcher.username], role="researcher")
    lab = Claimlab(live_server.url, issue_token(user=researcher, name="notebook").key)
    frame = lab.ppi_items(study.slug, reference="gold", ppi_labelled_share=0.5)
    assert PPI_ITEM_COLUMNS == ITEM_COLUMNS == list(frame.columns)
    section = build_report(study, ReportOptions(reference="gold", ppi_labelled_share=0.5))["ppi"]
    records = [{k: ("" if v is None else str(v)) for k, v in row.items()} for row in frame.to_dict("records")]
    _assert_counts_equal_the_section(records, section)
    assert frame["has_reference"].dtype == bool
    assert frame.loc[frame["claim"] == "no prediction", "prediction"].isna().all()
