"""VeriScore's claims / evidence / verification files (real samples, tests/data/formats/veriscore)."""

from __future__ import annotations

import json

import pytest

from annotation.models import Item, Study
from annotation.studies.services import create_study
from annotation.transfer.adapters.veriscore import response_key, source_type
from metaeval.models import Prediction
from metaeval.reporting.build import build_report
from metaeval.reporting.options import ReportOptions
from tests.annotation.transfer.adapters.conftest import jsonl_text, refused, run, sample, stored, write

EARLY = sample("veriscore", "veriscore_claims_early_7067724.jsonl")
BASELINE = sample("veriscore", "claims_sentence_baseline.jsonl")


@pytest.fixture
def excerpt(tmp_path):
    """The verification excerpt (one record, indented in the sample) as the JSONL line VeriScore writes."""
    record = json.loads(sample("veriscore", "veriscore_verification_excerpt.json").read_text())
    return write(tmp_path / "verification_data_sample_3.jsonl", json.dumps(record) + "\n"), record


def early_records() -> list[dict]:
    return [json.loads(line) for line in EARLY.read_text().splitlines() if line.strip()]


def test_two_extractors_become_a_preference_study_in_one_command(db):
    study = create_study(slug="pref", name="Extractors", kind="preference")
    out = run(
        "import_items",
        "pref",
        str(EARLY),
        "--from",
        "veriscore",
        "--pair",
        str(BASELINE),
        "--systems",
        "veriscore,sentences",
    )
    assert "Imported 2 new" in out
    study.refresh_from_db()
    assert study.systems == ["veriscore", "sentences"]
    records = early_records()
    item = Item.objects.get(study=study, external_id=response_key(records[1]["question"], records[1]["response"]))
    assert item.payload["source"] == records[1]["response"]
    assert item.payload["question"] == records[1]["question"]
    assert item.domain == "ShareGPT"
    assert item.payload["lists"]["veriscore"] == records[1]["all_facts_lst"]
    assert len(item.payload["lists"]["sentences"]) == 6


def test_system_names_default_to_the_file_names(db):
    study = create_study(slug="pref", name="Extractors", kind="preference")
    run("import_items", "pref", str(EARLY), "--from", "veriscore", "--pair", str(BASELINE))
    study.refresh_from_db()
    assert study.systems == ["veriscore_claims_early_7067724", "sentence_baseline"]


def test_a_preference_study_needs_the_second_file(db):
    study = create_study(slug="pref", name="Extractors", kind="preference")
    message = refused("import_items", "pref", str(EARLY), "--from", "veriscore")
    assert "file: a preference study compares two extractors: give the second extractor's claims file" in message
    assert stored(study) == (0, 0, 0)


def test_an_unmatched_response_names_its_line_and_nothing_is_stored(db, tmp_path):
    study = create_study(slug="pref", name="Extractors", kind="preference")
    records = early_records()
    other = write(
        tmp_path / "claims_other.jsonl", jsonl_text({**records[0], "response": "Something else."}, records[1])
    )
    message = refused("import_items", "pref", str(EARLY), "--from", "veriscore", "--pair", str(other))
    assert "line 1: no response with the same question and text in claims_other.jsonl" in message
    assert stored(study) == (0, 0, 0)


def test_claims_become_verification_items_with_the_response_as_context(db):
    study = create_study(slug="verif", name="Claims", kind="verification")
    out = run("import_items", "verif", str(EARLY), "--from", "veriscore")
    records = early_records()
    assert f"Imported {len(records[0]['all_facts_lst']) + len(records[1]['all_facts_lst'])} new" in out
    key = response_key(records[1]["question"], records[1]["response"])
    item = Item.objects.get(study=study, external_id=f"{key}-1")
    assert item.payload["claim"] == records[1]["all_facts_lst"][0]
    assert item.payload["context"] == records[1]["response"]
    assert (item.domain, item.response_id, item.system) == ("ShareGPT", key, "allenai/OLMo-7B-Instruct")


