"""The Hugging Face dataset export, loaded back with `datasets` and pandas.

The preference study is the real factscore-pref demo (120 items) with seeded
judgements (tests/support/factscore_pref.py); expected rows, reference labels,
preference pairs and agreement are computed here from those records (Fleiss
kappa with statsmodels), never from Claimlab's output.
"""

from __future__ import annotations

import json
from collections import Counter

import datasets
import pandas as pd
import pytest
import yaml
from django.core.management import CommandError, call_command
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.dataset_export import write_hf_dataset
from metaeval.reporting import ReportOptions, build_report
from tests.conftest import jsonl
from tests.support.factscore_pref import SYSTEMS, demo_items, human_records, make_study, record_label

pytestmark = pytest.mark.django_db
SCALE = ["a_strong", "a_slight", "tie", "b_slight", "b_strong"]


def card_header(folder) -> dict:
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def load(folder, config: str, cache) -> datasets.Dataset:
    return datasets.load_dataset("parquet", data_dir=str(folder / "data" / config), cache_dir=str(cache))["train"]


def strict_majority(labels: list[str]) -> str | None:
    label, count = Counter(labels).most_common(1)[0]
    return label if 2 * count > len(labels) else None


@pytest.fixture
def exported(tmp_path):
    study = make_study()
    folder = tmp_path / "factscore-pref-hf"
    call_command("export_dataset", study.slug, str(folder), "--format", "hf", "--license", "mit")
    return study, folder


def test_a_preference_study_loads_with_datasets_and_pandas(exported, tmp_path):
    study, folder = exported
    records = human_records(demo_items())
    items = {item["id"]: item for item in demo_items()}
    annotations = load(folder, "annotations", tmp_path / "cache")
    assert annotations.num_rows == len(records) == 360
    assert set(annotations.column_names) >= {"item", "annotator", "label", "preferred_system", "strength"}
    frame = pd.read_parquet(folder / "data" / "annotations")
    assert sorted(zip(frame["item"], frame["annotator"], frame["label"], strict=True)) == sorted(
        (r["item"], r["annotator"], record_label(r)) for r in records
    )

    by_item: dict[str, dict[str, str]] = {}
    for record in records:
        by_item.setdefault(record["item"], {})[record["annotator"]] = record_label(record)
    rows = load(folder, "items", tmp_path / "cache")
    assert rows.num_rows == 120
    assert rows.features["labels"].feature.dtype == "string"
    for row in rows:
        given = by_item[row["item"]]
        assert row["annotators"] == sorted(given) and row["labels"] == [given[name] for name in sorted(given)]
        assert row["reference_label"] == strict_majority(list(given.values()))
        assert row["adjudicated_label"] is None
        assert row["claims_a"] == items[row["item"]]["lists"][SYSTEMS[0]]
        assert (row["system_a"], row["system_b"]) == SYSTEMS

    pairs = load(folder, "preference_pairs", tmp_path / "cache")
    expected, ties = {}, 0
    for item_id, given in by_item.items():
        direction = strict_majority([label[0] if label != "tie" else "tie" for label in given.values()])
        if direction == "tie":
            ties += 1
        elif direction is not None:
            expected[item_id] = direction
    assert pairs.num_rows == len(expected) > 0
    for row in pairs:
        winner = expected[row["item"]]
        lists = items[row["item"]]["lists"]
        assert row["chosen"] == "\n".join(lists[SYSTEMS["ab".index(winner)]])
        assert row["rejected"] == "\n".join(lists[SYSTEMS[1 - "ab".index(winner)]])
        assert items[row["item"]]["source"] in row["prompt"]

    header = card_header(folder)
    assert header["license"] == "mit"
    assert header["claimlab"]["preference_pairs_left_out"]["ties"] == ties
    assert header["claimlab"]["n_annotators"] == 3 and header["claimlab"]["label_vocabulary"] == SCALE
    info = {entry["config_name"]: entry for entry in header["dataset_info"]}
    assert info["items"]["splits"] == [{"name": "train", "num_examples": 120}]
    assert {"name": "labels", "sequence": "string"} in info["items"]["features"]
    counts, _ = aggregate_raters([[SCALE.index(given[w]) for w in sorted(given)] for given in by_item.values()], 5)
    kappa = header["claimlab"]["agreement"]["fleiss_kappa"]
    assert kappa["value"] == pytest.approx(fleiss_kappa(counts), abs=1e-12)
    report = build_report(study, ReportOptions())
    assert kappa["value"] == pytest.approx(report["agreement"]["fleiss_kappa"]["value"], abs=1e-12)
    assert kappa["ci_95"] == pytest.approx(report["agreement"]["fleiss_kappa"]["ci"])
    by_config = datasets.load_dataset(str(folder), "items", cache_dir=str(tmp_path / "cache2"))["train"]
    assert by_config.num_rows == 120  # the card's configs point at the files


