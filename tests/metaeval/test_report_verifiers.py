"""The study report carries each verifier's agreement with the human majority."""

from __future__ import annotations

import pytest
from django.urls import reverse
from sklearn.metrics import accuracy_score, cohen_kappa_score

from annotation.models import Assignment
from annotation.services import import_annotations, import_items
from metaeval.reporting.build import build_report
from metaeval.services.prediction_import import import_predictions
from tests.conftest import jsonl, verification_item

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
        stream=jsonl(*({"item": item, "verifier": "llm-x", "label": label, "rationale": f"because {item}"} for item, label in VERIFIER.items())),
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
    data = client.get(reverse("api-study-report", args=[study_with_verifier.slug])).json()
    assert data["verifiers"]["llm-x"]["n"] == 4
