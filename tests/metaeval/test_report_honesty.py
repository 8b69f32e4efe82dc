"""Reports that do not mislead: p-values, small-sample warnings, why items were left out."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Annotation
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.csv_format import CSV_COLUMNS, report_csv
from metaeval.reporting.html_format import report_html
from metaeval.reporting.present import SMALL_N, Row, agreement_rows, small_n_warning
from metaeval.templatetags.report_format import ci, format_p
from tests.conftest import jsonl, verification_item
from tests.metaeval.conftest import FIXTURES


def test_p_values_below_the_fourth_decimal_print_as_a_bound():
    assert format_p(3e-9) == "< 0.0001" and format_p(0.0) == "< 0.0001"
    assert format_p(0.0001) == "0.0001" and format_p(0.04567) == "0.0457"
    assert format_p(None) == "—" and format_p(float("nan")) == "—"


def test_small_n_warning_only_for_intervals_on_fewer_than_30_items():
    assert SMALL_N == 30
    assert small_n_warning(2, True) == "only 2 items (fewer than 30): the interval is unreliable"
    assert small_n_warning(29, True) and not small_n_warning(30, True)
    assert not small_n_warning(2, False) and not small_n_warning(None, True)
    shown = str(ci(Row(name="k", value=-0.36, ci_low=-0.5, ci_high=-0.36, n=2)))
    assert shown.startswith("[-0.500, -0.360]") and "⚠ 2 items" in shown and 'class="ci-warn"' in shown
    assert str(ci(Row(name="k", value=0.5, ci_low=0.4, ci_high=0.6, n=30))) == "[0.400, 0.600]"
    assert "⚠ 5 items" in str(ci({"value": 0.1, "ci": [0.0, 0.2], "n_items": 5}))


@pytest.mark.django_db
def test_binary_note_counts_each_reason_an_item_was_left_out(report, frame):
    """Ties are dropped by the binary collapse: the note says so, per cause, not "lack all 3 ratings"."""
    ties = frame.loc[frame["label"] == "tie"].groupby("item").size()
    causes = report["binary"]["fleiss_kappa"]["left_out_causes"]
    assert causes["lost_dropped"] == len(ties) and causes["fewer_given"] == 0 and causes["dropped_labels"] == ["tie"]
    assert report["binary"]["fleiss_kappa"]["n_items_left_out"] == len(ties) - _all_tie_items(frame)
    fleiss = agreement_rows(report["binary"])[0]
    assert "had a tie label dropped" in fleiss.note and f"{len(ties)}" in fleiss.note
    full = report["agreement"]["fleiss_kappa"]["left_out_causes"]
    assert full == {"fewer_given": 0, "lost_dropped": 0, "more_given": 0, "dropped_labels": []}


def _all_tie_items(labels) -> int:
    """Items whose every label is a tie vanish from the binary table (not counted as left out)."""
    by_item = labels.groupby("item")["label"].agg(lambda given: set(given) == {"tie"})
    return int(by_item.sum())


@pytest.mark.django_db
def test_small_sample_warning_on_page_document_and_csv(client, researcher, study):
    """Per domain there are 30 items: no warning; after cutting a domain to 10 labelled items, one."""
    Annotation.objects.filter(
        assignment__study=study, assignment__item__external_id__in=[f"p-{n}" for n in range(10, 30)]
    ).delete()
    cut = build_report(study, ReportOptions(by_domain=True, binary=True))
    assert cut["by_domain"]["biography"]["n_items"] == 10
    client.force_login(researcher)
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert "⚠ 10 items" in page and "fewer than 30 items" in page
    document = report_html(study, cut)
    assert "⚠ 10 items" in document
    rows = list(csv.DictReader(io.StringIO(report_csv(cut))))
    assert list(rows[0]) == CSV_COLUMNS and CSV_COLUMNS[-1] == "warning"
    biography = [row for row in rows if row["scope"] == "domain:biography" and row["statistic"] == "fleiss_kappa"]
    assert biography[0]["warning"] == small_n_warning(10, True)
    whole = [row for row in rows if row["section"] == "agreement" and row["statistic"] == "fleiss_kappa"]
    assert whole[0]["warning"] == ""  # 40 items


@pytest.mark.django_db
def test_p_values_on_the_page_never_read_zero(client, researcher, study):
    """Every judgement for veriscore: the sign test's p is about 1e-54, shown as a bound, not 0.0000."""
    Annotation.objects.filter(assignment__study=study).update(
        label="a_strong", preferred_system="veriscore", strength="strong"
    )
    assert build_report(study)["preference"]["sign_test"]["p_value"] < 1e-50
    client.force_login(researcher)
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert "0.0000" not in page and "&lt; 0.0001" in page


@pytest.mark.django_db
def test_one_label_per_item_collapses_the_agreement_sections_saying_why(client, researcher):
    """A verifier-vs-reference study (one label per item, like the WiCE demo): one line, not rows of dashes."""
    one = create_study(slug="one", name="One reference", kind="verification", annotators_per_item=1)
    add_members(study=one, usernames=[researcher.username], role="researcher")
    import_items(study=one, stream=jsonl(*(verification_item(f"c-{n}") for n in range(5))), fmt="jsonl")
    labels = ({"item": f"c-{n}", "annotator": "ref", "label": "supported"} for n in range(5))
    import_annotations(study=one, stream=jsonl(*labels), fmt="jsonl")
    client.force_login(researcher)
    page = client.get(reverse("metaeval:report", args=[one.slug])).content.decode()
    assert 'id="agreement-collapsed"' in page
    assert "no item has labels from two annotators (1 annotator per item, 5 labels)" in page
    for gone in ('id="pairs"', 'id="ceiling"', 'id="disagreements"', 'id="domains"'):
        assert gone not in page, gone
    assert 'id="labels"' in page  # the label distribution still says something
    document = report_html(one, build_report(one))
    assert "no item has labels from two annotators" in document and 'id="pairs"' not in document


@pytest.mark.django_db
def test_agreement_sections_stay_when_items_have_two_labels(client, researcher, study):
    client.force_login(researcher)
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'id="agreement-collapsed"' not in page and 'id="pairs"' in page and 'id="disagreements"' in page


def test_the_wice_demo_asks_for_one_annotator_per_item():
    definitions = {entry["slug"]: entry for entry in json.loads((FIXTURES / "studies.json").read_text())}
    assert definitions["wice"]["annotators_per_item"] == 1