def test_a_verification_study_keeps_evidence_gold_and_null_references(db, tmp_path):
    study = create_study(slug="ver", name="Ver", kind="verification", annotators_per_item=2)
    evidence = [{"text": "Paris is in France.", "title": "Paris", "url": "https://example.org/p"}]
    import_items(
        study=study,
        stream=jsonl(
            {"id": "c1", "claim": "Paris is in France.", "domain": "geo", "evidence": evidence},
            {"id": "c2", "claim": "Paris is in Peru.", "domain": "geo", "gold": "contradicted"},
            {"id": "c3", "claim": "Nobody labelled this.", "domain": "misc"},
        ),
        fmt="jsonl",
    )
    import_annotations(
        study=study,
        stream=jsonl(
            {"item": "c1", "annotator": "w1", "label": "supported"},
            {"item": "c1", "annotator": "w2", "label": "inconclusive"},
            {"item": "c2", "annotator": "w1", "label": "contradicted"},
        ),
        fmt="jsonl",
    )
    folder = tmp_path / "ver"
    result = write_hf_dataset(study, folder)
    assert result.rows == {"annotations": 3, "items": 3} and not (folder / "data" / "preference_pairs").exists()
    rows = {row["item"]: row for row in pd.read_parquet(folder / "data" / "items").to_dict("records")}
    assert pd.isna(rows["c1"]["reference_label"])  # 1-1: a tie is null
    assert rows["c2"]["reference_label"] == "contradicted" and rows["c2"]["gold_label"] == "contradicted"
    assert list(rows["c3"]["labels"]) == [] and pd.isna(rows["c3"]["reference_label"])
    assert json.loads(rows["c1"]["evidence"])[0]["url"] == "https://example.org/p"
    header = card_header(folder)
    assert header["license"] == "other"
    assert "Unknown (`other`)" in (folder / "README.md").read_text(encoding="utf-8")
    assert load(folder, "annotations", tmp_path / "cache").num_rows == 3


def test_a_folder_with_files_is_refused_and_left_as_it_was(db, tmp_path):
    study = create_study(slug="ver", name="Ver", kind="verification")
    folder = tmp_path / "taken"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    with pytest.raises(CommandError, match="not an empty folder"):
        call_command("export_dataset", study.slug, str(folder))
    assert [path.name for path in folder.iterdir()] == ["keep.txt"]
    assert not (tmp_path / "taken.partial").exists()
    with pytest.raises(CommandError, match="does not exist"):
        call_command("export_dataset", study.slug, str(tmp_path / "no" / "such"))


def test_extra_questions_and_conditions_go_into_the_annotations_config(db, tmp_path, client):
    """Issue 32: the Hugging Face export carries each answer's condition and its questions' answers."""
    from django.urls import reverse

    from tests.support.assignment_study import make_study as make_question_study

    questions = [{"key": "sure", "type": "likert", "prompt": "How sure?"}]
    study, users = make_question_study(
        slug="hfq", items=2, n=2, annotators=2, questions=questions, conditions=["a", "b"]
    )
    for user in users:
        client.force_login(user)
        while (response := client.post(reverse("api-assignment-next", args=["hfq"]))).status_code == 200:
            client.post(
                reverse("api-assignment-submit", args=[response.json()["assignment"]["id"]]),
                {"label": "supported", "questions": {"sure": 4}},
                content_type="application/json",
            )
    folder = tmp_path / "hfq"
    write_hf_dataset(study, folder)
    rows = pd.read_parquet(folder / "data" / "annotations").to_dict("records")
    assert (
        len(rows) == 4 and {row["q_sure"] for row in rows} == {"4"} and {row["condition"] for row in rows} == {"a", "b"}
    )
    assert load(folder, "annotations", tmp_path / "cache").num_rows == 4


def test_items_written_a_batch_at_a_time_equal_the_table_held_whole(db, tmp_path, monkeypatch):
    """The export writes ``items`` as it reads them (a million items held 2.2 GB as one list): in batches of 7
    here, the file equals the table built whole, and the preference pairs and their counts across batches too."""
    import pyarrow.parquet as pq

    from metaeval.dataset_export import tables as dataset_tables

    study = make_study()
    whole = dataset_tables.build_tables(study)
    monkeypatch.setattr(dataset_tables, "ITEM_BATCH_ROWS", 7)
    target = tmp_path / "items.parquet"
    streamed = dataset_tables.build_tables(study, items_to=target)
    written = pq.read_table(target)
    assert whole.items.num_rows > 7 * 3 and streamed.items.num_rows == whole.items.num_rows
    assert pq.ParquetFile(target).metadata.num_row_groups == -(-whole.items.num_rows // 7)
    assert written.equals(whole.items) and streamed.items.schema == whole.items.schema
    assert streamed.pairs is not None and whole.pairs is not None and streamed.pairs.equals(whole.pairs)
    assert streamed.pair_counts == whole.pair_counts and whole.pairs.num_rows > 0
