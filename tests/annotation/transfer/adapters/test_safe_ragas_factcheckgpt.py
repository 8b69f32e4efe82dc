"""SAFE result JSON, RAGAS evaluation datasets and Factcheck-GPT files (tests/data/formats)."""

from __future__ import annotations

import ast
import copy
import json

import pandas as pd
import pytest

from annotation.models import Annotation, Item, Study
from annotation.studies.services import create_study
from metaeval import stats
from metaeval.models import Prediction
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.csv_format import report_csv
from metaeval.reporting.html_format import report_html
from tests.annotation.transfer.adapters.conftest import jsonl_text, refused, run, sample, stored, write

SKELETON = sample("safe", "safe_result_SKELETON_constructed_from_code.json")
RAGAS = sample("ragas", "ragas_evaluation_dataset_example_docs_howtos_observability_md_L393-434.txt")
BENCHMARK = sample("factcheckgpt", "factcheckgpt_benchmark_lines1_94.jsonl")
FACTBENCH = sample("factcheckgpt", "factbench_lines1_51_235_329_330.jsonl")
SUBTASK4 = sample("factcheckgpt", "factcheckgpt_subtask4_claim_factuality_first3.jsonl")
SUBTASK3 = sample("factcheckgpt", "factcheckgpt_subtask3_claim_evidence_stance_first3.jsonl")


@pytest.fixture
def verification(db) -> Study:
    return create_study(
        slug="v",
        name="V",
        kind="verification",
        labels=["supported", "not_supported", "irrelevant"],
        binary_map={"supported": "positive", "not_supported": "negative"},
    )


def safe_f1(supported: int, not_supported: int, max_claims: int = 100) -> float:
    """long-form-factuality eval/metric_utils.calculate_metrics, as SAFE writes f1_-1."""
    if supported == 0:
        return 0.0
    precision = supported / (supported + not_supported)
    recall = min(1, supported / max_claims)
    return 2 * precision * recall / (precision + recall)


def safe_result(counts: list[tuple[int, int, int]]) -> dict:
    """A SAFE result with the skeleton's keys (the only shape published) and these label counts per prompt."""
    result = json.loads(SKELETON.read_text())
    template = result["per_prompt_data"][0]
    supported_statement, irrelevant_statement = template["side2_posthoc_eval_data"]["checked_statements"]
    prompts = []
    for number, (s, ns, ir) in enumerate(counts, start=1):
        prompt = copy.deepcopy(template)
        data = prompt["side2_posthoc_eval_data"]
        statements, steps = [], []
        for kind, n in (("Supported", s), ("Not Supported", ns), ("Irrelevant", ir)):
            for k in range(n):
                statement = copy.deepcopy(irrelevant_statement if kind == "Irrelevant" else supported_statement)
                statement["self_contained_atomic_fact"] = f"Fact {k} ({kind}) of prompt {number}."
                statement["annotation"] = kind
                statements.append(statement)
                steps.append(
                    {} if kind == "Irrelevant" else {"google_searches": [{"query": f"q{k}", "result": f"Result {k}."}]}
                )
        data.update(
            checked_statements=statements,
            past_steps_jsonified_all=steps,
            Supported=s,
            **{"Not Supported": ns},
            Irrelevant=ir,
        )
        data["f1_-1"] = safe_f1(s, ns)
        prompts.append(prompt)
    result["per_prompt_data"] = prompts
    return result


def test_safe_results_become_items_and_predictions_whose_f1_is_the_files(verification, tmp_path):
    result = safe_result([(3, 1, 1), (10, 0, 2), (0, 2, 0)])
    path = write(tmp_path / "2024-04-01-12-00-00-SAFE.json", json.dumps(result))
    run("import_items", "v", str(path), "--from", "safe", "--systems", "gpt-4")
    assert Item.objects.filter(study=verification).count() == 5 + 12 + 2
    item = Item.objects.get(study=verification, external_id="safe-1-side2-1")
    assert item.payload["claim"] == "Fact 0 (Supported) of prompt 1."
    assert item.payload["evidence"] == [{"text": "Result 0.", "title": "q0", "url": "", "source_type": "web search"}]
    run("import_predictions", "v", str(path), "--from", "safe")
    rows = pd.DataFrame(
        Prediction.objects.values_list("item__response_id", "item__system", "label"),
        columns=["response_id", "system", "label"],
    )
    scores = stats.veriscore_f1_at_k(
        rows, supported={"supported"}, unsupported={"not_supported"}, excluded={"irrelevant"}, k=100
    )
    by_response = {entry["response_id"]: entry["f1_at_k"] for entry in scores["per_response"]}
    for number, prompt in enumerate(result["per_prompt_data"], start=1):
        assert by_response[f"safe-{number}-side2"] == pytest.approx(prompt["side2_posthoc_eval_data"]["f1_-1"])
    # The report's factuality scores from the verifier, with K fixed as the file's (same numbers).
    report = build_report(verification, ReportOptions(k=100))
    (verifier,) = report["scores"]["verifiers"].values()
    assert verifier["n_claims_predicted"] == 5 + 12 + 2
    from_report = {entry["response_id"]: entry["f1_at_k"] for entry in verifier["per_response"]}
    assert from_report == pytest.approx(by_response)
    files = [prompt["side2_posthoc_eval_data"]["f1_-1"] for prompt in result["per_prompt_data"]]
    assert verifier["veriscore"]["overall"]["f1_at_k"]["value"] == pytest.approx(sum(files) / len(files))
    name = next(iter(report["scores"]["verifiers"]))
    assert f"scores_verifier:{name}" in report_csv(report)
    assert f"From verifier {name}" in report_html(verification, report)


