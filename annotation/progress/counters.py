"""The counts the home page and a study's overview show, kept as counters instead of counted per page.

Why: counting a study's items and annotations on every view grew with the study
(issue 15: the overview took 2 s at 100,000 items on PostgreSQL). The pages now
read a few counter rows per study (models.DomainCount, models.AnnotatorCount).

Why counters and not cached aggregates: a cache needs a version that changes with
every label, and keeping that version exact costs the same write on every submit
as the counter itself, plus a full recount of the study whenever it changes.
N (annotators per item), which decides "complete", cannot change once the study
holds an annotation (studies.FROZEN_AFTER_ANNOTATION), and before that no item is
complete whatever N is, so no setting change touches the counters.

How they stay exact: every write that changes a count changes the counter in its
own transaction, so a rollback takes both back.

- A new answer (`answer_added`, called by workbench/answers.py, which creates annotations
  one at a time, and the same count inside PostgreSQL's one-statement submit,
  workbench/submit_sql.py, from `one_answer_counted`) adds one to the annotator's own row
  for the item's domain. It counts the answer on the item (`Item.n_answers`) with the UPDATE
  that locks the item row, and reads that count: of two annotators giving an item its
  last labels at once, the second waits for the first to commit and then counts on
  its count, so exactly one of them counts the item as complete.
- An annotation import adds what its staging table holds (`labels_switched`):
  per annotator and domain, and the items its labels took to N, with those items
  locked first as a submit locks its item. Its cost grows with the file, not the
  study (recounting a study of 300,000 labels takes seconds on PostgreSQL, and the
  submits of its annotators would wait on their counter rows meanwhile).
- An item import that only adds items adds its staged items per domain
  (`items_switched`); one that updates existing items (which may move them, and
  their labels, to another domain) recounts the study from its rows
  (`recount_study`), as a study copy does.

Each item's number of answers (`Item.n_answers`) also serves the progress page's
"complete" and "in progress" items; an import and a recount count it from the items' answers.

Hot rows: annotators never share a counter row (one row per study, annotator and
domain), and the counter write is the submit's last statement, so the item's row
lock (held by at most N annotators of that item) is the only wait added.
Answers changed later (revisions), skips, flags, adjudications and removing a
member change none of these counts; deleting a member is only allowed for one
who was never given an item, and deletes cascade from studies and users.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from annotation.lib.rawsql import execute, fetch_one, insert_returning_id, insert_statement, names
from annotation.models import (
    Annotation,
    AnnotatorCount,
    Assignment,
    DomainCount,
    Item,
    StagedAnnotation,
    StagedItem,
    Study,
)


def insert_locking_item(values: dict[str, Any], item_id: int) -> tuple[int, str]:
    """INSERT an annotation (values as `rawsql.insert_returning_id`), count it on its item and lock the item
    for `answer_added`: (the annotation's id, the item's domain), to pass on as `answer_added(domain=...)`.

    PostgreSQL: one statement for both (the submit's hot path). The label count must not be in it:
    a statement that waited for the lock still sees the data of when it started (the item's own
    answer count is an UPDATE, which counts on the row as it is once the lock is granted).
    """
    if not connection.features.has_select_for_update:
        return insert_returning_id(Annotation, values), count_on_item(item_id)
    item, annotation = names(Item), names(Annotation)
    insert, params = insert_statement(Annotation, values)
    row = fetch_one(
        f"WITH x AS ({insert} RETURNING {annotation.id}), "
        f"u AS (UPDATE {item.table} SET {item.n_answers} = {item.n_answers} + 1 WHERE {item.id} = %s "
        f"RETURNING {item.domain}) SELECT x.{annotation.id}, u.{item.domain} FROM x, u",
        [*params, item_id],
    )
    if row is None:
        raise ValueError(f"no item {item_id} to count an annotation on")
    return row[0], row[1]


def count_on_item(item_id: int) -> str:
    """Count one more answer on the item, which locks its row; its domain (SQLite: the transaction's
    write lock serialises instead)."""
    item = names(Item)
    row = fetch_one(
        f"UPDATE {item.table} SET {item.n_answers} = {item.n_answers} + 1 WHERE {item.id} = %s RETURNING {item.domain}",
        [item_id],
    )
    if row is None:
        raise ValueError(f"no item {item_id} to count an annotation on")
    return row[0]


def answer_added(*, study_id: int, item_id: int, user_id: int, complete_at: int, domain: str | None = None) -> None:
    """Count a new annotation by `user_id` on `item_id`; call in the transaction that inserted it, as late as possible.

    `complete_at`: the answers that complete the item (its assignment's `max_slots`: the study's
    slots per item, N or N per condition).
    `domain`: the item's, from `insert_locking_item` in this transaction (the item is locked and the
    answer counted on it then); without it both are done here.
    """
    item = names(Item)
    if domain is None:
        domain = count_on_item(item_id)
    # The item's answers as its locking UPDATE counted them: with every answer committed on it before
    # the lock, and this one (see the module's docstring).
    answers_on_item = f"(SELECT i.{item.n_answers} FROM {item.table} AS i WHERE i.{item.id} = %s)"
    execute(
        one_answer_counted(study_id="%s", user_id="%s", domain="%s", answers_on_item=answers_on_item, complete_at="%s"),
        [study_id, user_id, domain, item_id, complete_at],
    )


def one_answer_counted(
    *, study_id: str, user_id: str, domain: str, answers_on_item: str, complete_at: str, source: str = ""
) -> str:
    """The INSERT ... ON CONFLICT that counts one answer in its annotator's row, from SQL expressions:
    the study, the annotator, the item's domain and its number of answers with this one (complete
    when that is `complete_at`, the assignment's `max_slots`), over the rows of `source` ("" for one row).

    Shared by `answer_added` and the one-statement submit (workbench/submit_sql.py)."""
    counter = names(AnnotatorCount)
    n = complete_at
    return (
        f"INSERT INTO {counter.table} ({counter.study}, {counter.user}, {counter.domain}, {counter.annotations}, "
        f"{counter.complete}) SELECT {study_id}, {user_id}, {domain}, 1, "
        f"CASE WHEN {answers_on_item} = {n} THEN 1 ELSE 0 END "
        + (f"FROM {source} " if source else "")
        + "WHERE 1 = 1 "  # WHERE: SQLite's INSERT ... SELECT ... ON CONFLICT
        f"ON CONFLICT ({counter.study}, {counter.user}, {counter.domain}) DO UPDATE SET "
        f"{counter.annotations} = {counter.table}.{counter.annotations} + excluded.{counter.annotations}, "
        f"{counter.complete} = {counter.table}.{counter.complete} + excluded.{counter.complete}"
    )


def labels_switched(study: Study, staged_table: str) -> None:
    """Count the labels an annotation import has just inserted from `staged_table` (StagedAnnotation's columns).

    Call in the import's transaction right after its INSERTs; the items its labels
    are on were locked by `lock_staged_items` before them. An item is complete by
    this import when it holds N labels now and held fewer without the staged ones;
    it is counted in the row of its staged label with the highest annotator id.
    """
    item, staged, counter = names(Item), names(StagedAnnotation), names(AnnotatorCount)
    columns = f"{counter.study}, {counter.user}, {counter.domain}, {counter.annotations}, {counter.complete}"
    add = (
        f"ON CONFLICT ({counter.study}, {counter.user}, {counter.domain}) DO UPDATE SET "
        f"{counter.annotations} = {counter.table}.{counter.annotations} + excluded.{counter.annotations}, "
        f"{counter.complete} = {counter.table}.{counter.complete} + excluded.{counter.complete}"
    )
    execute(
        f"INSERT INTO {counter.table} ({columns}) SELECT %s, s.{staged.annotator_id}, i.{item.domain}, COUNT(*), 0 "
        f"FROM {staged_table} AS s JOIN {item.table} AS i ON i.{item.id} = s.{staged.item_id} WHERE 1 = 1 "
        f"GROUP BY s.{staged.annotator_id}, i.{item.domain} {add}",
        [study.pk],
    )
    execute(
        f"UPDATE {item.table} SET {item.n_answers} = {_answers_of_item(item.table)} "
        f"WHERE {item.id} IN (SELECT {staged.item_id} FROM {staged_table})"
    )
    per_item = (
        f"SELECT MAX(s.{staged.annotator_id}) AS user_id, i.{item.domain} AS domain, COUNT(*) AS staged, "
        f"i.{item.n_answers} AS labels FROM {staged_table} AS s JOIN {item.table} AS i ON i.{item.id} = s.{staged.item_id} "
        f"GROUP BY s.{staged.item_id}, i.{item.domain}, i.{item.n_answers}"
    )
    execute(
        f"INSERT INTO {counter.table} ({columns}) SELECT %s, t.user_id, t.domain, 0, COUNT(*) FROM ({per_item}) AS t "
        f"WHERE t.labels >= %s AND t.labels - t.staged < %s GROUP BY t.user_id, t.domain {add}",
        [study.pk, study.slots_per_item, study.slots_per_item],
    )


def _answers_of_item(outer: str) -> str:
    """SQL: the number of annotations on the item row `outer` (a table name or alias)."""
    item, assignment, annotation = names(Item), names(Assignment), names(Annotation)
    return (
        f"(SELECT COUNT(*) FROM {annotation.table} AS n JOIN {assignment.table} AS a "
        f"ON a.{assignment.id} = n.{annotation.assignment} WHERE a.{assignment.item} = {outer}.{item.id})"
    )


def lock_staged_items(staged_table: str) -> None:
    """PostgreSQL: lock the items an annotation import's labels are on, in id order (see `labels_switched`)."""
    if not connection.features.has_select_for_update:
        return  # SQLite: the import's write lock serialises
    item, staged = names(Item), names(StagedAnnotation)
    execute(
        f"SELECT {item.id} FROM {item.table} WHERE {item.id} IN (SELECT {staged.item_id} FROM {staged_table}) "
        f"ORDER BY {item.id} FOR UPDATE"
    )


def items_switched(study: Study, staged_table: str) -> None:
    """Count the items an item import is about to make live from `staged_table` (StagedItem's columns).

    Call in the import's transaction before its INSERT and UPDATE: updated items
    are read with their old domain and gold label, so an import that updates any
    recounts the whole study instead (after its writes: call `recount_study`).
    """
    staged, domains = names(StagedItem), names(DomainCount)
    execute(
        f"INSERT INTO {domains.table} ({domains.study}, {domains.domain}, {domains.items}, {domains.gold}) "
        f"SELECT %s, {staged.domain}, COUNT(*), SUM(CASE WHEN {staged.gold_label} <> '' THEN 1 ELSE 0 END) "
        f"FROM {staged_table} WHERE {staged.target} IS NULL GROUP BY {staged.domain} "
        f"ON CONFLICT ({domains.study}, {domains.domain}) DO UPDATE SET "
        f"{domains.items} = {domains.table}.{domains.items} + excluded.{domains.items}, "
        f"{domains.gold} = {domains.table}.{domains.gold} + excluded.{domains.gold}",
        [study.pk],
    )


def recount_study(study: Study) -> None:
    """Set the study's counters to what its rows hold now (item updates, study copies, `manage.py recount_study`).

    Costs a pass over the study's labels (seconds at 300,000 on PostgreSQL) while its
    counter rows are locked, so submits in the study wait for it: not for hot paths.
    An item with all N labels is counted in the row of its annotation with the
    highest assignment id (any one row would do: pages only show sums).
    """
    item, assignment, annotation = names(Item), names(Assignment), names(Annotation)
    domains, counter = names(DomainCount), names(AnnotatorCount)
    with transaction.atomic():
        DomainCount.objects.filter(study=study).delete()
        AnnotatorCount.objects.filter(study=study).delete()
        execute(
            f"UPDATE {item.table} SET {item.n_answers} = {_answers_of_item(item.table)} WHERE {item.study} = %s",
            [study.pk],
        )
        execute(
            f"INSERT INTO {domains.table} ({domains.study}, {domains.domain}, {domains.items}, {domains.gold}) "
            f"SELECT %s, {item.domain}, COUNT(*), SUM(CASE WHEN {item.gold_label} <> '' THEN 1 ELSE 0 END) "
            f"FROM {item.table} WHERE {item.study} = %s GROUP BY {item.domain}",
            [study.pk, study.pk],
        )
        labelled = (
            f"SELECT a.{assignment.item} AS item_id, COUNT(*) AS labels, MAX(a.{assignment.id}) AS last_id "
            f"FROM {annotation.table} AS n JOIN {assignment.table} AS a ON a.{assignment.id} = n.{annotation.assignment} "
            f"WHERE a.{assignment.study} = %s GROUP BY a.{assignment.item}"
        )
        execute(
            f"INSERT INTO {counter.table} ({counter.study}, {counter.user}, {counter.domain}, {counter.annotations}, "
            f"{counter.complete}) SELECT %s, a.{assignment.annotator}, i.{item.domain}, COUNT(*), "
            # complete: N labels, or closed below N by adaptive overlap (workbench/adaptive.py)
            f"SUM(CASE WHEN (p.labels >= %s OR i.{item.closed_after} IS NOT NULL) AND p.last_id = a.{assignment.id} "
            "THEN 1 ELSE 0 END) "
            f"FROM {annotation.table} AS n JOIN {assignment.table} AS a ON a.{assignment.id} = n.{annotation.assignment} "
            f"JOIN {item.table} AS i ON i.{item.id} = a.{assignment.item} "
            f"JOIN ({labelled}) AS p ON p.item_id = a.{assignment.item} "
            f"WHERE a.{assignment.study} = %s GROUP BY a.{assignment.annotator}, i.{item.domain}",
            [study.pk, study.slots_per_item, study.pk, study.pk],
        )
