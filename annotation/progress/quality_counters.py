"""The progress page's annotator table as counters: what revisions, skips and leases closed change,
and the active-time sketch's rows (issue 35: the table was computed from every label).

Why: the same discipline as counters.py (whose docstring says why counters, and how they stay exact):
every write that changes a number of the table changes its counter in its own transaction.
This module holds the writes counters.py does not: an answer revised (its label moves `abstained`
and `gold_correct`, its time moves `timed` and a bucket), an assignment closed as skipped (a skip
pressed, or a lease that ran out: told apart as progress/selectors.pressed_skip and TIMED_OUT do,
from the row as closed), and the sketch's rows (models.ActiveTimeBucket, lib/active_time_sketch.py).
All write the annotator's own rows only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from annotation.lib.active_time_sketch import bucket_of, bucket_sql
from annotation.lib.rawsql import db_datetime, execute, fetch_all, names
from annotation.models import ActiveTimeBucket, Annotation, AnnotatorCount, Assignment, Item, Participant, StudyMember
from annotation.vocab import ABSTAIN_LABELS

#: The counter columns added to, in the order `added_on_conflict` and the INSERTs name them.
LABEL_COLUMNS = ("annotations", "complete", "timed", "abstained", "gold_n", "gold_correct", "imported")
SKIP_COLUMNS = ("skipped", "timed_out")


@dataclass(frozen=True)
class CountedAnswer:
    """What of an answer the counters read: its canonical label, active time and source."""

    label: str
    active_ms: int | None
    source: str

    @property
    def abstains(self) -> int:
        return int(self.label in ABSTAIN_LABELS)

    @property
    def timed(self) -> int:
        return int(self.active_ms is not None)

    @property
    def imported(self) -> int:
        return int(self.source == Annotation.Source.IMPORT)


def added_on_conflict(columns: Sequence[str]) -> str:
    """`ON CONFLICT ... DO UPDATE` adding the new row's `columns` (field names) to the annotator's counter row."""
    counter = names(AnnotatorCount)
    added = ", ".join(
        f"{getattr(counter, name)} = {counter.table}.{getattr(counter, name)} + excluded.{getattr(counter, name)}"
        for name in columns
    )
    return f"ON CONFLICT ({counter.study}, {counter.user}, {counter.domain}) DO UPDATE SET {added}"


def counter_columns(columns: Sequence[str]) -> str:
    """The counter table's key columns and `columns` (field names), for an INSERT's column list."""
    counter = names(AnnotatorCount)
    return ", ".join([counter.study, counter.user, counter.domain, *(getattr(counter, name) for name in columns)])


def gold_sql(gold_label: str, label: str) -> tuple[str, str]:
    """SQL of (on a gold item, labelled as its gold) from the item's gold label and the answer's label (expressions)."""
    return (
        f"CASE WHEN {gold_label} <> '' THEN 1 ELSE 0 END",
        f"CASE WHEN {gold_label} <> '' AND {label} = {gold_label} THEN 1 ELSE 0 END",
    )


# --- the sketch -------------------------------------------------------------------------


def bucket_added_sql(
    *, study_id: str, user_id: str, bucket: str, source: str = "", labels: str = "1", group_by: str = ""
) -> str:
    """The INSERT ... ON CONFLICT adding `labels` to an annotator's bucket (SQL expressions, over `source`'s
    rows, grouped by `group_by` when given)."""
    row = names(ActiveTimeBucket)
    return (
        f"INSERT INTO {row.table} ({row.study}, {row.user}, {row.bucket}, {row.labels}) "
        f"SELECT {study_id}, {user_id}, {bucket}, {labels} "
        + (f"FROM {source} " if source else "")
        + "WHERE 1 = 1 "  # SQLite's INSERT ... SELECT ... ON CONFLICT
        + (f"GROUP BY {group_by} " if group_by else "")
        + f"ON CONFLICT ({row.study}, {row.user}, {row.bucket}) DO UPDATE SET "
        f"{row.labels} = {row.table}.{row.labels} + excluded.{row.labels}"
    )


def time_added(study_id: int, user_id: int, active_ms: int) -> None:
    """Count one answer's active time in its annotator's bucket."""
    execute(bucket_added_sql(study_id="%s", user_id="%s", bucket="%s"), [study_id, user_id, bucket_of(active_ms)])


def time_removed(study_id: int, user_id: int, active_ms: int) -> None:
    """Take one answer's active time out of its annotator's bucket (the answer was counted there)."""
    row = names(ActiveTimeBucket)
    execute(
        f"UPDATE {row.table} SET {row.labels} = {row.labels} - 1 "
        f"WHERE {row.study} = %s AND {row.user} = %s AND {row.bucket} = %s",
        [study_id, user_id, bucket_of(active_ms)],
    )


def staged_times_added(study_id: int, staged_table: str, annotator: str, active_ms: str) -> None:
    """Count the active times of rows an import staged (`annotator`, `active_ms`: its column names) in their buckets."""
    times = f"SELECT {annotator} AS user_id, {active_ms} AS ms FROM {staged_table} WHERE {active_ms} IS NOT NULL"
    execute(_times_counted(times), [study_id])


def _times_counted(times: str) -> str:
    """SQL adding the rows of `times` (a SELECT of columns user_id, ms; its parameters after the study's)
    to their annotators' buckets of the study (the first parameter)."""
    bucketed = f"SELECT s.user_id, {bucket_sql('s.ms')} AS bucket FROM ({times}) AS s"
    return bucket_added_sql(
        study_id="%s",
        user_id="t.user_id",
        bucket="t.bucket",
        labels="COUNT(*)",
        source=f"({bucketed}) AS t",
        group_by="t.user_id, t.bucket",
    )


# --- revisions -------------------------------------------------------------------------------


def answer_revised(assignment: Assignment, old: CountedAnswer, new: CountedAnswer) -> None:
    """Count an answer changed from `old` to `new` (label and time): its abstention, its gold
    answer right or not, whether it is timed and its bucket. Call in the transaction that saved it."""
    if old.label != new.label or old.timed != new.timed:
        counter, item = names(AnnotatorCount), names(Item)
        _, right = gold_sql(f"i.{item.gold_label}", "%s")
        execute(
            f"UPDATE {counter.table} SET {counter.timed} = {counter.timed} + %s, "
            f"{counter.abstained} = {counter.abstained} + %s, {counter.gold_correct} = {counter.gold_correct} + "
            f"(SELECT ({right}) - ({right}) FROM {item.table} AS i WHERE i.{item.id} = %s) "
            f"WHERE {counter.study} = %s AND {counter.user} = %s AND {counter.domain} = "
            f"(SELECT i.{item.domain} FROM {item.table} AS i WHERE i.{item.id} = %s)",
            [
                new.timed - old.timed,
                new.abstains - old.abstains,
                new.label,
                old.label,
                assignment.item_id,
                assignment.study_id,
                assignment.annotator_id,
                assignment.item_id,
            ],
        )
    if old.active_ms != new.active_ms:
        # In bucket order, so two revisions of one annotator's times never wait on each other in a circle.
        moves = [(bucket_of(ms), step, ms) for ms, step in ((old.active_ms, -1), (new.active_ms, 1)) if ms is not None]
        for _, step, ms in sorted(moves):
            (time_added if step > 0 else time_removed)(assignment.study_id, assignment.annotator_id, ms)


# --- skips and leases --------------------------------------------------------------------------


def pressed_sql(assignment: str) -> str:
    """SQL: 1 when the assignment row `assignment` (an alias) is a skip its annotator pressed
    (selectors.pressed_skip: closed with the lease cleared, by someone who is not a crowd participant)."""
    A, P, M = names(Assignment), names(Participant), names(StudyMember)
    return (
        f"CASE WHEN {assignment}.{A.status} = 'skipped' AND {assignment}.{A.lease_expires_at} IS NULL "
        f"AND NOT EXISTS (SELECT 1 FROM {P.table} AS p JOIN {M.table} AS m ON m.{M.id} = p.{P.member} "
        f"WHERE p.{P.study} = {assignment}.{A.study} AND m.{M.user} = {assignment}.{A.annotator}) THEN 1 ELSE 0 END"
    )


def timed_out_sql(assignment: str) -> str:
    """SQL: 1 when the assignment row `assignment` is a lease that ran out (selectors.TIMED_OUT)."""
    A = names(Assignment)
    return (
        f"CASE WHEN {assignment}.{A.status} = 'skipped' "
        f"AND {assignment}.{A.lease_expires_at} < {assignment}.{A.updated_at} THEN 1 ELSE 0 END"
    )


def closed_counted(assignment_ids: Sequence[int]) -> None:
    """Count the assignments this transaction has just closed as skipped: skips pressed and leases that
    ran out, in their annotators' rows (a lease given back for someone counts as neither).

    Call only with rows the caller's own UPDATE closed (its row count, or `close_leases`), in its transaction.
    """
    if not assignment_ids:
        return
    A, IT = names(Assignment), names(Item)
    placeholders = ", ".join(["%s"] * len(assignment_ids))
    execute(
        f"INSERT INTO {names(AnnotatorCount).table} ({counter_columns(SKIP_COLUMNS)}) "
        f"SELECT a.{A.study}, a.{A.annotator}, i.{IT.domain}, SUM({pressed_sql('a')}), SUM({timed_out_sql('a')}) "
        f"FROM {A.table} AS a JOIN {IT.table} AS i ON i.{IT.id} = a.{A.item} WHERE a.{A.id} IN ({placeholders}) "
        f"GROUP BY a.{A.study}, a.{A.annotator}, i.{IT.domain} "
        f"HAVING SUM({pressed_sql('a')}) + SUM({timed_out_sql('a')}) > 0 {added_on_conflict(SKIP_COLUMNS)}",
        list(assignment_ids),
    )


def close_leases(assignment_ids: Sequence[int], now: datetime) -> list[tuple[int, int]]:
    """Close those of these assignments that are still active as given back: skipped, slot freed, lease
    kept (a late answer is told why), and count those whose lease had run out (`closed_counted`).

    (id, item id) of each closed, for the caller to give its slot back. Call in a transaction.
    """
    if not assignment_ids:
        return []
    A = names(Assignment)
    placeholders = ", ".join(["%s"] * len(assignment_ids))
    closed = [
        (row[0], row[1])
        for row in fetch_all(
            f"UPDATE {A.table} SET {A.status} = %s, {A.slot} = NULL, {A.updated_at} = %s "
            f"WHERE {A.id} IN ({placeholders}) AND {A.status} = %s RETURNING {A.id}, {A.item}",
            [Assignment.Status.SKIPPED, db_datetime(now), *assignment_ids, Assignment.Status.ACTIVE],
        )
    ]
    closed_counted([pk for pk, _ in closed])
    return closed


# --- recount ------------------------------------------------------------------------------------


def recount_skips_and_times(study_id: int) -> None:
    """Set the study's skip counts and sketch to what its rows hold (`counters.recount_study`, after
    the label counts): skips pressed and leases run out per annotator and domain, times per bucket."""
    A, IT, N = names(Assignment), names(Item), names(Annotation)
    ActiveTimeBucket.objects.filter(study_id=study_id).delete()
    execute(
        f"INSERT INTO {names(AnnotatorCount).table} ({counter_columns(SKIP_COLUMNS)}) "
        f"SELECT %s, a.{A.annotator}, i.{IT.domain}, SUM({pressed_sql('a')}), SUM({timed_out_sql('a')}) "
        f"FROM {A.table} AS a JOIN {IT.table} AS i ON i.{IT.id} = a.{A.item} "
        f"WHERE a.{A.study} = %s AND a.{A.status} = %s GROUP BY a.{A.annotator}, i.{IT.domain} "
        f"HAVING SUM({pressed_sql('a')}) + SUM({timed_out_sql('a')}) > 0 {added_on_conflict(SKIP_COLUMNS)}",
        [study_id, study_id, Assignment.Status.SKIPPED],
    )
    times = (
        f"SELECT a.{A.annotator} AS user_id, n.{N.active_ms} AS ms FROM {N.table} AS n "
        f"JOIN {A.table} AS a ON a.{A.id} = n.{N.assignment} WHERE a.{A.study} = %s AND n.{N.active_ms} IS NOT NULL"
    )
    execute(_times_counted(times), [study_id, study_id])