def test_evidence_and_verification_become_passages_and_predictions(db, excerpt):
    path, record = excerpt
    study = create_study(slug="verif", name="Claims", kind="verification")
    run("import_items", "verif", str(path), "--from", "veriscore")
    key = response_key(record["question"], record["response"])
    first = Item.objects.get(study=study, external_id=f"{key}-1")
    hit = record["claim_search_results"][record["all_claim_lst"][0]][0]
    assert first.payload["evidence"][0] == {
        "text": hit["snippet"],
        "title": hit["title"],
        "url": hit["link"],
        "source_type": "web",
    }
    assert Item.objects.filter(study=study).count() == len(record["all_claim_lst"])
    out = run("import_predictions", "verif", str(path), "--from", "veriscore")
    assert "Imported 3 new and 0 updated prediction(s)" in out
    predictions = {p.item.external_id: p for p in Prediction.objects.select_related("item")}
    assert predictions[f"{key}-1"].label == "supported"
    assert predictions[f"{key}-1"].verifier.name == "veriscore"
    # 'unsupported' (binary) is not a label of the ternary study: kept, as unparseable.
    unsupported = predictions[
        f"{key}-{record['all_claim_lst'].index(record['claim_verification_result'][2]['claim']) + 1}"
    ]
    assert (unsupported.label, unsupported.raw_label, unsupported.parse_status) == (None, "unsupported", "unparseable")


def test_binary_labels_map_to_a_binary_study(db, excerpt):
    path, _record = excerpt
    create_study(
        slug="bin",
        name="Binary",
        kind="verification",
        labels=["supported", "unsupported"],
        binary_map={"supported": "positive", "unsupported": "negative"},
    )
    run("import_items", "bin", str(path), "--from", "veriscore")
    run("import_predictions", "bin", str(path), "--from", "veriscore", "--verifier", "gpt-4-veriscore")
    assert sorted(Prediction.objects.values_list("label", flat=True)) == ["supported", "supported", "unsupported"]


def test_free_text_and_null_verdicts_are_kept_as_unparseable(db, excerpt, tmp_path):
    path, record = excerpt
    study = create_study(slug="verif", name="Claims", kind="verification")
    run("import_items", "verif", str(path), "--from", "veriscore")
    results = record["claim_verification_result"]
    record = {
        **record,
        "claim_verification_result": [
            {**results[0], "verification_result": "the claim is partly true"},
            {**results[1], "verification_result": None},
        ],
    }
    odd = write(tmp_path / "verification_x_3.jsonl", json.dumps(record) + "\n")
    run("import_predictions", "verif", str(odd), "--from", "veriscore")
    rows = sorted(Prediction.objects.values_list("raw_label", "parse_status", "label"))
    assert rows == [("", "unparseable", None), ("the claim is partly true", "unparseable", None)]
    assert study.items.count() == 25


def test_predictions_before_items_fail_with_the_source_line(db, excerpt):
    path, _ = excerpt
    study = create_study(slug="verif", name="Claims", kind="verification")
    message = refused("import_predictions", "verif", str(path), "--from", "veriscore")
    assert "line 1, field 'item': claim 1 ('Fluctuations in hormones such as estrogen" in message
    assert "'): no item 'r-b37224b0ce27e639-1' in study 'verif'; import the items first" in message
    assert stored(study) == (0, 0, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"question": "q", "response": "r"\n', "line 1: invalid JSON: Expecting ',' delimiter at column 34"),
        ("[1, 2]\n", "line 1: expected a JSON object per record of the array, got number"),
        (jsonl_text({"question": "q", "model": "m"}), "line 1, field 'response': is missing"),
        (
            jsonl_text({"response": "r", "all_claims": "one claim"}),
            "line 1, field 'all_claims': must be an array of claims, got string",
        ),
        (jsonl_text({"response": "r", "model": "m"}), "line 1: has no claims: expected one of all_claims"),
    ],
)
def test_malformed_claims_files(db, tmp_path, text, expected):
    study = create_study(slug="verif", name="Claims", kind="verification")
    path = write(tmp_path / "claims_bad.jsonl", text)
    assert expected in refused("import_items", "verif", str(path), "--from", "veriscore")
    assert stored(study) == (0, 0, 0)


