"""The counts the home page, a study's overview and its progress page show, kept as counters instead of counted per page.

Why: counting a study's items and annotations on every view grew with the study
(issue 15: the overview took 2 s at 100,000 items on PostgreSQL). The pages now
read a few counter rows per study (models.DomainCount, models.AnnotatorCount,
models.ActiveTimeBucket). Besides items, gold items, answers and items complete,
the rows hold the progress page's annotator table (issue 35): per annotator and
domain the answers timed, abstaining, on gold items and right there, imported, the
skips pressed and the leases that ran out, and per annotator the active times in
a sketch's buckets (lib/active_time_sketch.py: medians within 1/128).

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
  for the item's domain (what the answer says of itself and the item's gold label read by
  the locking UPDATE with it), and one to its time's bucket when it has one (a second
  statement step by step; a CTE of the one statement). It counts the answer on the item (`Item.n_answers`) with the UPDATE
  that locks the item row, and reads that count: of two annotators giving an item its
  last labels at once, the second waits for the first to commit and then counts on
  its count, so exactly one of them counts the item as complete.
- An annotation import adds what its staging table holds (`labels_switched`):
  per annotator and domain (and their times per bucket), and the items its labels took to N, with those items
  locked first as a submit locks its item. Its cost grows with the file, not the
  study (recounting a study of 300,000 labels takes seconds on PostgreSQL, and the
  submits of its annotators would wait on their counter rows meanwhile).
- An item import that only adds items adds its staged items per domain
  (`items_switched`); one that updates existing items (which may move them, and
  their labels, to another domain) recounts the study from its rows
  (`recount_study`), as a study copy does.

Each item's number of answers (`Item.n_answers`) also serves the progress page's
"complete" and "in progress" items; an import and a recount count it from the items' answers.

- An answer revised (its label or time), an assignment closed as a skip pressed or as a lease
  that ran out (taken over, or closed with the study, a member's leave, a crowd check), and the
  leases given back for someone (counted as neither) are counted by progress/quality_counters.py
  in the writer's transaction, from the row as written.

Hot rows: annotators never share a counter row (one row per study, annotator and
domain, and per study, annotator and bucket), and the counter writes are the submit's last
statements, so the item's row lock (held by at most N annotators of that item) is the only wait added.
Flags, adjudications, a participant's withdrawal and removing a member change none of these
counts (what the withdrawn did stays theirs; the page marks them live); deleting a member is only
allowed for one who was never given an item, and deletes cascade from studies and users.
"""

from __future__ import annotations

from typing import Any, NamedTuple

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
from annotation.progress.quality_counters import (
    LABEL_COLUMNS,
    CountedAnswer,
    added_on_conflict,
    counter_columns,
    gold_sql,
    recount_skips_and_times,
    staged_times_added,
    time_added,
)
from annotation.vocab import ABSTAIN_LABELS


class CountedItem(NamedTuple):
    """What of the item a new answer is counted by: its domain (the counter row) and gold label."""

    domain: str
    gold_label: str


