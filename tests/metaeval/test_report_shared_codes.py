"""The report's later sections from the study frame's codes, and its long lists written from their columns
(issue 35): the very report, and the very stored text, of the former computation.

The former computation is kept whole behind ``study_frame.SHARED_CODES`` (False: every section lays the
labels out and factorises their strings again, as before) and ``json.dumps`` of the long lists' records
(what ``reporting/cache._Encoded`` wrote before ``stats.json_rows``). Each report here is built both ways,
from scratch, and compared as stored text: the report's JSON and every chunk of its long lists. On the
demo's real XSum labels (with its adjudications) and on seeded studies: several claims per response,
gold items, check items, varying numbers of annotators per item, a verifier, abstentions, adjudicated
items, each reference rule, gold and checks in or out of agreement, and a preference study. The pieces
are also compared one by one with what they replace (the Dawid-Skene / MACE encoding, the majority's
table, the reference, the adjudication queue, the disagreement list, the JSON text), on seeded data
made to reach their other branches.
"""

from __future__ import annotations

import importlib
import json
import random

import numpy as np
import pandas as pd
import pytest

from annotation.adjudication.services import adjudicate, verdict_for
from annotation.members.services import add_members
from annotation.models import AdjudicationRule, Item, Study
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval import stats
from metaeval import study_frame as frames
from metaeval.label_rows import ITEM_COLUMNS, LabelRows
from metaeval.reference import REFERENCE_RULES, ReferenceInputs, reference_labels
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting import cache as report_cache
from metaeval.reporting.adjudication_queue import queue_size_with
from metaeval.reporting.disagreements import DisagreementRows, disagreements
from metaeval.stats import json_rows
from metaeval.stats.scores import ResponseRows, lazy_response_rows
from metaeval.verifiers.services.prediction_import import import_predictions
from tests.conftest import jsonl, preference_item, verification_item

aggregation = importlib.import_module("metaeval.stats.aggregation")
disagreements_module = importlib.import_module("metaeval.reporting.disagreements")
queue_module = importlib.import_module("metaeval.reporting.adjudication_queue")
scores_module = importlib.import_module("metaeval.stats.scores")

LABELS = ["supported", "contradicted", "inconclusive"]
WORKERS = [f"w{n}" for n in range(1, 7)]
OPTIONS = [
    ReportOptions(n_resamples=60),
    ReportOptions(n_resamples=60, by_domain=True, binary=True),
    *(ReportOptions(n_resamples=30, reference=rule) for rule in REFERENCE_RULES),
]


# --- the whole report, both ways --------------------------------------------------------------------


def _old_stored(study: Study, options: ReportOptions, monkeypatch) -> tuple[str, str, dict[str, list[str]]]:
    """The former build and encoding: every section from the laid-out strings, each chunk by json.dumps.
    Returns (the whole report's JSON, the stored report's, its lists' chunks)."""
    with monkeypatch.context() as patched:
        patched.setattr(frames, "SHARED_CODES", False)
        report = build_report(study, options)
    main, lists = report_cache._split(report)
    assert all(isinstance(rows, list) for rows in lists.values())
    chunks = {
        section: [
            json.dumps(rows[n : n + report_cache.CHUNK_ROWS], allow_nan=False)
            for n in range(0, len(rows), report_cache.CHUNK_ROWS)
        ]
        for section, rows in lists.items()
    }
    return json.dumps(report, allow_nan=False), json.dumps(main, allow_nan=False), chunks


def _new_stored(study: Study, options: ReportOptions) -> tuple[str, dict[str, list[str]]]:
    """The build as the report cache runs it: the frame's codes, lazy long lists written from their columns."""
    assert frames.SHARED_CODES
    with lazy_response_rows():
        report = build_report(study, options)
    if report["disagreements"]:
        assert isinstance(report["disagreements"], DisagreementRows)  # the codes' list, not the frame's
    encoded = report_cache._Encoded.of(report)
    return encoded.main, {section: list(encoded.texts(section)) for section in encoded.lists}


def _assert_same_report(study: Study, options: ReportOptions, monkeypatch) -> dict:
    old_whole, old_main, old_chunks = _old_stored(study, options, monkeypatch)
    new_main, new_chunks = _new_stored(study, options)
    assert new_main == old_main, options
    assert new_chunks == old_chunks, options
    # a caller outside the cache (lists, not lazy rows) gets the former report too
    assert json.dumps(build_report(study, options), allow_nan=False) == old_whole, options
    return json.loads(new_main)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: f"{o.reference}-{o.by_domain}")
