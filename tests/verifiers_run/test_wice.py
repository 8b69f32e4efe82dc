"""WiCE: GPT-4's and GPT-3.5's published verdicts against WiCE's human labels on the 100 claims.

The demo study is loaded as `make run` loads it (load_demo, then
load_demo_verifiers); scikit-learn computes the numbers here, from the
fixture files, and verifier_report must give the same ones.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

from annotation.models import Annotation, Study
from annotation.studies.demo import load_demo
from metaeval.models import Prediction, Verifier
from metaeval.verifiers.report import verifier_report
from tests.datasets import TEST_DATA, read_jsonl

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
WICE_DATA = TEST_DATA / "wice"
LABELS = ["supported", "partially_supported", "not_supported"]

pytestmark = pytest.mark.django_db


@pytest.fixture
def wice_fixtures(tmp_path) -> Path:
    """The demo's definitions with only the WiCE study (the others take seconds to load and are not needed)."""
    definitions = json.loads((FIXTURES / "studies.json").read_text(encoding="utf-8"))
    (tmp_path / "studies.json").write_text(json.dumps([d for d in definitions if d["slug"] == "wice"]))
    shutil.copytree(FIXTURES / "wice", tmp_path / "wice")
    return tmp_path


@pytest.fixture
def wice(wice_fixtures) -> Study:
    load_demo(directory=wice_fixtures)
    call_command("load_demo_verifiers", "--fixtures", str(wice_fixtures), stdout=io.StringIO())
    return Study.objects.get(slug="wice")


def fixture_labels(name: str, key: str) -> dict[str, str]:
    rows = [json.loads(line) for line in (FIXTURES / "wice" / name).open(encoding="utf-8")]
    return {row["item"]: row["label"] for row in rows if key in (row.get("annotator"), row.get("verifier"))}


def test_gpt4_against_wice_humans_matches_scikit_learn(wice):
    human = fixture_labels("annotations.jsonl", "wice_human")
    report = verifier_report(wice)
    for model, kappa, balanced in (("gpt-4-0613", 0.433, 0.816), ("gpt-3.5-turbo-0613", 0.097, 0.667)):
        predicted = fixture_labels("predictions.jsonl", model)
        assert len(predicted) == len(human) == 100
        y_true = [human[item] for item in sorted(human)]
        y_pred = [predicted[item] for item in sorted(human)]
        expected_kappa = cohen_kappa_score(y_true, y_pred, labels=LABELS)
        expected_balanced = balanced_accuracy_score(y_true, y_pred)
        assert round(expected_kappa, 3) == kappa and round(expected_balanced, 3) == balanced
        section = report[model]
        assert section["n"] == 100 and section["coverage"]["value"] == 1.0
        assert section["cohen_kappa"]["value"] == pytest.approx(expected_kappa, abs=1e-12)
        assert section["balanced_accuracy"]["value"] == pytest.approx(expected_balanced, abs=1e-12)
        assert section["kind"] == "imported" and section["parse_failure_rate"]["value"] == 0.0
    assert report["gpt-4-0613"]["accuracy"]["value"] == pytest.approx(0.69)
    assert report["gpt-4-0613"]["n_disagreements"] == 31
    rationale = report["gpt-4-0613"]["disagreements"][0]["rationale"]
    assert rationale.startswith("Sentence ")  # GPT-4's own explanation, from WiCE's raw outputs
    assert report["gpt-4-0613"]["confusion"]["matrix"] == [[18, 4, 0], [19, 46, 8], [0, 0, 5]]


def test_the_baselines_sit_beside_the_models(wice):
    report = verifier_report(wice, n_resamples=0)
    assert set(report) == {"gpt-4-0613", "gpt-3.5-turbo-0613", "baseline-majority", "baseline-overlap"}
    majority = report["baseline-majority"]
    assert majority["accuracy"]["value"] == pytest.approx(0.73)  # 73 of the 100 claims are partially supported
    assert majority["balanced_accuracy"]["value"] == pytest.approx(1 / 3)
    assert report["baseline-overlap"]["n"] == 100
    assert report["gpt-4-0613"]["cohen_kappa"]["value"] > majority["cohen_kappa"]["value"]
    one_annotator = report["gpt-4-0613"]["human_ceiling"]["reason"]
    assert "at least two human labels" in one_annotator  # WiCE released one aggregated label per claim


def test_wice_humans_are_an_annotation_not_gold_and_loading_twice_changes_nothing(wice, wice_fixtures):
    labels = Annotation.objects.filter(assignment__study=wice)
    assert labels.count() == 100 and not wice.items.exclude(gold_label="").exists()
    assert set(labels.values_list("assignment__annotator__study_memberships__pseudonym", flat=True)) == {"wice_human"}
    before = Prediction.objects.filter(verifier__study=wice).count()
    out = io.StringIO()
    call_command("load_demo_verifiers", "--fixtures", str(wice_fixtures), stdout=out)
    assert "wice: verifiers already loaded" in out.getvalue()
    assert Prediction.objects.filter(verifier__study=wice).count() == before == 400
    assert Verifier.objects.filter(study=wice).count() == 4


def test_the_fixture_keeps_wices_own_labels_and_scores():
    """The shipped files against WiCE's own labels and GPT-4 scores (tests/data/wice)."""
    items = [json.loads(line) for line in (FIXTURES / "wice" / "items.jsonl").open(encoding="utf-8")]
    assert len(items) == 100 and all(item["evidence"] for item in items)
    assert "CC BY-SA 4.0" in (FIXTURES / "wice" / "LICENSE.md").read_text()
    source = {record["meta"]["id"]: record for record in read_jsonl(WICE_DATA / "claim_test.jsonl.gz")}
    human = fixture_labels("annotations.jsonl", "wice_human")
    assert all(human[item] == source[item]["label"] for item in human)
    scores = json.loads((WICE_DATA / "oracle_chunks_claim_test.gpt-4-0613.entailment_score.json").read_text())
    by_score = {1.0: "supported", 0.5: "partially_supported", 0.0: "not_supported"}
    assert fixture_labels("predictions.jsonl", "gpt-4-0613") == {
        item: by_score[score] for item, score in scores.items()
    }


def test_the_demo_report_of_a_single_annotator_study_renders(client, wice):
    """WiCE has one human label per claim: agreement is undefined (said so), the rest of the report stands."""
    from django.contrib.auth import get_user_model
    from django.urls import reverse

    from metaeval.reporting.build import build_report

    report = build_report(wice)
    assert report["agreement"]["fleiss_kappa"]["value"] is None and report["agreement"]["fleiss_kappa"]["reason"]
    assert report["agreement"]["fleiss_kappa"]["ci"] is None
    assert {"gpt-4-0613", "gpt-3.5-turbo-0613", "baseline-majority", "baseline-overlap"} == set(report["verifiers"])
    client.force_login(get_user_model().objects.get(username="researcher"))
    assert client.get(reverse("metaeval:report", args=["wice"])).status_code == 200
    chart = client.get(reverse("metaeval:report_chart", args=["wice", "verifiers", "svg"]))
    assert chart.status_code == 200 and chart["Content-Type"] == "image/svg+xml"
