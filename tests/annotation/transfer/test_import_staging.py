"""Big item imports do not hold the write lock for the whole file (issue 10, §2).

Rows are staged a batch per short transaction while the file is read, then
switched live in one transaction; to the user it stays all or nothing. The
tests watch the import from inside the file it reads: a stream that runs code
when the importer reaches a given line.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections, transaction

from annotation.errors import ImportFailed
from annotation.models import Annotation, Assignment, Item, StudyMember
from annotation.transfer.services import annotation_import, item_import
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import claim_next
from tests.conftest import verification_item


class WatchedFile(io.RawIOBase):
    """A JSONL file of `n` items that calls `on_line(n)` when the importer reads line `at`."""

    def __init__(self, n: int, at: int, on_line: Callable[[], None], *, first: int = 1) -> None:
        self.lines = [json.dumps(verification_item(f"c-{k}")).encode() + b"\n" for k in range(first, first + n)]
        self.at, self.on_line = at, on_line
        self.served = 0
        self.buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:
        while not self.buffer and self.served < len(self.lines):
            self.served += 1
            if self.served == self.at:
                self.on_line()
            self.buffer = self.lines[self.served - 1]
        chunk, self.buffer = self.buffer[: len(target)], self.buffer[len(target) :]
        target[: len(chunk)] = chunk
        return len(chunk)


def reader(raw: io.RawIOBase) -> io.BufferedReader:
    return io.BufferedReader(raw, buffer_size=64)


def staging_tables() -> list[str]:
    """The temporary staging tables this connection holds."""
    query = (
        "SELECT name FROM sqlite_temp_master WHERE type = 'table'"
        if connection.vendor == "sqlite"
        else "SELECT tablename FROM pg_tables WHERE schemaname LIKE 'pg_temp%%'"
    )
    with connection.cursor() as cursor:
        cursor.execute(query)
        return [name for (name,) in cursor.fetchall() if name.startswith("claimlab_staging_")]


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(item_import, "BATCH_SIZE", 10)


def from_another_connection(query: Callable[[], object]) -> object:
    """What `query` gives on a connection of its own (another request's view of the database)."""
    answer: dict[str, object] = {}

    def work() -> None:
        try:
            answer["value"] = query()
        finally:
            connections.close_all()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=60)
    return answer["value"]


@pytest.mark.django_db(transaction=True)
def test_the_file_is_read_holding_nothing_others_wait_for(verification_study, small_batches):
    """SQLite: an open write transaction is the database's one write lock, so rows are staged with none open.
    PostgreSQL: the rows go straight into the item table in the import's own transaction (item_copy.py),
    invisible to every other connection until it commits."""
    seen: dict[str, object] = {}

    def look() -> None:
        seen["in_transaction"] = connection.in_atomic_block
        if connection.vendor == "sqlite":  # PostgreSQL: the connection is in the middle of a COPY
            seen["staging_tables"] = len(staging_tables())
        seen["seen_elsewhere"] = from_another_connection(
            lambda: Item.objects.filter(study_id=verification_study.pk).count()
        )

    import_items(study=verification_study, stream=reader(WatchedFile(50, at=35, on_line=look)), fmt="jsonl")
    if connection.vendor == "sqlite":
        assert seen == {"in_transaction": False, "staging_tables": 1, "seen_elsewhere": 0}
    else:
        assert seen == {"in_transaction": True, "seen_elsewhere": 0}
    assert Item.objects.filter(study=verification_study).count() == 50
    assert staging_tables() == []


@pytest.mark.django_db(transaction=True)
def test_another_writer_commits_while_a_big_import_is_read(verification_study, small_batches):
    """A second connection (an annotator's request) writes and commits in the middle of the import."""
    outcome: dict[str, object] = {}

    def annotator_writes() -> None:
        def work() -> None:
            try:
                with transaction.atomic():
                    type(verification_study).objects.filter(pk=verification_study.pk).update(name="renamed mid-import")
                outcome["ok"] = True
            except Exception as exc:  # the test reports what the other writer met
                outcome["error"] = repr(exc)
            finally:
                connections.close_all()

        thread = threading.Thread(target=work)
        thread.start()
        thread.join(timeout=60)

    import_items(study=verification_study, stream=reader(WatchedFile(40, at=25, on_line=annotator_writes)), fmt="jsonl")
    assert outcome == {"ok": True}
    verification_study.refresh_from_db()
    assert verification_study.name == "renamed mid-import"
    assert Item.objects.filter(study=verification_study).count() == 40