def test_the_demo_xsum_report_is_the_former_one(demo, db, options, monkeypatch):
    report = _assert_same_report(demo["xsum-factuality"], options, monkeypatch)
    assert report["n_annotations"] > 5000 and report["n_disagreements"] > 100


def test_per_response_lists_kept_on_disk_store_the_former_report(demo, db, monkeypatch):
    """Past SPILL_MIN_RESPONSES the build writes each per-response list to a temporary file (issue 35): the
    stored chunks, and the records read back, are the former ones."""
    spilled: list[ResponseRows] = []
    spill = ResponseRows.spill

    def spill_and_note(rows: ResponseRows) -> None:
        spill(rows)
        spilled.append(rows)

    monkeypatch.setattr(scores_module, "SPILL_MIN_RESPONSES", 2)
    monkeypatch.setattr(ResponseRows, "spill", spill_and_note)
    monkeypatch.setattr(json_rows.RecordWindows, "WINDOW", 97)  # written to the file a few windows at a time
    options = ReportOptions(n_resamples=30, by_domain=True, binary=True)
    _assert_same_report(demo["xsum-factuality"], options, monkeypatch)
    assert spilled and all(rows._spilled is not None and not rows._columns for rows in spilled)
    with monkeypatch.context() as patched:
        patched.setattr(frames, "SHARED_CODES", False)
        listed = build_report(demo["xsum-factuality"], options)["scores"]["human"]["per_response"]
    with lazy_response_rows():
        lazy = build_report(demo["xsum-factuality"], options)["scores"]["human"]["per_response"]
    assert lazy._spilled is not None and len(lazy) == len(listed) > 100
    assert lazy[:] == listed and lazy[7] == listed[7] and lazy[-1] == listed[-1]
    assert lazy[5:90:9] == listed[5:90:9] and lazy[90:5:-4] == listed[90:5:-4] and lazy[len(listed) :] == []
    with pytest.raises(IndexError):
        lazy[len(listed)]


@pytest.mark.parametrize("fails_after", [0, 1], ids=["no temporary file", "disk full while written"])
def test_per_response_lists_stay_in_memory_when_no_temporary_file_can_be_written(fails_after, monkeypatch, caplog):
    """A temporary folder that is missing or full keeps the list in memory (as below the threshold): the same
    text, a warning, no report lost."""
    frame, values = _records(12, 2500)
    expected = ResponseRows(frame, values)[:]

    class FullDisk:
        def __init__(self, *args, **kwargs):
            if not fails_after:
                raise OSError(28, "No space left on device")
            self.closed, self.writes = False, 0

        def write(self, data):
            self.writes += 1
            if self.writes > fails_after:
                raise OSError(28, "No space left on device")

        def close(self):
            self.closed = True

    made: list[FullDisk] = []

    def temporary_file(*args, **kwargs):
        made.append(FullDisk())
        return made[-1]

    monkeypatch.setattr(json_rows.tempfile, "TemporaryFile", temporary_file if fails_after else FullDisk)
    monkeypatch.setattr(json_rows.SpilledTexts, "WINDOW", 700)
    rows = ResponseRows(frame, values)
    with caplog.at_level("WARNING", logger="metaeval.stats.scores"):
        rows.spill()
    assert rows._spilled is None and rows[:] == expected
    assert rows.json_text(1000, 2000) == json.dumps(expected[1000:2000], allow_nan=False)
    assert "kept in memory" in caplog.text and "No space left" in caplog.text
    assert all(file.closed for file in made)  # nothing half-written is kept open


def test_the_demo_studies_without_labels_give_the_former_reports(demo, db, monkeypatch):
    for slug in ("factcheck-gpt", "factscore-pref"):
        _assert_same_report(demo[slug], ReportOptions(n_resamples=30, by_domain=True, binary=True), monkeypatch)