def test_the_constructed_skeleton_itself_imports(verification):
    run("import_items", "v", str(SKELETON), "--from", "safe")
    assert sorted(Item.objects.values_list("external_id", flat=True)) == ["safe-1-side2-1", "safe-1-side2-2"]
    run("import_predictions", "v", str(SKELETON), "--from", "safe")
    assert sorted(Prediction.objects.values_list("label", flat=True)) == ["irrelevant", "supported"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda r: r.pop("per_prompt_data"), "file, field 'per_prompt_data': expected SAFE's result JSON"),
        (
            lambda r: r["per_prompt_data"][0]["side2_posthoc_eval_data"]["checked_statements"][0].update(
                annotation="SUPPORTED"
            ),
            "file, field 'checked_statements[0].annotation': prompt 1, side2, statement 1: must be one of Supported, Not Supported, Irrelevant, got 'SUPPORTED'",
        ),
        (
            lambda r: r["per_prompt_data"][0]["side2_posthoc_eval_data"].update(checked_statements={}),
            "file, field 'checked_statements': prompt 1, side2: must be an array",
        ),
    ],
)
def test_malformed_safe_results(verification, tmp_path, mutate, expected):
    result = json.loads(SKELETON.read_text())
    mutate(result)
    path = write(tmp_path / "r.json", json.dumps(result))
    assert expected in refused("import_items", "v", str(path), "--from", "safe")
    assert stored(verification) == (0, 0, 0)


def test_a_truncated_safe_result_names_the_line(verification, tmp_path):
    text = SKELETON.read_text()
    path = write(tmp_path / "r.json", text[:1500])
    assert "line 29: invalid JSON: Unterminated string starting at column 13" in refused(
        "import_items", "v", str(path), "--from", "safe"
    )


def ragas_samples() -> list[dict]:
    literal = RAGAS.read_text().split("=", 1)[1]
    return ast.literal_eval(literal.strip())


def test_a_ragas_dataset_becomes_statements_with_the_contexts_as_evidence(verification, tmp_path):
    samples = ragas_samples()
    path = write(tmp_path / "dataset.jsonl", jsonl_text(*samples))
    out = run("import_items", "v", str(path), "--from", "ragas")
    assert f"Imported {len(samples)} new" in out  # each response is one sentence: one statement
    item = Item.objects.get(study=verification, external_id="ragas-1-1")
    assert item.payload["claim"] == samples[0]["response"]
    assert item.payload["evidence"][0]["text"] == samples[0]["retrieved_contexts"][0]
    assert item.payload["context"].startswith("Question: Which CEO is widely recognized")
    legacy = [
        {"question": s["user_input"], "answer": s["response"] + " It is true.", "contexts": s["retrieved_contexts"]}
        for s in samples
    ]
    other = create_study(slug="legacy", name="Legacy", kind="verification")
    run("import_items", "legacy", str(write(tmp_path / "v1.json", json.dumps(legacy))), "--from", "ragas")
    assert Item.objects.filter(study=other).count() == 2 * len(samples)
    assert Item.objects.get(study=other, external_id="ragas-2-2").payload["claim"] == "It is true."


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"user_input": "q"}, "line 1, field 'response': needs a 'response' (or 'answer') string"),
        (
            {"response": "A.", "retrieved_contexts": "one"},
            "line 1, field 'retrieved_contexts': must be an array of strings",
        ),
    ],
)
def test_malformed_ragas_samples(verification, tmp_path, record, expected):
    path = write(tmp_path / "d.jsonl", jsonl_text(record))
    assert expected in refused("import_items", "v", str(path), "--from", "ragas")
    assert stored(verification) == (0, 0, 0)


@pytest.fixture
def ternary(db) -> Study:
    return create_study(slug="fc", name="Factcheck", kind="verification", annotators_per_item=1)