@pytest.mark.django_db(transaction=True)
def test_rows_are_invisible_until_the_switch(verification_study, small_batches):
    counted: list[object] = []

    def count_elsewhere() -> None:
        counted.append(from_another_connection(lambda: Item.objects.filter(study_id=verification_study.pk).count()))

    import_items(study=verification_study, stream=reader(WatchedFile(30, at=25, on_line=count_elsewhere)), fmt="jsonl")
    assert counted == [0]
    positions = list(Item.objects.filter(study=verification_study).values_list("position", flat=True))
    assert positions == list(range(1, 31))


@pytest.mark.django_db
def test_a_late_error_leaves_nothing_live_or_staged(verification_study, small_batches):
    lines = [json.dumps(verification_item(f"c-{k}")) for k in range(1, 40)] + ['{"id": "broken"']
    with pytest.raises(ImportFailed) as failed:
        import_items(study=verification_study, stream=io.BytesIO("\n".join(lines).encode()), fmt="jsonl")
    assert failed.value.errors[0].line == 40
    assert not Item.objects.filter(study=verification_study).exists()
    assert staging_tables() == []


@pytest.mark.django_db
def test_an_id_added_by_another_import_meanwhile_is_named_by_line(verification_study, small_batches):
    """Two imports of the same new id: the second one to switch fails and says which line.

    (An update import: it stages on either database. One that only adds items on PostgreSQL holds
    the study's import lock from its start: the next test.)"""

    def other_import() -> None:
        import_items(
            study=verification_study, stream=io.BytesIO(json.dumps(verification_item("c-33")).encode()), fmt="jsonl"
        )

    with pytest.raises(ImportFailed) as failed:
        import_items(
            study=verification_study,
            stream=reader(WatchedFile(40, at=12, on_line=other_import)),
            fmt="jsonl",
            update=True,
        )
    assert [(error.line, error.field) for error in failed.value.errors] == [(33, "id")]
    assert "added to the study by another import" in failed.value.errors[0].message
    assert list(Item.objects.filter(study=verification_study).values_list("external_id", flat=True)) == ["c-33"]
    assert staging_tables() == []


@pytest.mark.django_db(transaction=True)
def test_imports_of_one_study_take_turns(verification_study, small_batches):
    """Another request imports while a big import reads its file: on PostgreSQL it waits for the first to commit
    (the study's import lock), then reads the study as it is; on SQLite the switch checks for ids taken
    meanwhile. Either way one id is stored once and every position is a new one."""
    outcome: dict[str, object] = {}
    threads: list[threading.Thread] = []

    def import_elsewhere(first: int, count: int) -> None:
        lines = b"".join(json.dumps(verification_item(f"c-{k}")).encode() + b"\n" for k in range(first, first + count))
        try:
            outcome[f"c-{first}"] = import_items(
                study=verification_study, stream=io.BytesIO(lines), fmt="jsonl"
            ).created
        except ImportFailed as failed:
            outcome[f"c-{first}"] = [(error.line, error.field) for error in failed.errors]
        finally:
            connections.close_all()

    def start_others() -> None:
        for first, count in ((41, 5), (39, 1)):  # new ids only; c-39 is also in the big file, line 39
            threads.append(threading.Thread(target=import_elsewhere, args=(first, count)))
            threads[-1].start()
        if connection.vendor == "sqlite":  # no lock to wait on: let them finish before the big import switches
            for thread in threads:
                thread.join(timeout=60)

    try:
        result = import_items(
            study=verification_study, stream=reader(WatchedFile(40, at=12, on_line=start_others)), fmt="jsonl"
        )
    except ImportFailed as failed:
        result = None
        outcome["big"] = [(error.line, error.field) for error in failed.errors]
    for thread in threads:
        thread.join(timeout=60)
    stored = list(
        Item.objects.filter(study=verification_study).order_by("position").values_list("external_id", "position")
    )
    positions = [position for _, position in stored]
    assert len(set(positions)) == len(positions) and min(positions) == 1
    assert outcome["c-41"] == 5
    if connection.vendor == "sqlite":  # the two small imports switched first; the big one found c-39 taken
        assert outcome["big"] == [(39, "id")] and outcome["c-39"] == 1 and result is None
        assert sorted(external_id for external_id, _ in stored) == sorted(["c-39", *(f"c-{k}" for k in range(41, 46))])
    else:  # the big import committed first; the other import of c-39 then found it stored
        assert result is not None and result.created == 40
        assert outcome["c-39"] == [(1, "id")]
        assert [external_id for external_id, _ in stored][:40] == [f"c-{k}" for k in range(1, 41)]
        assert positions == list(range(1, 46))


