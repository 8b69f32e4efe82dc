"""FActScore's labelled data and scorer output (real labelled lines, tests/data/formats/factscore)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from annotation.models import Annotation, Item, Study
from annotation.studies.services import create_study
from metaeval import stats
from metaeval.models import Prediction
from metaeval.reporting.build import build_report
from metaeval.reporting.options import ReportOptions
from tests.annotation.transfer.adapters.conftest import jsonl_text, refused, run, sample, stored, write

LABELLED = sample("factscore", "factscore_labeled_ChatGPT_lines1-3_107.jsonl")
OPTIONS = ReportOptions(n_resamples=50)


def labelled_records() -> list[dict]:
    return [json.loads(line) for line in LABELLED.read_text().splitlines() if line.strip()]


def human_facts(record: dict) -> list[dict]:
    return [fact for sentence in record["annotations"] for fact in (sentence["human-atomic-facts"] or [])]


def factscore_own() -> tuple[float, float]:
    """FActScore's human score on the file, its way: per responding bio S / all facts, then the mean."""
    records = labelled_records()
    scores = [np.mean([fact["label"] == "S" for fact in human_facts(r)]) for r in records if r["annotations"]]
    return float(np.mean(scores)), len(scores) / len(records)


@pytest.fixture
def study(db) -> Study:
    return create_study(
        slug="fs",
        name="FActScore",
        kind="verification",
        annotators_per_item=1,
        labels=["S", "NS", "IR"],
        binary_map={"S": "positive", "NS": "negative", "IR": "negative"},
    )


def test_labelled_data_becomes_items_with_gold_labels_and_an_abstention_by_default(study):
    """Issue 29, finding 3: the human S/NS/IR are the items' gold labels, and no annotation takes the one slot."""
    out = run("import_items", "fs", str(LABELLED), "--from", "factscore", "--systems", "ChatGPT")
    records = labelled_records()
    n_facts = sum(len(human_facts(r)) for r in records if r["annotations"])
    assert f"Imported {n_facts} new and 0 updated item(s)" in out
    assert f"{n_facts} label(s) by factscore-human are gold / reference only, not annotations" in out
    assert f"{n_facts} item(s) got their gold label from them" in out
    assert "1 abstained response(s) recorded" in out
    assert not Annotation.objects.filter(assignment__study=study).exists()
    first = Item.objects.get(study=study, external_id="ChatGPT:Lanny-Flaherty:1:1.1")
    assert first.payload["claim"] == records[0]["annotations"][0]["human-atomic-facts"][0]["text"]
    assert (first.domain, first.system, first.slots_taken) == ("very rare", "ChatGPT", 0)
    facts = [fact["label"] for r in records if r["annotations"] for fact in human_facts(r)]
    assert sorted(Item.objects.filter(study=study).values_list("gold_label", flat=True)) == sorted(facts)
    study.refresh_from_db()
    assert study.source_labels == [{"from": "factscore", "as": "gold", "annotators": ["factscore-human"]}]


def test_labelled_data_becomes_items_labels_and_an_abstention_as_an_annotators(study):
    out = run(
        "import_items",
        "fs",
        str(LABELLED),
        "--from",
        "factscore",
        "--systems",
        "ChatGPT",
        "--source-labels",
        "annotator",
    )
    records = labelled_records()
    n_facts = sum(len(human_facts(r)) for r in records if r["annotations"])
    assert f"Imported {n_facts} new and 0 updated item(s)" in out
    assert f"{n_facts} new and 0 updated annotation(s) from the same file" in out
    assert "1 abstained response(s) recorded" in out
    study.refresh_from_db()
    assert [entry["system"] for entry in study.abstained_responses] == ["ChatGPT"]
    first = Item.objects.get(study=study, external_id="ChatGPT:Lanny-Flaherty:1:1.1")
    assert first.payload["claim"] == records[0]["annotations"][0]["human-atomic-facts"][0]["text"]
    assert first.payload["context"] == records[0]["annotations"][0]["text"]
    assert (first.domain, first.system, first.gold_label) == ("very rare", "ChatGPT", "")
    labels = Annotation.objects.filter(assignment__study=study).values_list("label", flat=True)
    assert sorted(set(labels)) == ["IR", "NS", "S"]
    assert study.source_labels == [{"from": "factscore", "as": "annotator", "annotators": ["factscore-human"]}]


