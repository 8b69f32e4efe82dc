"""The assignment service's statements, in SQL (see annotation/rawsql.py for why).

One function per statement, each a single round trip, so `assignments.py`
reads as the algorithm and this module as its storage. Every function runs
inside the caller's transaction. Row locks (`FOR UPDATE`, `SKIP LOCKED`) are
used where the database has them (PostgreSQL); SQLite's IMMEDIATE
transactions serialise writers instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from ..models import Assignment, Item, StudyMember
from ..rawsql import ModelRows, db_datetime, execute, fetch_all, fetch_one, insert_returning_id, names

ACTIVE, SUBMITTED, SKIPPED = Assignment.Status.ACTIVE, Assignment.Status.SUBMITTED, Assignment.Status.SKIPPED

#: What the workbench reads of an item; the other columns are deferred (loaded if touched).
ITEM_FIELDS = ("id", "study", "external_id", "payload", "slots_taken")
ITEM_ROWS = ModelRows(Item, ITEM_FIELDS, alias="i")
ASSIGNMENT_ROWS = ModelRows(Assignment, alias="a")


def _for_update(*, skip_locked: bool = False, of: str = "") -> str:
    """The row-lock clause where the database has row locks (PostgreSQL), else nothing."""
    features = connection.features
    if not features.has_select_for_update:
        return ""
    clause = " FOR UPDATE"
    if of and features.has_select_for_update_of:
        clause += f" OF {of}"
    if skip_locked:
        clause += " SKIP LOCKED"
    return clause


def annotator_member_id(study_id: int, user_id: int, *, lock: bool) -> int | None:
    """The user's active annotator membership; with `lock`, its row is locked, serialising this user's claims."""
    M = names(StudyMember)
    row = fetch_one(
        f"SELECT {M.id} FROM {M.table} WHERE {M.study} = %s AND {M.user} = %s AND {M.role} = %s AND {M.is_active}"
        + (_for_update() if lock else ""),
        (study_id, user_id, StudyMember.Role.ANNOTATOR),
    )
    return row[0] if row else None


def own_or_expired(study_id: int, user_id: int, now: datetime, limit: int) -> list[tuple[int, int, int, int, str]]:
    """(id, annotator, item, slot, left system) of active assignments: the user's own first, then
    leases that ran out on items the user has not had, oldest first."""
    A = names(Assignment)
    return fetch_all(
        f"SELECT a.{A.id}, a.{A.annotator}, a.{A.item}, a.{A.slot}, a.{A.left_system} FROM {A.table} a "
        f"WHERE a.{A.study} = %s AND a.{A.status} = %s AND (a.{A.annotator} = %s OR "
        f"(a.{A.lease_expires_at} < %s AND NOT EXISTS (SELECT 1 FROM {A.table} b "
        f"WHERE b.{A.item} = a.{A.item} AND b.{A.annotator} = %s))) "
        f"ORDER BY CASE WHEN a.{A.annotator} = %s THEN 0 ELSE 1 END, a.{A.lease_expires_at}, a.{A.id} LIMIT %s",
        (study_id, ACTIVE, user_id, db_datetime(now), user_id, user_id, limit),
    )


def renew_lease(assignment_id: int, expires: datetime, now: datetime) -> int:
    A = names(Assignment)
    return execute(
        f"UPDATE {A.table} SET {A.lease_expires_at} = %s, {A.updated_at} = %s WHERE {A.id} = %s AND {A.status} = %s",
        (db_datetime(expires), db_datetime(now), assignment_id, ACTIVE),
    )


def close_expired(assignment_id: int, now: datetime) -> int:
    """Close a lease that ran out (slot given up, expiry kept as the mark); 0 if someone got there first."""
    A = names(Assignment)
    return execute(
        f"UPDATE {A.table} SET {A.status} = %s, {A.slot} = NULL, {A.updated_at} = %s "
        f"WHERE {A.id} = %s AND {A.status} = %s AND {A.lease_expires_at} < %s",
        (SKIPPED, db_datetime(now), assignment_id, ACTIVE, db_datetime(now)),
    )


def assignment_with_item(assignment_id: int) -> Assignment | None:
    """An assignment with its item (the item's display columns)."""
    A, IT = names(Assignment), names(Item)
    row = fetch_one(
        f"SELECT {ASSIGNMENT_ROWS.select}, {ITEM_ROWS.select} FROM {A.table} a "
        f"JOIN {IT.table} i ON i.{IT.id} = a.{A.item} WHERE a.{A.id} = %s",
        (assignment_id,),
    )
    return _with_item(row) if row else None


def locked_for_answer(assignment_id: int, study_id: int, user_id: int) -> tuple[Assignment, bool] | None:
    """The study's assignment with its item, its row locked, and whether `user_id` is (still)
    an active annotator of the study: one round trip for what submit, skip and flag check first."""
    A, IT, M = names(Assignment), names(Item), names(StudyMember)
    row = fetch_one(
        f"SELECT {ASSIGNMENT_ROWS.select}, {ITEM_ROWS.select}, EXISTS (SELECT 1 FROM {M.table} m "
        f"WHERE m.{M.study} = a.{A.study} AND m.{M.user} = %s AND m.{M.role} = %s AND m.{M.is_active}) "
        f"FROM {A.table} a JOIN {IT.table} i ON i.{IT.id} = a.{A.item} "
        f"WHERE a.{A.id} = %s AND a.{A.study} = %s"
        + _for_update(of="a"),  # not the item: other claimers may bump its counter meanwhile
        (user_id, StudyMember.Role.ANNOTATOR, assignment_id, study_id),
    )
    if row is None:
        return None
    return _with_item(row), bool(row[-1])


def _with_item(row: Sequence[Any]) -> Assignment:
    assignment = ASSIGNMENT_ROWS.instance(row)
    assignment.item = ITEM_ROWS.instance(row, ASSIGNMENT_ROWS.width)
    return assignment


def fresh_candidates(study_id: int, user_id: int, n: int, limit: int) -> list[tuple[int, str, int]]:
    """(id, external id, slots taken) of unfinished items the user has not had, most slots taken first.

    Reads the (study, slots_taken) index from the top and stops after `limit` rows.
    """
    A, IT = names(Assignment), names(Item)
    return fetch_all(
        f"SELECT i.{IT.id}, i.{IT.external_id}, i.{IT.slots_taken} FROM {IT.table} i "
        f"WHERE i.{IT.study} = %s AND i.{IT.slots_taken} < %s AND NOT EXISTS (SELECT 1 FROM {A.table} b "
        f"WHERE b.{A.item} = i.{IT.id} AND b.{A.annotator} = %s) "
        f"ORDER BY i.{IT.slots_taken} DESC LIMIT %s",
        (study_id, n, user_id, limit),
    )


def first_unlocked_item(ordered_ids: Sequence[int], n: int) -> Item | None:
    """The first of these items (in this order) that still has a free slot, locked; on PostgreSQL
    rows locked by other claimers are stepped over (SKIP LOCKED), never waited for."""
    IT = names(Item)
    # The order is the caller's (a per-annotator hash), so it is spelled out as a CASE.
    rank = "CASE " + " ".join(f"WHEN i.{IT.id} = %s THEN {k}" for k in range(len(ordered_ids))) + " END"
    placeholders = ", ".join(["%s"] * len(ordered_ids))
    row = fetch_one(
        f"SELECT {ITEM_ROWS.select} FROM {IT.table} i WHERE i.{IT.id} IN ({placeholders}) AND i.{IT.slots_taken} < %s "
        f"ORDER BY {rank} LIMIT 1" + _for_update(skip_locked=True),
        (*ordered_ids, n, *ordered_ids),
    )
    return ITEM_ROWS.instance(row) if row else None


def item(item_id: int) -> Item:
    """The item of an assignment row read in the same transaction (the foreign key keeps it there)."""
    IT = names(Item)
    row = fetch_one(f"SELECT {ITEM_ROWS.select} FROM {IT.table} i WHERE i.{IT.id} = %s", (item_id,))
    if row is None:
        raise Item.DoesNotExist(f"item {item_id} of an assignment is gone")
    return ITEM_ROWS.instance(row)


def take_slot(item_id: int, n: int) -> int:
    """Bump the item's counter if it is below N: 1 when a slot was taken, 0 when the item is full."""
    IT = names(Item)
    return execute(
        f"UPDATE {IT.table} SET {IT.slots_taken} = {IT.slots_taken} + 1 WHERE {IT.id} = %s AND {IT.slots_taken} < %s",
        (item_id, n),
    )


def give_slot_back(item_id: int) -> int:
    IT = names(Item)
    return execute(
        f"UPDATE {IT.table} SET {IT.slots_taken} = {IT.slots_taken} - 1 WHERE {IT.id} = %s AND {IT.slots_taken} > 0",
        (item_id,),
    )


def set_slots_taken(item_id: int, count: int) -> int:
    IT = names(Item)
    return execute(f"UPDATE {IT.table} SET {IT.slots_taken} = %s WHERE {IT.id} = %s", (count, item_id))


def held_slots(item_id: int) -> set[int]:
    A = names(Assignment)
    rows = fetch_all(f"SELECT {A.slot} FROM {A.table} WHERE {A.item} = %s AND {A.slot} IS NOT NULL", (item_id,))
    return {slot for (slot,) in rows}


def create_assignment(values: dict[str, Any]) -> Assignment:
    """INSERT the assignment; the instance, as if read back (no second query)."""
    pk = insert_returning_id(Assignment, values)
    assignment = Assignment(pk=pk, **values)
    assignment._state.adding = False
    assignment._state.db = connection.alias
    return assignment


def mark_submitted(assignment_id: int, user_id: int, now: datetime) -> int:
    """The conditional UPDATE of submit: only the user's own still-active assignment."""
    A = names(Assignment)
    return execute(
        f"UPDATE {A.table} SET {A.status} = %s, {A.submitted_at} = %s, {A.lease_expires_at} = NULL, {A.updated_at} = %s "
        f"WHERE {A.id} = %s AND {A.annotator} = %s AND {A.status} = %s",
        (SUBMITTED, db_datetime(now), db_datetime(now), assignment_id, user_id, ACTIVE),
    )


def mark_skipped(assignment_id: int, now: datetime) -> int:
    A = names(Assignment)
    return execute(
        f"UPDATE {A.table} SET {A.status} = %s, {A.slot} = NULL, {A.lease_expires_at} = NULL, {A.updated_at} = %s "
        f"WHERE {A.id} = %s AND {A.status} = %s",
        (SKIPPED, db_datetime(now), assignment_id, ACTIVE),
    )