def insert_locking_item(values: dict[str, Any], item_id: int) -> tuple[int, CountedItem]:
    """INSERT an annotation (values as `rawsql.insert_returning_id`), count it on its item and lock the item
    for `answer_added`: (the annotation's id, the item's domain and gold label), to pass on as `answer_added(item=...)`.

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
        f"RETURNING {item.domain}, {item.gold_label}) SELECT x.{annotation.id}, u.{item.domain}, u.{item.gold_label} "
        "FROM x, u",
        [*params, item_id],
    )
    if row is None:
        raise ValueError(f"no item {item_id} to count an annotation on")
    return row[0], CountedItem(row[1], row[2])


def count_on_item(item_id: int) -> CountedItem:
    """Count one more answer on the item, which locks its row; its domain and gold label (SQLite: the
    transaction's write lock serialises instead)."""
    item = names(Item)
    row = fetch_one(
        f"UPDATE {item.table} SET {item.n_answers} = {item.n_answers} + 1 WHERE {item.id} = %s "
        f"RETURNING {item.domain}, {item.gold_label}",
        [item_id],
    )
    if row is None:
        raise ValueError(f"no item {item_id} to count an annotation on")
    return CountedItem(row[0], row[1])


def answer_added(
    *,
    study_id: int,
    item_id: int,
    user_id: int,
    complete_at: int,
    answer: CountedAnswer,
    item: CountedItem | None = None,
) -> None:
    """Count a new annotation by `user_id` on `item_id`; call in the transaction that inserted it, as late as possible.

    `complete_at`: the answers that complete the item (its assignment's `max_slots`: the study's
    slots per item, N or N per condition). `answer`: its label, time and source (the annotator
    table's numbers: timed, abstaining, gold, imported, and the time's bucket).
    `item`: the item's, from `insert_locking_item` in this transaction (the item is locked and the
    answer counted on it then); without it both are done here.
    """
    item_table = names(Item)
    if item is None:
        item = count_on_item(item_id)
    # The item's answers as its locking UPDATE counted them: with every answer committed on it before
    # the lock, and this one (see the module's docstring).
    answers_on_item = f"(SELECT i.{item_table.n_answers} FROM {item_table.table} AS i WHERE i.{item_table.id} = %s)"
    execute(
        one_answer_counted(
            study_id="%s",
            user_id="%s",
            domain="%s",
            answers_on_item=answers_on_item,
            complete_at="%s",
            answer=answer,
            gold_label="%s",
        ),
        # the gold label: once for "on a gold item", then "labelled as gold" reads it, the label, it again
        [
            study_id,
            user_id,
            item.domain,
            item_id,
            complete_at,
            item.gold_label,
            item.gold_label,
            answer.label,
            item.gold_label,
        ],
    )
    if answer.active_ms is not None:
        time_added(study_id, user_id, answer.active_ms)


def one_answer_counted(
    *,
    study_id: str,
    user_id: str,
    domain: str,
    answers_on_item: str,
    complete_at: str,
    answer: CountedAnswer,
    gold_label: str,
    source: str = "",
) -> str:
    """The INSERT ... ON CONFLICT that counts one answer in its annotator's row, from SQL expressions:
    the study, the annotator, the item's domain and its number of answers with this one (complete
    when that is `complete_at`, the assignment's `max_slots`), the item's gold label (then the
    answer's label, a parameter), over the rows of `source` ("" for one row). What `answer` says
    of itself (timed, abstaining, imported) is written in as numbers.

    Shared by `answer_added` and the one-statement submit (workbench/submit_sql.py)."""
    on_gold, right = gold_sql(gold_label, "%s")
    return (
        f"INSERT INTO {names(AnnotatorCount).table} ({counter_columns(LABEL_COLUMNS)}) "
        f"SELECT {study_id}, {user_id}, {domain}, 1, CASE WHEN {answers_on_item} = {complete_at} THEN 1 ELSE 0 END, "
        f"{answer.timed}, {answer.abstains}, {on_gold}, {right}, {answer.imported} "
        + (f"FROM {source} " if source else "")
        + "WHERE 1 = 1 "  # WHERE: SQLite's INSERT ... SELECT ... ON CONFLICT
        + added_on_conflict(LABEL_COLUMNS)
    )


def labels_switched(study: Study, staged_table: str) -> None:
    """Count the labels an annotation import has just inserted from `staged_table` (StagedAnnotation's columns).

    Call in the import's transaction right after its INSERTs; the items its labels
    are on were locked by `lock_staged_items` before them. An item is complete by
    this import when it holds N labels now and held fewer without the staged ones;
    it is counted in the row of its staged label with the highest annotator id.
    """
    item, staged, counter = names(Item), names(StagedAnnotation), names(AnnotatorCount)
    columns = counter_columns(("annotations", "complete"))
    add = added_on_conflict(("annotations", "complete"))
    execute(
        f"INSERT INTO {counter.table} ({counter_columns(LABEL_COLUMNS)}) "
        f"SELECT %s, s.{staged.annotator_id}, i.{item.domain}, COUNT(*), 0, "
        + _label_sums(f"s.{staged.label}", f"s.{staged.active_ms}", f"i.{item.gold_label}", imported="COUNT(*)")
        + f" FROM {staged_table} AS s JOIN {item.table} AS i ON i.{item.id} = s.{staged.item_id} WHERE 1 = 1 "
        f"GROUP BY s.{staged.annotator_id}, i.{item.domain} {added_on_conflict(LABEL_COLUMNS)}",
        [study.pk, *ABSTAIN_LABELS],
    )
    staged_times_added(study.pk, staged_table, staged.annotator_id, staged.active_ms)
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


def _label_sums(label: str, active_ms: str, gold_label: str, *, imported: str) -> str:
    """SQL: the sums of a group of labels (expressions) for the counter columns timed, abstained, gold_n,
    gold_correct, then `imported`; parameters: ABSTAIN_LABELS."""
    on_gold, right = gold_sql(gold_label, label)
    abstaining = ", ".join(["%s"] * len(ABSTAIN_LABELS))
    return (
        f"SUM(CASE WHEN {active_ms} IS NOT NULL THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN {label} IN ({abstaining}) THEN 1 ELSE 0 END), SUM({on_gold}), SUM({right}), {imported}"
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
        imported = f"SUM(CASE WHEN n.{annotation.source} = %s THEN 1 ELSE 0 END)"
        execute(
            f"INSERT INTO {counter.table} ({counter_columns(LABEL_COLUMNS)}) "
            f"SELECT %s, a.{assignment.annotator}, i.{item.domain}, COUNT(*), "
            # complete: N labels, or closed below N by adaptive overlap (workbench/adaptive.py)
            f"SUM(CASE WHEN (p.labels >= %s OR i.{item.closed_after} IS NOT NULL) AND p.last_id = a.{assignment.id} "
            "THEN 1 ELSE 0 END), "
            + _label_sums(
                f"n.{annotation.label}", f"n.{annotation.active_ms}", f"i.{item.gold_label}", imported=imported
            )
            + f" FROM {annotation.table} AS n JOIN {assignment.table} AS a ON a.{assignment.id} = n.{annotation.assignment} "
            f"JOIN {item.table} AS i ON i.{item.id} = a.{assignment.item} "
            f"JOIN ({labelled}) AS p ON p.item_id = a.{assignment.item} "
            f"WHERE a.{assignment.study} = %s GROUP BY a.{assignment.annotator}, i.{item.domain}",
            [study.pk, study.slots_per_item, *ABSTAIN_LABELS, Annotation.Source.IMPORT, study.pk, study.pk],
        )
        recount_skips_and_times(study.pk)
