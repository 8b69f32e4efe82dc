"""WiCE's claims and its GPT-4 / GPT-3.5 entailment scores (real samples, tests/data/formats/wice)."""

from __future__ import annotations

import json

import pytest

from annotation.models import Annotation, Item, Study
from annotation.studies.services import create_study
from annotation.transfer.adapters.wice import verifier_name
from annotation.transfer.forms import source_choices
from metaeval.models import Prediction
from metaeval.verifiers.forms import prediction_sources
from tests.annotation.transfer.adapters.conftest import refused, run, sample, write
from tests.datasets import TEST_DATA

CLAIMS = sample("wice", "claim_test_lines2_9_78_82.jsonl")
GPT4 = sample("wice", "oracle_chunks_claim_test.gpt-4-0613.entailment_score.json")
GPT35 = sample("wice", "oracle_chunks_claim_test.gpt-3.5-turbo-0613.entailment_score.json")
DEMO = TEST_DATA.parents[1] / "fixtures" / "wice"


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def wice(db) -> Study:
    return create_study(
        slug="wice",
        name="WiCE",
        kind="verification",
        annotators_per_item=1,
        labels=["supported", "partially_supported", "not_supported"],
    )


def test_claims_become_the_demos_items_with_wices_label_as_gold(wice):
    out = run("import_items", "wice", str(CLAIMS), "--from", "wice")
    assert "Imported 4 new" in out
    demo = {row["id"]: row for row in lines(DEMO / "items.jsonl")}
    for record in lines(CLAIMS):
        item = Item.objects.get(study=wice, external_id=record["meta"]["id"])
        expected = demo[record["meta"]["id"]]  # the demo was built from the same files (fixtures/build_demo.py)
        assert item.payload["claim"] == expected["claim"]
        assert item.payload.get("context", "") == expected["context"]
        assert [p["text"] for p in item.payload["evidence"]] == [p["text"] for p in expected["evidence"]]
        assert item.domain == "wikipedia"
        assert item.gold_label == record["label"]
    assert not Annotation.objects.filter(assignment__study=wice).exists()


def test_wices_labels_as_an_annotators(wice):
    run("import_items", "wice", str(CLAIMS), "--from", "wice", "--source-labels", "annotator")
    labels = dict(
        Annotation.objects.filter(assignment__study=wice).values_list("assignment__item__external_id", "label")
    )
    assert labels == {record["meta"]["id"]: record["label"] for record in lines(CLAIMS)}
    wice.refresh_from_db()
    assert wice.source_labels == [{"from": "wice", "as": "annotator", "annotators": ["wice_human"]}]


def test_the_gpt_score_files_become_two_verifiers_predictions(wice):
    run("import_items", "wice", str(CLAIMS), "--from", "wice")
    run("import_predictions", "wice", str(GPT4), "--from", "wice")
    run("import_predictions", "wice", str(GPT35), "--from", "wice")
    got = {
        (p.verifier.name, p.item.external_id): (p.label, p.score)
        for p in Prediction.objects.filter(verifier__study=wice).select_related("verifier", "item")
    }
    ids = {record["meta"]["id"] for record in lines(CLAIMS)}
    demo = {(row["verifier"], row["item"]): (row["label"], row["score"]) for row in lines(DEMO / "predictions.jsonl")}
    assert got == {key: value for key, value in demo.items() if key[1] in ids}
    assert len(got) == 8


def test_the_verifier_is_named_after_the_model_in_the_file_name():
    assert verifier_name(GPT35.name) == "gpt-3.5-turbo-0613"
    assert verifier_name("scores.json") == "wice"


def test_a_score_that_is_no_wice_label_is_refused(wice, tmp_path):
    run("import_items", "wice", str(CLAIMS), "--from", "wice")
    path = write(tmp_path / "x.entailment_score.json", json.dumps({"test03787": 0.7}))
    assert "claim 'test03787': the score must be 1.0, 0.5 or 0.0, got 0.7" in refused(
        "import_predictions", "wice", str(path), "--from", "wice"
    )


def test_a_label_the_study_lacks_names_the_line(db):
    create_study(slug="t", name="T", kind="verification")  # supported / contradicted / inconclusive
    message = refused("import_items", "t", str(CLAIMS), "--from", "wice")
    assert "line 1, field 'label': 'partially_supported' needs one of the study's labels partially_supported" in message
    assert Item.objects.count() == 0


def test_the_pages_and_the_api_offer_wice():
    assert ("wice", "WiCE claims JSONL / entailment_score.json predictions") in source_choices()
    assert "wice" in dict(prediction_sources())