def _seeded_verification(slug: str, seed: int, researcher, **settings) -> Study:
    """80 claims of 20 responses (4 each; 2 systems, 2 domains), 8 with a gold label, 2 used as checks, 1 to 5
    of 6 workers on each, a verifier on most, 2 abstentions, 2 adjudicated claims."""
    rng = random.Random(seed)
    study = create_study(
        slug=slug,
        name=slug,
        kind="verification",
        annotators_per_item=5,
        binary_map={"supported": "positive", "contradicted": "negative"},
        **settings,
    )
    add_members(study=study, usernames=[researcher.username], role="researcher")
    items = [
        verification_item(
            f"c-{k:02d}",
            response_id=f"r-{k // 4}",
            system="gpt" if k // 4 % 2 else "llama",
            domain="bio" if k // 8 % 2 else "sci",
            evidence=[],
            **({"gold": rng.choice(LABELS)} if k % 10 == 3 else {}),
        )
        for k in range(80)
    ]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    truth = {f"c-{k:02d}": rng.choice(LABELS) for k in range(80)}
    records = [
        {"item": item, "annotator": worker, "label": label if rng.random() < 0.65 else rng.choice(LABELS)}
        for item, label in truth.items()
        for worker in rng.sample(WORKERS, rng.randint(1, 5))
    ]
    import_annotations(study=study, stream=jsonl(*records), fmt="jsonl")
    predictions = [
        {"item": item, "verifier": "llm-x", "label": rng.choice(LABELS), "rationale": "r"}
        for item in truth
        if rng.random() < 0.9
    ]
    import_predictions(study=study, stream=jsonl(*predictions), fmt="jsonl")
    Item.objects.filter(study=study, external_id__in=["c-05", "c-17"]).update(is_check=True)
    Study.objects.filter(pk=study.pk).update(
        abstained_responses=[
            {"response_id": "r-90", "system": "gpt", "domain": "bio"},
            {"response_id": "r-91", "system": "llama", "domain": "sci"},
        ]
    )
    study.refresh_from_db()
    for external_id, label in (("c-01", "contradicted"), ("c-02", "supported")):
        item = Item.objects.get(study=study, external_id=external_id)
        adjudicate(item=item, adjudicator=researcher, verdict=verdict_for(study, label=label))
    study.refresh_from_db()
    return study


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"gold_in_agreement": False},
        {"checks_in_agreement": True},
        {"gold_in_agreement": False, "checks_in_agreement": True},
    ],
    ids=["default", "gold-out", "checks-in", "gold-out-checks-in"],
)
def test_seeded_verification_reports_are_the_former_ones(db, researcher, settings, monkeypatch):
    study = _seeded_verification("seeded-codes", 35, researcher, **settings)
    for options in OPTIONS:
        report = _assert_same_report(study, options, monkeypatch)
        assert report["scores"]["verifiers"] and report["n_disagreements"] > 5
        assert report["reference"]["counts"].get("adjudicated", 0) in (0, 2)
    for rule in AdjudicationRule.values:
        Study.objects.filter(pk=study.pk).update(adjudication_rule=rule)
        study.refresh_from_db()
        _assert_same_report(study, ReportOptions(n_resamples=20), monkeypatch)


def test_a_seeded_preference_report_is_the_former_one(db, researcher, monkeypatch):
    systems = ["veriscore", "safe"]
    study = create_study(slug="pref-codes", name="pref", kind="preference", systems=systems, annotators_per_item=3)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    items = [
        preference_item(
            f"p-{k:02d}",
            domain="bio" if k < 12 else "sci",
            lists={"veriscore": ["A claim."], "safe": ["Another claim."]},
            **({"gold": "a_slight"} if k >= 20 else {}),
        )
        for k in range(24)
    ]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    rng = random.Random(3)
    records = []
    for k in range(24):
        for slot, worker in enumerate(WORKERS[:3]):
            preferred = rng.choice([*systems, "tie"])
            record = {"item": f"p-{k:02d}", "annotator": worker, "left_system": systems[(k + slot) % 2]}
            record["preferred"] = preferred
            if preferred != "tie":
                record["strength"] = rng.choice(["slight", "strong"])
            records.append(record)
    import_annotations(study=study, stream=jsonl(*records), fmt="jsonl")
    for options in OPTIONS:
        _assert_same_report(study, options, monkeypatch)


# --- the pieces, one by one ---------------------------------------------------------------------------


