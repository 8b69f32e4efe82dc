"""Issue 34: VeriScore's labelled examples, Factcheck-GPT's source types, whole-JSON files where JSON Lines is
expected, and errors that name the option as the page, the API or the command calls it (real samples)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Annotation, ImportJob, Item, Study
from annotation.studies.services import create_study
from tests.annotation.transfer.adapters.conftest import refused, run, sample, stored, write

EXAMPLES = sample("veriscore", "veriscore_few_shot_examples_lines1_2_5.jsonl")
EXCERPT = sample("veriscore", "veriscore_verification_excerpt.json")
EARLY = sample("veriscore", "veriscore_claims_early_7067724.jsonl")
BASELINE = sample("veriscore", "claims_sentence_baseline.jsonl")
BENCHMARK = sample("factcheckgpt", "factcheckgpt_benchmark_lines1_94.jsonl")
WICE = sample("wice", "claim_test_lines2_9_78_82.jsonl")


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def ternary(db) -> Study:
    """The default labels: supported / contradicted / inconclusive."""
    return create_study(slug="t", name="T", kind="verification", annotators_per_item=1)


# --- VeriScore's human-labelled examples --------------------------------------------------------


def test_veriscores_labelled_examples_become_items_with_gold_labels(ternary):
    out = run("import_items", "t", str(EXAMPLES), "--from", "veriscore")
    assert "Imported 3 new" in out
    for line, record in enumerate(lines(EXAMPLES), start=1):
        item = Item.objects.get(study=ternary, external_id=f"veriscore-example-{line}")
        assert item.payload["claim"] == record["claim"]
        assert item.gold_label == record["human_label"].rstrip(".").lower()
    first = Item.objects.get(study=ternary, external_id="veriscore-example-1").payload["evidence"]
    assert first[0]["title"] == "Character Spotlight: Lenny Leonard and Carl Carlson (& Barflies)"
    assert first[0]["text"].startswith("Their friendship is a pretty singular aspect on the show")
    assert first[0]["url"].startswith("https://nohomers.net/forums/")
    assert any(p["source_type"] == "social media" for p in first)  # the reddit.com result
    assert not Annotation.objects.filter(assignment__study=ternary).exists()


def test_veriscores_labelled_examples_as_an_annotators_labels(ternary):
    run("import_items", "t", str(EXAMPLES), "--from", "veriscore", "--source-labels", "annotator")
    labels = sorted(Annotation.objects.filter(assignment__study=ternary).values_list("label", flat=True))
    assert labels == ["contradicted", "inconclusive", "supported"]
    ternary.refresh_from_db()
    assert ternary.source_labels == [{"from": "veriscore", "as": "annotator", "annotators": ["veriscore-human"]}]


def test_a_binary_study_takes_contradicted_and_inconclusive_as_unsupported(db):
    create_study(slug="b", name="B", kind="verification", labels=["supported", "unsupported"])
    run("import_items", "b", str(EXAMPLES), "--from", "veriscore")
    assert sorted(Item.objects.values_list("gold_label", flat=True)) == ["supported", "unsupported", "unsupported"]


# --- Factcheck-GPT: source types from the URL's domain -------------------------------------------


def test_factcheck_gpts_wikipedia_passages_are_typed_wiki(ternary):
    run("import_items", "t", str(BENCHMARK), "--from", "factcheckgpt")
    passages = [p for item in Item.objects.filter(study=ternary) for p in item.payload.get("evidence", [])]
    types = {p["url"].split("/")[2]: p["source_type"] for p in passages if p.get("url")}
    assert types["en.wikipedia.org"] == "wiki"
    assert types["www.mtsu.edu"] == "academic"
    assert types["www.oldest.org"] == "web"


# --- one JSON document where JSON Lines is expected ------------------------------------------------


def test_a_pretty_printed_record_is_one_clear_error_not_one_per_line(ternary):
    text = EXCERPT.read_text()  # VeriScore's record, indented over many lines, as the sample is
    message = refused("import_items", "t", str(EXCERPT), "--from", "veriscore")
    assert "(1 problem(s))" in message
    assert (
        f"the file is a single JSON document (an object spanning lines 1-{text.count(chr(10)) + 1}), "
        "not JSON Lines (one JSON object per line)"
    ) in message
    assert "invalid JSON" not in message
    assert stored(ternary) == (0, 0, 0)


def test_a_json_array_of_records_reads_as_the_records_with_their_lines(db, tmp_path):
    study = create_study(
        slug="w", name="W", kind="verification", labels=["supported", "partially_supported", "not_supported"]
    )
    records = lines(WICE)
    path = write(tmp_path / "claims.json", json.dumps(records, indent=2))
    assert "Imported 4 new" in run("import_items", "w", str(path), "--from", "wice")
    assert set(Item.objects.filter(study=study).values_list("external_id", flat=True)) == {
        record["meta"]["id"] for record in records
    }
    bad = json.dumps([records[0], {**records[1], "label": "maybe"}], indent=2)
    line = bad.splitlines().index("  {", 2) + 1  # where the second record starts
    message = refused("import_items", "w", str(write(tmp_path / "bad.json", bad)), "--from", "wice", "--update")
    assert f"line {line}, field 'label': 'maybe' needs one of the study's labels" in message


def test_an_array_where_the_adapter_expects_no_list_is_one_error(db, tmp_path):
    create_study(slug="fs", name="FS", kind="verification", labels=["S", "NS", "IR"])
    path = write(tmp_path / "labeled.json", json.dumps([{"topic": "x"}, {"topic": "y"}], indent=2))
    message = refused("import_items", "fs", str(path), "--from", "factscore")
    assert "(1 problem(s))" in message
    assert "the file is a single JSON document (an array of 2 value(s)), not JSON Lines" in message


def test_claimlabs_own_import_says_a_json_array_is_one_document(ternary, tmp_path):
    items = [{"id": f"c-{n}", "claim": f"Claim {n}."} for n in range(3)]
    path = write(tmp_path / "items.jsonl", json.dumps(items, indent=2))
    message = refused("import_items", "t", str(path))
    assert "(1 problem(s))" in message
    assert "the file is a single JSON document (an array), not JSON Lines" in message


def test_json_errors_say_at_column_once(ternary, tmp_path):
    path = write(tmp_path / "items.jsonl", '{"id": "c-1", "claim": "unterminated\n')
    assert "line 1: invalid JSON: Unterminated string starting at column 24" in refused("import_items", "t", str(path))


# --- errors name the option as each face calls it --------------------------------------------------


@pytest.fixture
def preference(db, researcher) -> Study:
    study = create_study(slug="pref", name="Extractors", kind="preference")
    add_members(study=study, usernames=[researcher.username], role="researcher")
    return study


def upload(path) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes())


def test_the_page_names_its_fields_the_api_and_the_command_their_parameters(client, researcher, preference):
    client.force_login(researcher)
    page = reverse("annotation:study_import", args=["pref"])
    client.post(page, {"what": "items", "source": "veriscore", "file": upload(EARLY), "systems": "a,b"})
    client.post(
        page,
        {"what": "items", "source": "veriscore", "file": upload(EARLY), "pair": upload(BASELINE), "systems": "a,a"},
    )
    pair_error, systems_error = (job.errors[0]["message"] for job in ImportJob.objects.order_by("pk"))
    assert pair_error.endswith("give the second extractor's claims file with the 'Second file' field")
    assert systems_error == "both extractors are called 'a'; name them with the 'Systems' field (A,B)"
    api = client.post(
        reverse("api-item-import", args=["pref"]),
        {"file": upload(EARLY), "pair": upload(BASELINE), "from": "veriscore", "systems": "a,a"},
    )
    assert api.json()["errors"][0]["message"] == "both extractors are called 'a'; name them with 'systems' (A,B)"
    command = refused(
        "import_items", "pref", str(EARLY), "--from", "veriscore", "--pair", str(BASELINE), "--systems", "a,a"
    )
    assert "name them with --systems A,B" in command
    assert "--pair FILE" in refused("import_items", "pref", str(EARLY), "--from", "veriscore")
    assert stored(preference) == (0, 0, 0)
