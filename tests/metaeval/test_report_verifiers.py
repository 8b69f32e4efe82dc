"""The study report carries each verifier's agreement with the human majority."""

from __future__ import annotations

import pytest
from django.urls import reverse
from sklearn.metrics import accuracy_score, cohen_kappa_score

from annotation.models import Assignment
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.reporting.build import build_report
from metaeval.verifiers.services.prediction_import import import_predictions
from tests.conftest import jsonl, verification_item
from tests.support.streamed import streamed_json

LABELS = ["supported", "contradicted", "inconclusive"]
HUMAN = {  # item -> three human labels; the strict majority is the reference
    "c-1": ["supported", "supported", "contradicted"],
    "c-2": ["contradicted", "contradicted", "contradicted"],
    "c-3": ["supported", "inconclusive", "inconclusive"],
    "c-4": ["supported", "supported", "supported"],
}
VERIFIER = {"c-1": "supported", "c-2": "supported", "c-3": "inconclusive", "c-4": "supported"}


@pytest.fixture
def study_with_verifier(loaded_verification_study):
    study = loaded_verification_study
    import_items(study=study, stream=jsonl(verification_item("c-4")), fmt="jsonl")
    rows = [
        {"item": item, "annotator": f"h{index}", "label": label}
        for item, labels in HUMAN.items()
        for index, label in enumerate(labels)
    ]
    Assignment.objects.filter(study=study).delete()  # start from this test's human labels only
    import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl")
    import_predictions(
        study=study,
        stream=jsonl(
            *(
                {"item": item, "verifier": "llm-x", "label": label, "rationale": f"because {item}"}
                for item, label in VERIFIER.items()
            )
        ),
        fmt="jsonl",
    )
    return study


@pytest.mark.django_db
def test_report_has_the_verifier_section_matching_sklearn(study_with_verifier):
    report = build_report(study_with_verifier)
    section = report["verifiers"]["llm-x"]
    majority = {"c-1": "supported", "c-2": "contradicted", "c-3": "inconclusive", "c-4": "supported"}
    truth = [majority[item] for item in sorted(majority)]
    predicted = [VERIFIER[item] for item in sorted(majority)]
    assert section["n"] == 4
    assert section["accuracy"]["value"] == pytest.approx(accuracy_score(truth, predicted))
    assert section["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(truth, predicted, labels=LABELS))
    assert [entry["item"] for entry in section["disagreements"]] == ["c-2"]
    assert section["disagreements"][0]["rationale"] == "because c-2"


@pytest.mark.django_db
def test_report_page_and_api_show_the_verifiers(client, researcher, study_with_verifier):
    client.force_login(researcher)
    html = client.get(reverse("metaeval:report", args=[study_with_verifier.slug])).content.decode()
    assert 'id="verifiers"' in html and "llm-x" in html and "because c-2" in html
    data = streamed_json(client.get(reverse("api-study-report", args=[study_with_verifier.slug])))
    assert data["verifiers"]["llm-x"]["n"] == 4


@pytest.mark.django_db
def test_the_verifier_chart_draws_the_reports_numbers(client, researcher, study_with_verifier):
    from metaeval.reporting.charts import chart_names, verifier_rows

    section = build_report(study_with_verifier)["verifiers"]["llm-x"]
    [(name, kappa, ci, ceiling)] = verifier_rows({"llm-x": section})
    majority = {"c-1": "supported", "c-2": "contradicted", "c-3": "inconclusive", "c-4": "supported"}
    assert name == "llm-x"
    assert kappa == pytest.approx(
        cohen_kappa_score(
            [majority[i] for i in sorted(majority)], [VERIFIER[i] for i in sorted(majority)], labels=LABELS
        )
    )
    assert list(ci) == section["cohen_kappa"]["ci"] and ci[0] <= kappa <= ci[1]
    assert ceiling == section["human_ceiling"]["human"]["cohen_kappa"]["value"] and ceiling is not None

    assert chart_names(study_with_verifier)[-1] == "verifiers"
    client.force_login(researcher)
    url = reverse("metaeval:report_chart", args=[study_with_verifier.slug, "verifiers", "svg"])
    response = client.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"
    assert " style=" not in response.content.decode()  # CSP-clean like every chart
    assert url in client.get(reverse("metaeval:report", args=[study_with_verifier.slug])).content.decode()


@pytest.mark.django_db
def test_the_verifier_chart_is_redrawn_when_predictions_change(client, researcher, study_with_verifier):
    client.force_login(researcher)
    url = reverse("metaeval:report_chart", args=[study_with_verifier.slug, "verifiers", "svg"])
    etag = client.get(url)["ETag"]
    assert client.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 304
    import_predictions(
        study=study_with_verifier,
        update=True,
        stream=jsonl({"item": "c-2", "verifier": "llm-x", "label": "contradicted"}),
        fmt="jsonl",
    )
    assert client.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 200


@pytest.mark.django_db
def test_no_verifier_chart_without_verifiers(client, researcher, loaded_verification_study):
    from metaeval.reporting.charts import chart_names

    assert "verifiers" not in chart_names(loaded_verification_study)
    client.force_login(researcher)
    url = reverse("metaeval:report_chart", args=[loaded_verification_study.slug, "verifiers", "svg"])
    assert client.get(url).status_code == 404


@pytest.fixture
def study_with_single_labels(loaded_verification_study):
    """One human label per item: the verifier has a kappa but no bootstrap interval."""
    study = loaded_verification_study
    import_items(study=study, stream=jsonl(verification_item("c-4")), fmt="jsonl")
    Assignment.objects.filter(study=study).delete()
    rows = [{"item": item, "annotator": "h0", "label": labels[0]} for item, labels in HUMAN.items()]
    import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl")
    predictions = ({"item": item, "verifier": "llm-x", "label": label} for item, label in VERIFIER.items())
    import_predictions(study=study, stream=jsonl(*predictions), fmt="jsonl")
    return study


@pytest.mark.django_db
def test_a_verifier_with_a_kappa_but_no_interval_still_draws(client, researcher, study_with_single_labels):
    slug = study_with_single_labels.slug
    client.force_login(researcher)
    assert client.get(reverse("metaeval:report", args=[slug])).status_code == 200
    for ext in ("svg", "pdf"):
        response = client.get(reverse("metaeval:report_chart", args=[slug, "verifiers", ext]))
        assert response.status_code == 200, ext


def test_the_verifier_chart_takes_rows_without_an_interval():
    from metaeval import charts

    svg = charts.render(charts.verifier_figure([("llm-x", 0.4, None, None)]), "svg")
    assert svg.startswith(b"<?xml")