def _label_rows(
    seed: int, *, n_items: int = 200, n_annotators: int = 6, shared_positions: bool = False, shared_name: bool = True
) -> LabelRows:
    """LabelRows as the study frame holds them: items in import order, each item's labels by annotator name
    (two members sharing one pseudonym), some labels off the categories, names not in import order."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(n_items)
    positions = np.arange(n_items) // 2 if shared_positions else np.arange(n_items)
    items = pd.DataFrame(
        {
            "id": np.arange(1, n_items + 1),
            "item": pd.array([f"x-{order[k]:04d}" for k in range(n_items)], dtype="str"),
            "domain": pd.array([("bio", "sci")[k % 2] for k in range(n_items)], dtype="str"),
            "response_id": pd.array([f"r-{k // 3}" for k in range(n_items)], dtype="str"),
            "system": pd.array(["gpt"] * n_items, dtype="str"),
            "gold_label": pd.array(["supported" if k % 9 == 0 else "" for k in range(n_items)], dtype="str"),
            "position": positions.astype("int64"),
            "is_check": np.zeros(n_items, dtype=bool),
        }
    )
    names = sorted([f"a{k:02d}" for k in range(n_annotators - 1)] + ["a01" if shared_name else "a99"])  # a01 twice
    place, annotator, label = [], [], []
    for k in range(n_items):
        for who in sorted(rng.choice(n_annotators, size=int(rng.integers(1, min(n_annotators, 7))), replace=False)):
            place.append(k)
            annotator.append(int(who))
            label.append(str(rng.choice([*LABELS, "skip"], p=[0.5, 0.25, 0.2, 0.05])))
    return LabelRows(
        items=items[["id", *ITEM_COLUMNS, "is_check"]],
        place=np.array(place, dtype=np.int64),
        annotator=np.array(annotator, dtype=np.int64),
        annotator_names=pd.array(names, dtype="str"),
        label=pd.array(label, dtype="str"),
        left_system=pd.array([""] * len(place), dtype="str"),
    )


def _on_scale(rows: LabelRows) -> pd.DataFrame:
    frame = rows.frame()
    return frame.loc[frame["label"].isin(LABELS), ["item", "annotator", "label"]]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_codes_give_the_strings_tables_and_encodings(seed):
    rows = _label_rows(seed)
    on_scale = _on_scale(rows)
    old = aggregation._encode(on_scale, LABELS, "item", "annotator", "label")
    new = rows.ratings(LABELS)
    for name in ("item", "annotator", "label"):
        np.testing.assert_array_equal(getattr(new, name), getattr(old, name), err_msg=name)
    pd.testing.assert_index_equal(new.items, old.items, exact=True)
    pd.testing.assert_index_equal(new.annotators, old.annotators, exact=True)
    assert new.categories == old.categories
    for fit in (stats.dawid_skene, stats.mace):
        a, b = fit(new, LABELS), fit(on_scale, LABELS)
        pd.testing.assert_frame_equal(a.posteriors, b.posteriors, check_exact=True)
        pd.testing.assert_series_equal(a.annotator_accuracy, b.annotator_accuracy, check_exact=True)
        assert (a.log_likelihood, a.n_iter, a.converged) == (b.log_likelihood, b.n_iter, b.converged)
    # the majority's table: by pseudonym, as build_table groups the strings (one pseudonym of two members rating
    # one item twice is the same error both ways)
    for labels in (rows, _label_rows(seed, shared_name=False)):
        try:
            built = stats.build_table(_on_scale(labels), LABELS)
        except ValueError as error:
            with pytest.raises(ValueError) as raised:
                labels.name_table(LABELS)
            assert str(raised.value) == str(error)
            continue
        table = labels.name_table(LABELS)
        pd.testing.assert_index_equal(table.item_index, built.item_index, exact=True)
        pd.testing.assert_index_equal(table.annotator_index, built.annotator_index, exact=True)
        for name in ("item_code", "annotator_code", "label_code", "counts"):
            np.testing.assert_array_equal(getattr(table, name), getattr(built, name), err_msg=name)
    np.testing.assert_array_equal(rows.label_codes(LABELS), pd.Index(LABELS).get_indexer(rows.label))
    reference = pd.Series(_reference_of(seed, new.items), index=new.items)
    quality_new = stats.annotator_quality(new, LABELS, reference, n_resamples=40)
    quality_old = stats.annotator_quality(rows.frame(), LABELS, reference, n_resamples=40)
    assert stats.json_ready(quality_new) == stats.json_ready(quality_old)


def _reference_of(seed: int, items: pd.Index) -> list:
    rng = np.random.default_rng(seed + 100)
    return [str(label) if label != "none" else None for label in rng.choice([*LABELS, "none"], size=len(items))]


@pytest.mark.parametrize("seed", [4, 5])
def test_the_reference_from_codes_is_the_former_one_for_every_rule(seed):
    rows = _label_rows(seed, shared_name=False)
    frame = rows.frame()
    adjudicated = pd.Series({"x-0003": "contradicted", "x-0150": "supported", "x-9999": "supported"}, dtype=object)
    common = {
        "labels": frame[["item", "annotator", "label"]],
        "items": rows.items[["item", "gold_label"]],
        "categories": LABELS,
        "adjudicated": adjudicated,
    }
    for rule in REFERENCE_RULES:
        new = reference_labels(rule, ReferenceInputs(**common, codes=rows))
        old = reference_labels(rule, ReferenceInputs(**common))
        pd.testing.assert_series_equal(new.labels, old.labels, check_exact=True)
        pd.testing.assert_series_equal(new.source, old.source, check_exact=True)
        assert new.n_items == old.n_items and new.summary() == old.summary()


@pytest.mark.parametrize("shared_positions", [False, True])
@pytest.mark.parametrize("seed", [6, 7])
def test_the_disagreement_list_from_codes_is_the_frames(seed, shared_positions, monkeypatch):
    rows = _label_rows(seed, shared_positions=shared_positions)
    old = disagreements(rows.frame())
    assert disagreements(rows) == old and len(old) > 20
    with lazy_response_rows():
        lazy = disagreements(rows)
    if shared_positions:  # two items at one position, names out of order: the frame's sort, as before
        assert isinstance(lazy, list) and lazy == old
        return
    assert isinstance(lazy, DisagreementRows) and len(lazy) == len(old)
    assert lazy[:] == old and lazy[3] == old[3] and lazy[-1] == old[-1] and lazy[5:40:7] == old[5:40:7]
    monkeypatch.setattr(json_rows.RecordWindows, "WINDOW", 17)  # the texts written a few windows at a time
    monkeypatch.setattr(json_rows.SpilledTexts, "WINDOW", 13)
    monkeypatch.setattr(disagreements_module, "SPILL_MIN_DISAGREEMENTS", len(old))
    with lazy_response_rows():
        spilled = disagreements(rows)  # long enough: its text written to a file as it is built
    assert spilled._spilled is not None and lazy._spilled is None
    for listed in (lazy, spilled):
        for size in (1, 7, 50, 1000):
            texts = [listed.json_text(n, n + size) for n in range(0, len(listed) + size, size)]
            assert texts == [json.dumps(old[n : n + size], allow_nan=False) for n in range(0, len(old) + size, size)]
    assert spilled[:] == old and spilled[3] == old[3] and spilled[-1] == old[-1] and spilled[5:40:7] == old[5:40:7]


def test_the_disagreements_labels_texts_take_either_key():
    """Each item's labels as one number (few annotators) or by its bytes (too many to pack)."""
    values = np.array([0, 1, 2, 0, 1, 2, 5, 5, 0, 1, 2], dtype=np.int64)
    lows, highs = np.array([0, 3, 6, 8]), np.array([3, 6, 8, 11])
    packed = disagreements_module._sequence_keys(values, lows, highs)
    assert packed[0] == packed[1] == packed[3] and len(set(packed.tolist())) == 2
    wide = np.repeat(np.arange(40, dtype=np.int64), 3) * 97
    bounds = np.arange(0, 121, 30)
    keys = disagreements_module._sequence_keys(
        np.r_[wide, wide], np.r_[bounds[:-1], 120 + bounds[:-1]], np.r_[bounds[1:], 120 + bounds[1:]]
    )
    assert keys.tolist()[:4] == keys.tolist()[4:] and len(set(keys.tolist())) == 4


