"""Big prediction imports do not hold the write lock while the file is read (issue 31), like item imports.

The file is parsed and checked with no transaction open, its rows staged in a
private temporary table a batch at a time, then switched live in one short
transaction; to the user it stays all or nothing. As in
tests/annotation/transfer/test_import_staging.py, the tests watch the import
from inside the file it reads.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable

import pytest
from django.db import connection, connections, transaction

from annotation.errors import ImportFailed
from annotation.models import Study
from metaeval.models import Prediction, Verifier
from metaeval.verifiers.services import import_predictions, prediction_import
from tests.annotation.transfer.test_import_staging import (
    WatchedFile,
    from_another_connection,
    items_for,
    reader,
    staging_tables,
)


class WatchedPredictions(WatchedFile):
    """A JSONL file of `verifier`'s predictions on items c-1..c-n that calls `on_line()` at line `at`."""

    def __init__(self, n: int, at: int, on_line: Callable[[], None], *, verifier: str = "minicheck") -> None:
        super().__init__(0, at, on_line)
        self.lines = [
            json.dumps({"item": f"c-{k}", "verifier": verifier, "label": "supported", "score": k / n}).encode() + b"\n"
            for k in range(1, n + 1)
        ]


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(prediction_import, "BATCH_SIZE", 10)


def predictions_of(study: Study) -> int:
    return Prediction.objects.filter(verifier__study=study).count()


@pytest.mark.django_db(transaction=True)
def test_a_prediction_file_is_read_holding_nothing_others_wait_for(verification_study, small_batches):
    """SQLite: an open write transaction is the database's one write lock, so rows are staged with none open.
    PostgreSQL: the rows (and the verifier the file makes) go straight into their tables in the import's own
    transaction (prediction_copy.py), invisible to every other connection until it commits."""
    items_for(verification_study, 50)
    seen: dict[str, object] = {}

    def look() -> None:
        seen["in_transaction"] = connection.in_atomic_block
        if connection.vendor == "sqlite":  # PostgreSQL: the connection is in the middle of a COPY
            seen["staging_tables"] = len(staging_tables())
        seen["seen_elsewhere"] = from_another_connection(
            lambda: (predictions_of(verification_study), Verifier.objects.filter(study=verification_study).count())
        )

    result = import_predictions(
        study=verification_study, stream=reader(WatchedPredictions(50, at=35, on_line=look)), fmt="jsonl"
    )
    # SQLite: rows 1-30 are staged by then (batches of 10), none live, and the new verifier not yet made.
    if connection.vendor == "sqlite":
        assert seen == {"in_transaction": False, "staging_tables": 1, "seen_elsewhere": (0, 0)}
    else:
        assert seen == {"in_transaction": True, "seen_elsewhere": (0, 0)}
    assert (result.created, result.updated, result.records) == (50, 0, 50)
    assert predictions_of(verification_study) == 50
    assert list(Verifier.objects.filter(study=verification_study).values_list("name", "kind")) == [
        ("minicheck", "imported")
    ]
    assert staging_tables() == []


@pytest.mark.django_db(transaction=True)
def test_an_annotator_commits_while_a_big_prediction_file_is_read(verification_study, small_batches):
    """A second connection (an annotator's request) writes and commits in the middle of the import.

    Were the import one transaction (as it was), on SQLite this writer would wait for the
    whole file and fail with "database is locked" past the busy timeout.
    """
    items_for(verification_study, 40)
    outcome: dict[str, object] = {}

    def annotator_writes() -> None:
        def work() -> None:
            try:
                with transaction.atomic():
                    Study.objects.filter(pk=verification_study.pk).update(name="renamed mid-import")
                outcome["ok"] = True
            except Exception as exc:  # the test reports what the other writer met
                outcome["error"] = repr(exc)
            finally:
                connections.close_all()

        thread = threading.Thread(target=work)
        thread.start()
        thread.join(timeout=60)

    import_predictions(
        study=verification_study, stream=reader(WatchedPredictions(40, at=25, on_line=annotator_writes)), fmt="jsonl"
    )
    assert outcome == {"ok": True}
    verification_study.refresh_from_db()
    assert verification_study.name == "renamed mid-import"
    assert predictions_of(verification_study) == 40


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_bad_last_line_leaves_nothing_live_or_staged(verification_study, small_batches, fmt):
    """All or nothing still: 39 good predictions (staged in batches) and one bad line at the end."""
    items_for(verification_study, 40)
    good = [{"item": f"c-{k}", "verifier": "minicheck", "label": "supported"} for k in range(1, 40)]
    bad = {"item": "c-40", "verifier": "minicheck", "label": "mostly true"}
    if fmt == "jsonl":
        body = "\n".join(json.dumps(record) for record in [*good, bad]).encode()
    else:
        body = ("item,verifier,label\n" + "".join(f"{r['item']},{r['verifier']},{r['label']}\n" for r in good)).encode()
        body += b"c-40,minicheck,mostly true\n"
    with pytest.raises(ImportFailed) as failed:
        import_predictions(study=verification_study, stream=io.BytesIO(body), fmt=fmt)
    assert [(error.line, error.field) for error in failed.value.errors] == [(40 if fmt == "jsonl" else 41, "label")]
    assert predictions_of(verification_study) == 0
    assert not Verifier.objects.filter(study=verification_study).exists()
    assert staging_tables() == []


