"""The common submit as one PostgreSQL statement (issue 15: at most 8 ms of server CPU per label).

Why: the step-by-step submit (`assignments._submit_once`) is a transaction of three
statements (mark the assignment submitted; insert the answer, counting it on its item;
count it in the annotator's row), five round trips with BEGIN and COMMIT: more than a
third of the statements of a label on the load benchmark. Data-modifying CTEs make the
same writes, in the same order and with the same row locks (the assignment, then its
item, then the annotator's counter row), in one statement that commits on its own, so it
is all or nothing as the transaction was (progress/counters.py says why the counts stay exact).

It writes only what the step-by-step path would write: the user's own active assignment,
while they are an active annotator of the study, with an answer checked beforehand
against what it depends on, which the statement's WHERE then requires of the assignment
(the system shown on the left) and of its item (its number of evidence passages). When
any of that does not hold it writes nothing and returns None, and the caller takes the
step-by-step path, which says why or revises an answered assignment.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from annotation.lib.active_time_sketch import bucket_of
from annotation.lib.rawsql import fetch_one, insert_select_statement, names
from annotation.models import Annotation, AnnotatorCount, Assignment, Item
from annotation.progress.counters import one_answer_counted
from annotation.progress.quality_counters import CountedAnswer, bucket_added_sql
from annotation.workbench.assignment_sql import SUBMITTED_ROWS, own_active_submitted, own_active_submitted_params

#: The item's number of evidence passages as `assignments.answer_values` counts them: 0 when absent,
#: NULL (so nothing is written) for anything but a list, which the step-by-step path then judges.
_PASSAGES = (
    "CASE WHEN i.{payload} -> 'evidence' IS NULL THEN 0 "
    "WHEN jsonb_typeof(i.{payload} -> 'evidence') = 'array' THEN jsonb_array_length(i.{payload} -> 'evidence') END"
)


def submit_with_first_answer(
    *,
    assignment_id: int,
    study_id: int,
    user_id: int,
    answer: dict[str, Any],
    now: datetime,
    left_system: str | None = None,
    passages: int | None = None,
    also_read: tuple[str, list[Any]] | None = None,
) -> tuple[Assignment, tuple[Any, ...]] | None:
    """Mark the user's own active assignment submitted and store its first answer (`answer`: the
    Annotation's answer fields, source and times), counted on its item and for the annotator.

    `left_system` / `passages`: what the answer was checked against, required of the assignment /
    its item (None: the answer does not depend on it). `also_read`: a SELECT of one row (and its
    parameters) read in the same statement, as of before its writes (the annotator's progress).
    The assignment as now stored and that row (empty without `also_read`); None when nothing was written.
    """
    A, IT = names(Assignment), names(Item)
    conditions: list[str] = []
    condition_params: list[Any] = []
    if left_system is not None:
        conditions.append(f"{A.table}.{A.left_system} = %s")
        condition_params.append(left_system)
    if passages is not None:
        conditions.append(f"{_PASSAGES.format(payload=IT.payload)} = %s")
        condition_params.append(passages)
    submitted = own_active_submitted(joined_item=passages is not None, conditions=" AND ".join(conditions))
    insert, insert_params = insert_select_statement(
        Annotation,
        {**answer, "study_id": study_id},
        {"assignment_id": f"submitted.{A.id}"},
        source="submitted",
    )
    counted_answer = CountedAnswer(answer["label"], answer.get("active_ms"), answer["source"])
    counted = one_answer_counted(
        study_id="submitted." + A.study,
        user_id="submitted." + A.annotator,
        domain="on_item." + IT.domain,
        answers_on_item="on_item." + IT.n_answers,
        complete_at="submitted." + A.max_slots,
        answer=counted_answer,
        gold_label="on_item." + IT.gold_label,
        source="submitted, on_item",
    )
    C = names(AnnotatorCount)
    # The time's bucket, counted after (and from) the annotator's counter row: the same lock order as step by step.
    timed = (
        ", timed AS ("
        + bucket_added_sql(study_id="counted." + C.study, user_id="counted." + C.user, bucket="%s", source="counted")
        + ")"
        if counted_answer.active_ms is not None
        else ""
    )
    row = fetch_one(
        f"WITH submitted AS ({submitted} RETURNING {SUBMITTED_ROWS.select}), "
        f"answer AS ({insert} RETURNING {names(Annotation).id}), "
        # The answer counted on its item (locking it) by an UPDATE: one that waited for another
        # submit's lock counts on that submit's count, so exactly one of them sees the item complete.
        f"on_item AS (UPDATE {IT.table} SET {IT.n_answers} = {IT.table}.{IT.n_answers} + 1 FROM submitted "
        f"WHERE {IT.table}.{IT.id} = submitted.{A.item} "
        f"RETURNING {IT.table}.{IT.domain}, {IT.table}.{IT.n_answers}, {IT.table}.{IT.gold_label}), "
        f"counted AS ({counted} RETURNING {C.table}.{C.study}, {C.table}.{C.user})"
        + timed
        + (f", also_read AS ({also_read[0]}) " if also_read else " ")
        + f"SELECT submitted.*, answer.{names(Annotation).id}"
        + (", also_read.* FROM submitted, answer, also_read" if also_read else " FROM submitted, answer"),
        [
            *own_active_submitted_params(assignment_id, study_id, user_id, now),
            *condition_params,
            *insert_params,
            counted_answer.label,
            *([bucket_of(counted_answer.active_ms)] if counted_answer.active_ms is not None else []),
            *(also_read[1] if also_read else ()),
        ],
    )
    if row is None:
        return None
    return SUBMITTED_ROWS.instance(row), tuple(row[SUBMITTED_ROWS.width + 1 :])