@pytest.mark.parametrize("seed", [8, 9])
def test_the_adjudication_queue_from_codes_is_the_frames(seed, monkeypatch):
    rows = _label_rows(seed)
    monkeypatch.setattr(queue_module, "excluded_annotator_ids", lambda *args, **kwargs: set())
    for rule in (AdjudicationRule.NO_MAJORITY, AdjudicationRule.NO_UNANIMITY, AdjudicationRule.AUDIT):
        study = Study(adjudication_rule=rule, adjudication_audit_share=0.3)
        from_codes = queue_size_with(study, rows, include_screened_out=False)
        assert from_codes == queue_size_with(study, rows.frame(), include_screened_out=False)
        assert from_codes > 0


# --- the long lists' JSON text ------------------------------------------------------------------------


def _records(seed: int, n: int, *, negative_zero: bool = False) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Per-response-like columns: unique and repeated strings (quotes, %, accents, control characters), flags,
    small and huge ints, floats that repeat and that do not, NaN standing for None, a mixed column."""
    rng = np.random.default_rng(seed)
    scores = rng.choice([0.0, 0.5, 1.0, 1 / 3, np.nan], size=n)
    if negative_zero:
        scores[::7] = -0.0
    frame = pd.DataFrame(
        {
            "response_id": [f'r-{k} "q" 100% é\x01' for k in range(n)],
            "system": rng.choice(["gpt", "llama", 'ünï "x"'], size=n).astype(object),
            "answered": rng.random(n) < 0.9,
            "supported": rng.integers(0, 5, size=n),
            "n_claims": rng.integers(0, 10**15, size=n),
            "factscore": scores,
            "precision": rng.random(n) * 10.0 ** rng.integers(-300, 300, size=n),
            "k": np.where(rng.random(n) < 0.2, np.nan, 7.0),
            "mixed": rng.choice(np.array([1, 1.0, True, None, "1", 2.5], dtype=object), size=n),
        }
    )
    return frame, ("factscore", "precision", "k", "mixed")


@pytest.mark.parametrize("negative_zero", [False, True])
@pytest.mark.parametrize("seed", [10, 11])
def test_response_rows_write_the_text_json_writes(seed, negative_zero, monkeypatch):
    frame, values = _records(seed, 2500, negative_zero=negative_zero)
    rows = ResponseRows(frame, values)
    records = rows[:]
    assert any(record["k"] is None for record in records) and any(record["mixed"] is True for record in records)
    for window in (json_rows.RecordWindows.WINDOW, 300):
        monkeypatch.setattr(json_rows.RecordWindows, "WINDOW", window)
        for size in (1000, 333, 1):
            fresh = ResponseRows(frame, values)
            if size == 333:  # its text kept in a temporary file (issue 35): the same text read back
                fresh.spill()
                assert fresh[:] == records and fresh[2499] == records[2499] and fresh[::-7] == records[::-7]
            starts = list(range(0, 2500 + size, size))[:40] if size == 1 else range(0, 2500 + size, size)
            for start in starts:
                assert fresh.json_text(start, start + size) == json.dumps(
                    records[start : start + size], allow_nan=False
                )


def test_response_rows_refuse_what_json_refuses():
    frame = pd.DataFrame({"response_id": ["a", "b"], "ratio": [1.0, np.inf], "score": [np.nan, 1.0]})
    for rows in (ResponseRows(frame, ("score",)), ResponseRows(frame.assign(ratio=[1.0, np.nan]), ("score",))):
        with pytest.raises(ValueError, match="not JSON compliant"):
            json.dumps(rows[:], allow_nan=False)
        with pytest.raises(ValueError, match="not JSON compliant"):
            rows.json_text(0, 2)
    assert ResponseRows(frame.iloc[:0], ()).json_text(0, 1000) == json.dumps([]) == "[]"


def test_the_record_texts_are_json_dumps_of_the_records():
    rng = np.random.default_rng(12)
    n = 400
    columns = {
        "few": rng.choice(np.array(["a", "b"], dtype=object), size=n),
        "many": np.array([f"x{k}" for k in rng.integers(0, 10**6, size=n)], dtype=object),
        "flag": rng.random(n) < 0.5,
        "int": rng.integers(-3, 3, size=n),
        "float": rng.choice([0.1, 0.2, 1e-7, 12345678901234567.0], size=n),
        "none": np.array([None] * n, dtype=object),
    }
    names = list(columns)
    texts = json_rows.record_texts(names, [json_rows.coded(column) for column in columns.values()])
    records = [
        dict(zip(names, values, strict=True)) for values in zip(*(c.tolist() for c in columns.values()), strict=True)
    ]
    assert json_rows.json_list(texts) == json.dumps(records, allow_nan=False)
    assert json_rows.json_list([]) == json.dumps([])


def test_claims_with_a_label_are_counted_as_isin_counts_them():
    """``_n_on_claims`` counts the mapped labels only where that is ``isin``: no missing label, a unique index."""
    scores_module = importlib.import_module("metaeval.reporting.scores")
    claims = pd.DataFrame({"item": pd.array(["a", "b", "c", "d"], dtype="str")})
    for labelled in (
        pd.Series({"a": "x", "c": "y", "z": "x"}, dtype=object),
        pd.Series({"a": "x", "c": None, "d": np.nan}, dtype=object),
        pd.Series(["x", "y", "x"], index=["a", "a", "b"], dtype=object),
    ):
        on_claims = lambda given: claims["item"].map(given.groupby(level=0).first())  # noqa: E731
        expected = int(claims["item"].isin(labelled.index).sum())
        assert scores_module._n_on_claims(claims, labelled, on_claims) == expected