@pytest.mark.django_db
def test_updates_and_new_predictions_switch_together(verification_study, small_batches):
    items_for(verification_study, 5)
    import_predictions(
        study=verification_study, stream=reader(WatchedPredictions(3, at=0, on_line=lambda: None)), fmt="jsonl"
    )
    lines = [
        {"item": "c-2", "verifier": "minicheck", "label": "contradicted", "score": 0.1},
        {"item": "c-4", "verifier": "minicheck", "label": "inconclusive"},
        {"item": "c-1", "verifier": "other", "label": "supported", "rationale": "Because."},
    ]
    body = "\n".join(json.dumps(record) for record in lines).encode()
    result = import_predictions(study=verification_study, stream=io.BytesIO(body), fmt="jsonl", update=True)
    assert (result.created, result.updated) == (2, 1)
    rows = {
        (p.verifier.name, p.item.external_id): (p.label, p.score, p.rationale, p.parse_status, p.cache_key)
        for p in Prediction.objects.select_related("verifier", "item")
    }
    assert rows[("minicheck", "c-2")] == ("contradicted", 0.1, "", "ok", "imported")
    assert rows[("minicheck", "c-4")] == ("inconclusive", None, "", "ok", "imported")
    assert rows[("other", "c-1")] == ("supported", None, "Because.", "ok", "imported")
    assert rows[("minicheck", "c-1")][0] == "supported"
    assert len(rows) == 5
    assert Prediction.objects.get(verifier__name="other").order_labels == []


@pytest.mark.django_db
def test_a_prediction_added_by_another_import_meanwhile_is_named_by_line(verification_study, small_batches):
    items_for(verification_study, 30)

    def other_import() -> None:
        body = json.dumps({"item": "c-22", "verifier": "minicheck", "label": "contradicted"}).encode()
        import_predictions(study=verification_study, stream=io.BytesIO(body), fmt="jsonl")

    with pytest.raises(ImportFailed) as failed:  # an update import: it stages on either database (prediction_copy.py)
        import_predictions(
            study=verification_study,
            stream=reader(WatchedPredictions(30, at=12, on_line=other_import)),
            fmt="jsonl",
            update=True,
        )
    assert [(error.line, error.field) for error in failed.value.errors] == [(22, "item")]
    assert "from another import while this file was being read" in failed.value.errors[0].message
    assert list(Prediction.objects.values_list("item__external_id", "label")) == [("c-22", "contradicted")]
    assert staging_tables() == []


@pytest.mark.django_db
def test_a_name_taken_by_another_kind_of_verifier_meanwhile_is_named_by_line(verification_study, small_batches):
    items_for(verification_study, 20)

    def someone_makes_a_baseline() -> None:
        Verifier.objects.create(study=verification_study, name="minicheck", kind=Verifier.Kind.BASELINE_MAJORITY)

    with pytest.raises(ImportFailed) as failed:  # an update import: it stages on either database
        import_predictions(
            study=verification_study,
            stream=reader(WatchedPredictions(20, at=5, on_line=someone_makes_a_baseline)),
            fmt="jsonl",
            update=True,
        )
    assert [(error.line, error.field) for error in failed.value.errors] == [(1, "verifier")]
    assert "became a baseline_majority verifier" in failed.value.errors[0].message
    assert not Prediction.objects.exists()
    assert list(Verifier.objects.values_list("name", "kind")) == [("minicheck", "baseline_majority")]