@pytest.mark.parametrize(("source_labels", "scored_as"), [(None, "gold"), ("annotator", "human")])
def test_the_reports_factscore_equals_factscores_own_on_the_labelled_data(study, source_labels, scored_as):
    extra = ["--source-labels", source_labels] if source_labels else []
    run("import_items", "fs", str(LABELLED), "--from", "factscore", "--systems", "ChatGPT", *extra)
    expected, respond_ratio = factscore_own()
    study.refresh_from_db()
    scored = build_report(study, OPTIONS)["scores"][scored_as]["factscore"]["per_system"]["ChatGPT"]
    assert scored["factscore"]["value"] == pytest.approx(expected, abs=5e-4)
    assert scored["share_answered"] == pytest.approx(respond_ratio) == 0.75
    assert (scored["n_responses"], scored["n_answered"]) == (4, 3)


def scorer_output(records: list[dict], first_atoms: int | None = None) -> dict:
    """FActScore's scorer output as factscorer.py writes it, on the human facts (the same facts);
    `first_atoms` cuts the first answered bio to that many atoms (a short response)."""
    decisions = [
        None
        if r["annotations"] is None
        else [{"atom": f["text"], "is_supported": f["label"] == "S"} for f in human_facts(r)]
        for r in records
    ]
    if first_atoms is not None:
        first, kept = next((n, decision) for n, decision in enumerate(decisions) if decision is not None)
        decisions[first] = kept[:first_atoms]
    # factscorer.get_score with its default gamma = 10, as FActScore computes it.
    answered = [decision for decision in decisions if decision is not None]
    init_scores = [np.mean([d["is_supported"] for d in decision]) for decision in answered]
    gamma = 10
    scores = [
        score * (np.exp(1 - gamma / len(decision)) if len(decision) < gamma else 1.0)
        for score, decision in zip(init_scores, answered, strict=True)
    ]
    return {
        "score": float(np.mean(scores)),
        "respond_ratio": len(scores) / len(decisions),
        "decisions": decisions,
        "num_facts_per_response": float(np.mean([len(d) for d in answered])),
        "init_score": float(np.mean(init_scores)),
    }


def test_scorer_output_becomes_predictions_whose_factscore_is_the_files(study, tmp_path):
    run("import_items", "fs", str(LABELLED), "--from", "factscore", "--systems", "ChatGPT")
    output = scorer_output(labelled_records())
    path = write(tmp_path / "ChatGPT_factscore_output.json", json.dumps(output) + "\n")
    out = run("import_predictions", "fs", str(path), "--from", "factscore", "--verifier", "factscore-retrieval+ChatGPT")
    assert "Imported 98 new and 0 updated prediction(s)" in out
    rows = pd.DataFrame(
        Prediction.objects.values_list("item__response_id", "item__system", "label"),
        columns=["response_id", "system", "label"],
    )
    study.refresh_from_db()
    responses = pd.concat(
        [
            rows.drop_duplicates("response_id")[["response_id", "system"]].assign(answered=True),
            pd.DataFrame(study.abstained_responses)[["response_id", "system"]].assign(answered=False),
        ]
    )
    result = stats.factscore(rows, supported={"S"}, unsupported={"NS"}, responses=responses)
    assert result["per_system"]["ChatGPT"]["factscore"]["value"] == pytest.approx(output["init_score"])
    assert result["per_system"]["ChatGPT"]["share_answered"] == pytest.approx(output["respond_ratio"])
    report = build_report(study, OPTIONS)
    # The report's factuality scores from this verifier are FActScore's own numbers, both of them.
    from_verifier = report["scores"]["verifiers"]["factscore-retrieval+ChatGPT"]["factscore"]["per_system"]["ChatGPT"]
    assert from_verifier["factscore"]["value"] == pytest.approx(output["init_score"])
    assert from_verifier["factscore_length_penalised"]["value"] == pytest.approx(output["score"])
    verifier = report["verifiers"]["factscore-retrieval+ChatGPT"]
    # The scorer is binary: its False on the 18 IR facts disagrees with the humans' IR, nothing else does.
    n_ir = sum(f["label"] == "IR" for r in labelled_records() if r["annotations"] for f in human_facts(r))
    assert (verifier["n"], verifier["n_disagreements"], n_ir) == (98, 18, 18)
    assert verifier["accuracy"]["value"] == pytest.approx(80 / 98)


