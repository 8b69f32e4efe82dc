"""A big report's assignment, answer and item reads run side by side in one snapshot (metaeval.snapshot_reads).

On PostgreSQL, inside the report build's REPEATABLE READ transaction, the answer and item reads run
on connections of their own that import the build's snapshot; anywhere else the reads run in line.
Either way the frames are the ones a single read would give, and nothing committed after the
build's snapshot reaches any of its reads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd
import pytest
from django.db import connection, transaction

from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval import selectors, snapshot_reads
from tests.conftest import jsonl, verification_item

# Here, not in tests/metaeval: the flush that ends a transaction=True test would also empty the
# demo studies that package's tests share (a package-scoped fixture, tests/metaeval/conftest.py).
pytestmark = pytest.mark.django_db(transaction=True)

ON_POSTGRES = connection.vendor == "postgresql"
ITEMS_OF_EVERY_STUDY = snapshot_reads.Query("SELECT count(*) FROM annotation_item", (), width=1)


def labelled_study(slug: str, n_items: int):
    study = create_study(slug=slug, name=slug, kind="verification", annotators_per_item=2)
    import_items(study=study, stream=jsonl(*(verification_item(f"c-{n:02d}") for n in range(n_items))), fmt="jsonl")
    labels = [
        {"item": f"c-{n:02d}", "annotator": who, "label": ("supported", "contradicted")[(n + k) % 2]}
        for n in range(n_items)
        for k, who in enumerate(("w2", "w1"))
    ]
    import_annotations(study=study, stream=jsonl(*labels), fmt="jsonl")
    return study


@contextmanager
def the_builds_transaction() -> Iterator[None]:
    """What metaeval.reporting.cache._built reads a report in: one REPEATABLE READ transaction (PostgreSQL)."""
    with transaction.atomic():
        if ON_POSTGRES:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


@pytest.fixture
def side_reads(monkeypatch) -> list[str]:
    """The queries read on a connection of their own."""
    ran: list[str] = []
    real = snapshot_reads._SideRead._run

    def counted(self):
        ran.append(self.query.sql)
        real(self)

    monkeypatch.setattr(snapshot_reads._SideRead, "_run", counted)
    return ran


def committed_elsewhere(work) -> None:
    """Run ``work`` on a connection of its own and commit it (another request, another annotator)."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # re-raised in the test's thread
            failures.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and not failures, failures


def test_the_builds_label_frame_reads_answers_and_items_alongside_and_equals_a_single_read(side_reads):
    study = labelled_study("alongside", 12)
    alone = selectors.label_frame(study, include_gold=True)
    assert side_reads == []  # outside a transaction: in line
    with the_builds_transaction():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")  # the snapshot is taken (the build reads the fingerprint first)
        in_build = selectors.label_frame(study, include_gold=True)
    pd.testing.assert_frame_equal(in_build, alone)
    assert len(alone) == 24 and alone["item"].iloc[0] == "c-00"
    assert alone.groupby("item")["annotator"].apply(list).map(lambda names: names == sorted(names)).all()
    # PostgreSQL: the answer and item reads ran on connections of their own; SQLite: one connection, in line
    assert len(side_reads) == (2 if ON_POSTGRES else 0)
    if ON_POSTGRES:
        answers, items = side_reads
        assert "annotation_annotation" in answers and "annotation_assignment" not in answers
        assert "annotation_item" in items and "annotation_annotation" not in items


def test_reads_alongside_do_not_see_what_was_committed_after_the_builds_snapshot(side_reads):
    if not ON_POSTGRES:
        assert connection.vendor == "sqlite"  # no snapshot to share: SQLite reads in line (test above)
        return
    study = labelled_study("snapshot", 3)
    with the_builds_transaction():
        with connection.cursor() as cursor:
            cursor.execute(ITEMS_OF_EVERY_STUDY.sql)
            before = cursor.fetchone()[0]
        committed_elsewhere(lambda: import_items(study=study, stream=jsonl(verification_item("c-late")), fmt="jsonl"))
        counts = snapshot_reads.column_lists([ITEMS_OF_EVERY_STUDY] * 3)
        frame = selectors.item_frame(study)
    assert len(side_reads) == 2  # two of the three counts ran on connections of their own
    assert counts == [[[before]]] * 3
    assert "c-late" not in set(frame["item"]) and len(frame) == 3
    with connection.cursor() as cursor:
        cursor.execute(ITEMS_OF_EVERY_STUDY.sql)
        assert cursor.fetchone()[0] == before + 1  # committed, and seen once the build's snapshot is gone


def test_a_transaction_that_has_written_reads_in_line_and_sees_its_own_rows(side_reads):
    study = labelled_study("written", 2)
    with the_builds_transaction():
        import_items(study=study, stream=jsonl(verification_item("c-mine")), fmt="jsonl")
        frame = selectors.item_frame(study)
        if ON_POSTGRES:
            counts = snapshot_reads.column_lists([ITEMS_OF_EVERY_STUDY] * 2)
            assert counts[0] == counts[1]
        transaction.set_rollback(True)
    assert side_reads == []  # another connection could not see the uncommitted item
    assert "c-mine" in set(frame["item"]) and len(frame) == 3


def test_a_read_whose_own_connection_fails_is_read_in_line(side_reads, monkeypatch, caplog):
    study = labelled_study("fallback", 4)
    alone = selectors.label_frame(study, include_gold=True)
    real_read = snapshot_reads._columns

    def no_connection_off_the_main_thread(query: snapshot_reads.Query) -> list[list]:
        if threading.current_thread() is not threading.main_thread():
            raise OSError("connection refused: too many clients")
        return real_read(query)

    monkeypatch.setattr(snapshot_reads, "_columns", no_connection_off_the_main_thread)
    with the_builds_transaction():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        in_build = selectors.label_frame(study, include_gold=True)
    pd.testing.assert_frame_equal(in_build, alone)
    assert len(side_reads) == (2 if ON_POSTGRES else 0)
    assert ("read in line" in caplog.text) is ON_POSTGRES