@pytest.mark.django_db
def test_updates_and_new_items_switch_together_positions_after_existing(verification_study, small_batches):
    import_items(study=verification_study, stream=reader(WatchedFile(5, at=0, on_line=lambda: None)), fmt="jsonl")
    changed = [verification_item(f"c-{k}", claim=f"Changed claim {k}.") for k in (2, 4)]
    new = [verification_item(f"c-{k}") for k in (6, 7)]
    body = "\n".join(json.dumps(record) for record in [*changed, *new]).encode()
    result = import_items(study=verification_study, stream=io.BytesIO(body), fmt="jsonl", update=True)
    assert (result.created, result.updated) == (2, 2)
    items = {item.external_id: item for item in Item.objects.filter(study=verification_study)}
    assert items["c-2"].payload["claim"] == "Changed claim 2." and items["c-4"].payload["claim"] == "Changed claim 4."
    assert items["c-1"].payload["claim"] != "Changed claim 1."
    assert [items[f"c-{k}"].position for k in (6, 7)] == [6, 7]
    assert items["c-2"].position == 2


class WatchedLabels(WatchedFile):
    """A JSONL file of labels by `annotators` on items c-1..c-n."""

    def __init__(self, n: int, at: int, on_line: Callable[[], None], annotators: tuple[str, ...] = ("w1",)) -> None:
        super().__init__(0, at, on_line)
        self.lines = [
            json.dumps({"item": f"c-{k}", "annotator": name, "label": "supported"}).encode() + b"\n"
            for k in range(1, n + 1)
            for name in annotators
        ]


def items_for(study, n: int) -> None:
    import_items(study=study, stream=reader(WatchedFile(n, at=0, on_line=lambda: None)), fmt="jsonl")


@pytest.mark.django_db(transaction=True)
def test_no_transaction_is_open_while_a_label_file_is_read(verification_study, monkeypatch):
    monkeypatch.setattr(annotation_import, "BATCH_SIZE", 10)
    items_for(verification_study, 30)
    seen: dict[str, object] = {}

    def look() -> None:
        seen["in_transaction"] = connection.in_atomic_block
        seen["live"] = Annotation.objects.filter(assignment__study=verification_study).count()

    result = import_annotations(
        study=verification_study,
        stream=reader(WatchedLabels(30, at=50, on_line=look, annotators=("w1", "w2"))),
        fmt="jsonl",
    )
    assert seen == {"in_transaction": False, "live": 0}
    assert result.created == 60
    assert Annotation.objects.filter(assignment__study=verification_study).count() == 60
    assert set(Item.objects.filter(study=verification_study).values_list("slots_taken", flat=True)) == {2}
    assert staging_tables() == []


@pytest.mark.django_db
def test_a_failed_label_import_leaves_no_new_annotator_identity(verification_study):
    items_for(verification_study, 3)
    members_before = set(StudyMember.objects.filter(study=verification_study).values_list("pk", flat=True))
    users_before = User.objects.count()
    body = "\n".join(
        [
            json.dumps({"item": "c-1", "annotator": "new-person", "label": "supported"}),
            json.dumps({"item": "c-2", "annotator": "another", "label": "supported"}),
            json.dumps({"item": "c-3", "annotator": "another", "label": "not-a-label"}),
        ]
    )
    with pytest.raises(ImportFailed) as failed:
        import_annotations(study=verification_study, stream=io.BytesIO(body.encode()), fmt="jsonl")
    assert [error.line for error in failed.value.errors] == [3]
    assert set(StudyMember.objects.filter(study=verification_study).values_list("pk", flat=True)) == members_before
    assert User.objects.count() == users_before
    assert not Annotation.objects.exists()


@pytest.mark.django_db
def test_a_slot_given_to_an_annotator_meanwhile_is_named_by_line(verification_study, annotator):
    """N = 3; the file fills all three slots of c-2 while a live annotator takes one of them."""
    items_for(verification_study, 3)

    def annotator_claims_c2() -> None:
        Item.objects.filter(study=verification_study).exclude(external_id="c-2").update(slots_taken=3)
        assignment = claim_next(user=annotator, study=verification_study)
        assert assignment is not None and assignment.item.external_id == "c-2"

    labels = WatchedLabels(2, at=2, on_line=annotator_claims_c2, annotators=("w1", "w2", "w3"))
    with pytest.raises(ImportFailed) as failed:
        import_annotations(study=verification_study, stream=reader(labels), fmt="jsonl")
    assert [error.line for error in failed.value.errors] == [4]  # c-2 by w1 was to take slot 0
    assert "was given to an annotator while this file was being read" in failed.value.errors[0].message
    assert not Annotation.objects.exists()
    assert Assignment.objects.filter(study=verification_study).count() == 1  # only the live annotator's