def test_the_length_penalised_factscore_is_the_files_score_for_a_short_response(study, tmp_path):
    """A bio with 4 atoms is penalised exp(1 - 10/4), as FActScore does by default (gamma = 10)."""
    run("import_items", "fs", str(LABELLED), "--from", "factscore", "--systems", "ChatGPT")
    output = scorer_output(labelled_records(), first_atoms=4)
    assert output["score"] != pytest.approx(output["init_score"])
    path = write(tmp_path / "ChatGPT_factscore_output.json", json.dumps(output) + "\n")
    run("import_predictions", "fs", str(path), "--from", "factscore", "--verifier", "short")
    study.refresh_from_db()
    scores = build_report(study, OPTIONS)["scores"]["verifiers"]["short"]["factscore"]["per_system"]["ChatGPT"]
    assert scores["factscore"]["value"] == pytest.approx(output["init_score"])
    assert scores["factscore_length_penalised"]["value"] == pytest.approx(output["score"])
    assert scores["length_penalty_gamma"] == 10


def test_scorer_atoms_that_are_no_item_are_refused(study, tmp_path):
    run("import_items", "fs", str(LABELLED), "--from", "factscore", "--systems", "ChatGPT")
    output = {"score": 0.5, "respond_ratio": 1.0, "decisions": [[{"atom": "Nobody wrote this.", "is_supported": True}]]}
    path = write(tmp_path / "out.json", json.dumps(output))
    message = refused("import_predictions", "fs", str(path), "--from", "factscore")
    assert "file: decision 1: none of its 1 atoms is the claim of an item of this study" in message
    assert not Prediction.objects.exists()


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ('{"score": 0.5, "decisions": [', "line 1: invalid JSON: Expecting value at column 30"),
        ("[1, 2]", "file: expected FActScore's scorer output, an object with a 'decisions' array; found array"),
        ('{"score": 0.5}', "found an object without a 'decisions' array"),
        (
            '{"decisions": [[{"atom": "x", "is_supported": "yes"}]]}',
            "file, field 'decisions[0][0].is_supported': decision 1: must be true or false, got string",
        ),
        ('{"decisions": [5]}', "file, field 'decisions[0]': decision 1: must be an array of atoms or null, got number"),
    ],
)
def test_malformed_scorer_output(study, tmp_path, output, expected):
    path = write(tmp_path / "out.json", output)
    assert expected in refused("import_predictions", "fs", str(path), "--from", "factscore")
    assert stored(study) == (0, 0, 0)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda r: r.pop("annotations"),
            "line 1, field 'annotations': is missing: FActScore's labelled data has one per line",
        ),
        (lambda r: r.pop("topic"), "line 1, field 'topic': is missing"),
        (
            lambda r: r["annotations"][0]["human-atomic-facts"][0].update(label="X"),
            "line 1, field 'annotations[0].human-atomic-facts[0].label': label must be one of S, NS, IR, got 'X'",
        ),
        (
            lambda r: r.update(annotations="none"),
            "line 1, field 'annotations': must be an array of sentences or null, got string",
        ),
    ],
)
def test_malformed_labelled_lines_name_the_line_and_store_nothing(study, tmp_path, mutate, expected):
    records = labelled_records()
    mutate(records[0])
    path = write(tmp_path / "ChatGPT.jsonl", jsonl_text(*records))
    assert expected in refused("import_items", "fs", str(path), "--from", "factscore")
    assert stored(study) == (0, 0, 0)
    assert Study.objects.get(pk=study.pk).abstained_responses == []


def test_a_truncated_labelled_file_names_its_last_line(study, tmp_path):
    text = LABELLED.read_text()
    path = write(tmp_path / "ChatGPT.jsonl", text[: len(text) - 200])
    assert "line 4: invalid JSON: Unterminated string" in refused(
        "import_items", "fs", str(path), "--from", "factscore"
    )
    assert stored(study) == (0, 0, 0)


def test_a_study_without_the_labels_gets_the_services_error_at_the_source_line(db):
    create_study(slug="tern", name="Ternary", kind="verification")
    message = refused("import_items", "tern", str(LABELLED), "--from", "factscore")
    # S maps to 'supported'; NS has no label in a ternary study, and is reported where it is in the file.
    assert (
        "line 1, field 'label': sentence 1, fact 3 ('Lanny Flaherty was born on December 18, 1949.'): "
        "the label, made the item's gold label (source_labels=gold): "
        "'NS' is not one of the study's labels (supported, contradicted, inconclusive)"
    ) in message
    assert Item.objects.count() == 0
    message = refused("import_items", "tern", str(LABELLED), "--from", "factscore", "--source-labels", "annotator")
    assert (
        "line 1, field 'label': sentence 1, fact 3 ('Lanny Flaherty was born on December 18, 1949.'): "
        "'NS' is not one of the study's labels (supported, contradicted, inconclusive)"
    ) in message
    assert Item.objects.count() == 0