def test_the_factcheck_benchmark_becomes_items_with_stances_and_gold(ternary):
    out = run("import_items", "fc", str(BENCHMARK), "--from", "factcheckgpt", "--source-labels", "annotator")
    documents = [json.loads(line) for line in BENCHMARK.read_text().splitlines()]
    claims = [
        (line, key, index, claim, sentence)
        for line, doc in enumerate(documents, start=1)
        for key, sentence in doc["sentences"].items()
        for index, claim in enumerate(sentence["claims"])
    ]
    assert f"Imported {len(claims)} new" in out
    line, key, index, claim, sentence = claims[0]
    item = Item.objects.get(study=ternary, external_id=f"fcgpt-{line}-{key}-{index + 1}")
    expected_gold = {True: "supported", False: "contradicted"}[sentence["claims_factuality_label"][index]]
    assert (item.payload["claim"], item.gold_label) == (claim, expected_gold)
    texts = [t for t in sentence["auto_evidence"][index] if t.strip()]
    assert [p["text"] for p in item.payload["evidence"]] == texts
    annotation = Annotation.objects.get(assignment__item=item)
    stances = sentence["stance_claim_autoEvid"][index]
    mapping = {
        "completely-support": "support",
        "partially-support": "support",
        "refute": "not_support",
        "irrelevant": "irrelevant",
    }
    assert [j["judgement"] for j in annotation.evidence_judgements] == [mapping[s] for s in stances[: len(texts)]]


def test_factbench_and_subtask4_lines_carry_gold_labels(ternary):
    run("import_items", "fc", str(FACTBENCH), "--from", "factcheckgpt")
    lines = [json.loads(line) for line in FACTBENCH.read_text().splitlines()]
    n_claims = sum(len(line["claims"]) for line in lines)
    assert Item.objects.filter(study=ternary).count() == n_claims
    first = Item.objects.get(study=ternary, external_id="factbench-1-2")
    assert (first.payload["claim"], first.gold_label) == (lines[0]["claims"][1], "contradicted")
    other = create_study(slug="s4", name="Subtask 4", kind="verification")
    run("import_items", "s4", str(SUBTASK4), "--from", "factcheckgpt")
    assert (
        list(Item.objects.filter(study=other).order_by("position").values_list("gold_label", flat=True))
        == [
            "contradicted",
            "supported",
            "supported",
        ][: Item.objects.filter(study=other).count()]
    )


def test_subtask3_stances_become_one_passage_items_with_their_judgement(ternary, tmp_path):
    run("import_items", "fc", str(SUBTASK3), "--from", "factcheckgpt", "--source-labels", "annotator")
    lines = [json.loads(line) for line in SUBTASK3.read_text().splitlines()]
    verdict = {
        "completely-support": ("supported", "support"),
        "refute": ("contradicted", "not_support"),
        "partially-support": ("inconclusive", "support"),
        "irrelevant": ("inconclusive", "irrelevant"),
    }
    items = list(Item.objects.filter(study=ternary).order_by("position"))
    assert [(item.payload["claim"], item.payload["evidence"][0]["text"]) for item in items] == [
        (line["claim"], line["evidence"]) for line in lines
    ]
    assert [item.gold_label for item in items] == [verdict[line["stance"]][0] for line in lines]
    annotations = Annotation.objects.filter(assignment__study=ternary).order_by("assignment__item__position")
    assert [(a.label, a.evidence_judgements[0]["judgement"]) for a in annotations] == [
        verdict[line["stance"]] for line in lines
    ]
    bad = write(tmp_path / "s3.jsonl", jsonl_text({**lines[0], "stance": "supports"}))
    other = create_study(slug="s3", name="Subtask 3", kind="verification")
    message = refused("import_items", "s3", str(bad), "--from", "factcheckgpt")
    assert "line 1, field 'stance': must be one of completely-support, partially-support, refute, irrelevant" in message
    assert stored(other) == (0, 0, 0)


def test_a_bad_stance_names_the_sentence_and_claim(ternary, tmp_path):
    document = json.loads(BENCHMARK.read_text().splitlines()[0])
    document["sentences"]["sentence1"]["stance_claim_autoEvid"][0][0] = "supports"
    path = write(tmp_path / "bench.jsonl", jsonl_text(document))
    message = refused("import_items", "fc", str(path), "--from", "factcheckgpt")
    assert (
        "line 1, field 'stance_claim_autoEvid[0][0]': sentence1, claim 1: must be one of completely-support" in message
    )
    assert stored(ternary) == (0, 0, 0)


def test_an_unknown_factcheck_shape_is_refused(ternary, tmp_path):
    path = write(tmp_path / "x.jsonl", jsonl_text({"sentence": "A.", "checkworthy": "yes"}))
    assert "line 1: is not a Factcheck-GPT benchmark document" in refused(
        "import_items", "fc", str(path), "--from", "factcheckgpt"
    )


def test_an_adapter_refuses_what_it_cannot_import(ternary, tmp_path):
    message = refused("import_predictions", "fc", str(BENCHMARK), "--from", "ragas")
    assert "--from ragas imports items, not predictions" in message