def test_a_verification_file_without_results_is_refused(db):
    create_study(slug="verif", name="Claims", kind="verification")
    run("import_items", "verif", str(EARLY), "--from", "veriscore")
    message = refused("import_predictions", "verif", str(EARLY), "--from", "veriscore")
    assert "line 1, field 'claim_verification_result': is missing: a verification file" in message
    assert not Prediction.objects.exists()


def test_abstained_responses_are_recorded_on_the_study(db, tmp_path):
    study = create_study(slug="verif", name="Claims", kind="verification")
    records = early_records()
    abstained = {
        "question": "q?",
        "response": "I'm sorry, I can't answer.",
        "abstained": True,
        "prompt_source": "ShareGPT",
        "model": "m",
    }
    path = write(tmp_path / "claims_x.jsonl", jsonl_text(records[1], abstained))
    out = run("import_items", "verif", str(path), "--from", "veriscore")
    assert "1 abstained response(s) recorded" in out
    study = Study.objects.get(pk=study.pk)
    assert study.abstained_responses == [
        {"response_id": response_key("q?", abstained["response"]), "system": "m", "domain": "ShareGPT"}
    ]


def test_source_types_from_the_link_domain():
    assert source_type("https://en.wikipedia.org/wiki/X") == "wiki"
    assert source_type("https://www.cdc.gov/x") == "government"
    assert source_type("https://my.clevelandclinic.org/health") == "web"
    assert source_type("not a url") == ""


def test_verification_predictions_are_compared_with_human_labels_in_the_report(db, excerpt, tmp_path):
    path, record = excerpt
    study = create_study(slug="verif", name="Claims", kind="verification", annotators_per_item=2)
    run("import_items", "verif", str(path), "--from", "veriscore")
    key = response_key(record["question"], record["response"])
    humans = [
        {"item": f"{key}-{record['all_claim_lst'].index(result['claim']) + 1}", "annotator": who, "label": label}
        for result, labels in zip(
            record["claim_verification_result"],
            (("supported", "supported"), ("supported", "inconclusive"), ("contradicted", "contradicted")),
            strict=True,
        )
        for who, label in zip(("h1", "h2"), labels, strict=True)
    ]
    run("import_annotations", "verif", str(write(tmp_path / "humans.jsonl", jsonl_text(*humans))))
    run("import_predictions", "verif", str(path), "--from", "veriscore")
    verifier = build_report(study, ReportOptions(n_resamples=50))["verifiers"]["veriscore"]
    # Three predictions: two 'supported', one binary 'unsupported' kept as unparseable; humans agree on two claims.
    assert (verifier["n_predictions"], verifier["n_labelled"]) == (3, 2)
    assert verifier["parse_failure_rate"]["value"] == pytest.approx(1 / 3)
    assert verifier["n"] == 1 and verifier["accuracy"]["value"] == 1.0


def test_the_line_length_limit_still_applies(db, tmp_path, monkeypatch):
    monkeypatch.setattr("annotation.transfer.adapters.documents.MAX_LINE_BYTES", 1000)
    study = create_study(slug="verif", name="Claims", kind="verification")
    message = refused("import_items", "verif", str(EARLY), "--from", "veriscore")
    assert "line 1: line is longer than the limit of 1,000 bytes" in message
    assert stored(study) == (0, 0, 0)


def test_command_options_that_need_from_or_two_names_are_refused(db):
    create_study(slug="pref", name="Extractors", kind="preference")
    assert "--pair, --systems, --verifier and --source-labels go with --from" in refused(
        "import_items", "pref", str(EARLY), "--pair", str(BASELINE)
    )
    message = refused(
        "import_items", "pref", str(EARLY), "--from", "veriscore", "--pair", str(BASELINE), "--systems", "a,b,c"
    )
    assert "--systems takes one name or two, comma-separated (A,B); got 'a,b,c'" in message
    assert "no such file: nope.jsonl" in refused(
        "import_items", "pref", str(EARLY), "--from", "veriscore", "--pair", "nope.jsonl"
    )
