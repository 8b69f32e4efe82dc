"""The assignment service's statements, in SQL (see annotation/lib/rawsql.py for why).

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

from annotation.lib.lease_commit import LEASE_ONLY_COMMIT
from annotation.lib.rawsql import ModelRows, db_datetime, execute, fetch_all, fetch_one, insert_returning_id, names
from annotation.models import Assignment, Item, StudyMember
from annotation.workbench.claim_order import claim_order, unchecked

ACTIVE, SUBMITTED, SKIPPED = Assignment.Status.ACTIVE, Assignment.Status.SUBMITTED, Assignment.Status.SKIPPED

#: What the workbench reads of an item; the other columns are deferred (loaded if touched).
ITEM_FIELDS = ("id", "study", "external_id", "payload", "slots_taken")
ITEM_ROWS = ModelRows(Item, ITEM_FIELDS, alias="i")
ASSIGNMENT_ROWS = ModelRows(Assignment, alias="a")
#: An UPDATE's RETURNING list names its table, not an alias (SQLite has no alias there).
SUBMITTED_ROWS = ModelRows(Assignment)


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
    """The user's active annotator membership; with `lock`, its row is locked, serialising this user's claims.

    On PostgreSQL the lock is taken by rewriting the row (an UPDATE that changes nothing): every
    claim under the lock leaves a new row version behind it, which is what a claim made without a
    transaction checks to know that no other claim of the user committed since its snapshot
    (`claim_first_free_slot`'s `alone`). A `SELECT ... FOR UPDATE` leaves no such trace.
    """
    M = names(StudyMember)
    where = f"{M.study} = %s AND {M.user} = %s AND {M.role} = %s AND {M.is_active}"
    params = (study_id, user_id, StudyMember.Role.ANNOTATOR)
    if lock and connection.vendor == "postgresql":
        row = fetch_one(f"UPDATE {M.table} SET {M.is_active} = {M.is_active} WHERE {where} RETURNING {M.id}", params)
    else:
        row = fetch_one(f"SELECT {M.id} FROM {M.table} WHERE {where}" + (_for_update() if lock else ""), params)
    return row[0] if row else None


def claim_candidates(
    study_id: int,
    user_id: int,
    now: datetime,
    n: int,
    limit: int,
    walk: int,
    *,
    exclude_id: int | None = None,
    slots: range | None = None,
) -> tuple[list[tuple[int, int, int, int, str]], list[tuple[int, str, int]]]:
    """Both reads a claim starts with, in one round trip: (own or expired, fresh).

    Own or expired: (id, annotator, item, slot, left system) of active assignments, the user's own
    first (oldest first, so the item on screen comes before the one fetched ahead), then leases that
    ran out on items the user has not had, oldest first; `exclude_id` leaves out one of the user's own.
    Fresh: (id, external id, slots taken) of unfinished items the user has not had, most slots taken
    first, from the first `walk` rows of the top of the (study, is_check, slots_taken, claim_rank) index (`_fresh_part`;
    `fresh_candidates` walks on from lower levels when these held none). At most `limit` of each.
    Why one statement: a claim needs the fresh ones whenever it has neither own nor expired (almost
    always), and a round trip costs both the web server and the database more than this bounded read.
    `slots` (exact N per condition: the user's condition's slot numbers, `claimable_slots`): only
    leases and items with a slot of that range free; None: any of the item's `n`.
    """
    A = names(Assignment)
    fresh_sql, fresh_params = _fresh_part(study_id, user_id, n, limit, walk, slots)
    in_range, range_params = _slot_in_range("a", slots)
    rows = fetch_all(
        # The NULLs of each part stand at the UNION's level, where PostgreSQL types them from the other part;
        # the outer ORDER BY repeats the first part's own (a UNION keeps no order of its parts).
        f"SELECT 0, o.{A.id}, o.{A.annotator}, o.{A.item}, o.{A.slot}, o.{A.left_system}, NULL, NULL, o.k1, o.k2, o.k3 "
        f"FROM (SELECT a.{A.id}, a.{A.annotator}, a.{A.item}, a.{A.slot}, a.{A.left_system}, "
        f"CASE WHEN a.{A.annotator} = %s THEN 0 ELSE 1 END AS k1, "
        f"CASE WHEN a.{A.annotator} = %s THEN a.{A.id} ELSE 0 END AS k2, a.{A.lease_expires_at} AS k3 "
        f"FROM {A.table} a WHERE a.{A.study} = %s AND a.{A.status} = %s AND a.{A.id} <> %s AND (a.{A.annotator} = %s OR "
        f"(a.{A.lease_expires_at} < %s{in_range} AND NOT EXISTS (SELECT 1 FROM {A.table} b "
        f"WHERE b.{A.item} = a.{A.item} AND b.{A.annotator} = %s))) ORDER BY k1, k2, k3, a.{A.id} LIMIT %s) o "
        f"UNION ALL SELECT 1, f.id, NULL, NULL, NULL, NULL, f.external_id, f.slots_taken, NULL, NULL, NULL "
        f"FROM ({fresh_sql}) f "
        f"ORDER BY 1, 9, 10, 11, 2",
        (
            user_id,
            user_id,
            study_id,
            ACTIVE,
            exclude_id or 0,
            user_id,
            db_datetime(now),
            *range_params,
            user_id,
            limit,
            *fresh_params,
        ),
    )
    own_or_expired = [(row[1], row[2], row[3], row[4], row[5]) for row in rows if row[0] == 0]
    fresh = [(row[1], row[6], row[7]) for row in rows if row[0] == 1]
    return own_or_expired, fresh


def fresh_candidates(
    study_id: int, user_id: int, below: int, limit: int, walk: int, slots: range | None = None
) -> list[tuple[int, str, int]]:
    """(id, external id, slots taken) of items that the user has not had, with fewer than `below`
    slots taken, most slots taken first: at most `limit`, from a walk of at most `walk` rows down
    the (study, is_check, slots_taken, claim_rank) index from each level of slots taken in turn, `below - 1` first, until
    `limit` are found (one statement: a UNION ALL of the walks, read only as far as needed).

    Why walks of `walk` rows: the items the user has had and that are unfinished stand at the top of
    the index (their slots are taken, and the user's own claims are the latest rows), so an annotator
    far ahead of the others had every claim step past all of them: 3.3 ms of database time per claim
    at 1,000 items ahead, and growing with each label. `claim_candidates` walks from the top level
    only; this is its continuation when that walk held nothing (`assignments._fresh_further_down`).
    """
    parts: list[str] = []
    params: list[Any] = []
    for top in range(below, 0, -1):
        part, part_params = _fresh_part(study_id, user_id, top, limit, walk, slots)
        parts.append(f"SELECT * FROM ({part}) AS level_{top}")
        params.extend(part_params)
    if not parts:
        return []
    seen: set[int] = set()
    found = []
    for row in fetch_all(" UNION ALL ".join(parts) + " LIMIT %s", (*params, limit)):
        if row[0] not in seen:  # a walk from a higher level may reach the items of a lower one
            seen.add(row[0])
            found.append((row[0], row[1], row[2]))
    return found


def every_fresh_candidate(
    study_id: int, user_id: int, below: int, limit: int, slots: range | None = None
) -> list[tuple[int, str, int]]:
    """`fresh_candidates` from one walk down the whole index: the last word when the bounded walks found
    none, since those may have stopped at `walk` rows of items the user had or skipped."""
    sql, params = _fresh_part(study_id, user_id, below, limit, _WHOLE_INDEX, slots)
    return [(row[0], row[1], row[2]) for row in fetch_all(sql, params)]


#: A walk's bound that is no bound (SQLite takes no NULL for a LIMIT).
_WHOLE_INDEX = 2**62


def _slot_in_range(alias: str, slots: range | None) -> tuple[str, tuple[int, ...]]:
    """SQL (" AND ...") keeping the assignment `alias`'s slot inside `slots`, and its parameters ("" for None)."""
    if slots is None:
        return "", ()
    A = names(Assignment)
    return f" AND {alias}.{A.slot} >= %s AND {alias}.{A.slot} < %s", (slots.start, slots.stop)


def _free_in_range(item: str, slots: range | None) -> tuple[str, tuple[int, ...]]:
    """SQL (" AND ...") keeping items (`item`: their id column) with a slot of `slots` free; parameters.

    A probe of the (item, slot) unique index per candidate, bounded by the range's N rows."""
    if slots is None:
        return "", ()
    A = names(Assignment)
    return (
        f" AND (SELECT COUNT(*) FROM {A.table} h WHERE h.{A.item} = {item} "
        f"AND h.{A.slot} >= %s AND h.{A.slot} < %s) < %s",
        (slots.start, slots.stop, len(slots)),
    )


def _fresh_part(
    study_id: int, user_id: int, below: int, limit: int, walk: int, slots: range | None = None
) -> tuple[str, tuple]:
    """A SELECT (columns id, external_id, slots_taken) of at most `limit` items with fewer than `below`
    slots taken that the user has not had, from the first `walk` rows down the index in `claim_order`,
    check items left out; its parameters. With `slots` (exact N per condition), only items with a
    slot of that range free: an item whose range is full is walked past like one the user had.

    Why the probe is `annotator + 0 ... OFFSET 0`: it must stay one probe of the item index per
    candidate whatever the statistics say. Statistics gathered before the study's first labels (a
    bulk import then ANALYZE, or autovacuum off) made PostgreSQL read all of the user's assignments:
    through the annotator index once per candidate (9,024 rows for 32 candidates after 282 labels,
    1.5 ms of database CPU per claim), or, with only `+ 0`, by a scan of every assignment of the
    table once per claim; both grew with every label. `+ 0` keeps the annotator index out and
    OFFSET 0 keeps the NOT EXISTS from becoming a join (it stays a per-row subplan).
    """
    A, IT = names(Assignment), names(Item)
    fence = " OFFSET 0" if connection.vendor == "postgresql" else ""  # SQLite: OFFSET needs a LIMIT
    free, free_params = _free_in_range("w.id", slots)
    sql = (
        f"SELECT w.id, w.external_id, w.slots_taken FROM (SELECT i.{IT.id} AS id, "
        f"i.{IT.external_id} AS external_id, i.{IT.slots_taken} AS slots_taken, i.{IT.claim_rank} AS claim_rank "
        f"FROM {IT.table} i WHERE i.{IT.study} = %s AND i.{IT.slots_taken} < %s AND {unchecked()} "
        f"ORDER BY {claim_order()} LIMIT %s) w "
        f"WHERE NOT EXISTS (SELECT 1 FROM {A.table} b WHERE b.{A.item} = w.id AND b.{A.annotator} + 0 = %s{fence}){free} "
        f"ORDER BY w.slots_taken DESC, w.claim_rank DESC LIMIT %s"
    )
    return sql, (study_id, below, walk, user_id, *free_params, limit)


def renew_own_lease(assignment_id: int, user_id: int, expires: datetime, now: datetime) -> int:
    """Renew the user's own active assignment: 1, or 0 when it is not (any more) theirs and active."""
    A = names(Assignment)
    return execute(
        f"UPDATE {A.table} SET {A.lease_expires_at} = %s, {A.updated_at} = %s "
        f"WHERE {A.id} = %s AND {A.annotator} = %s AND {A.status} = %s",
        (db_datetime(expires), db_datetime(now), assignment_id, user_id, ACTIVE),
    )


def delete_unseen_ahead(assignment_id: int, study_id: int, user_id: int, updated_at: datetime) -> int | None:
    """Delete the user's assignment fetched ahead, if it is still exactly as handed out: the item of
    it, or None. Only an active one that is not the user's oldest (the oldest is the one on screen)
    and whose `updated_at` is unchanged (a renewal since means another page of theirs holds it)."""
    A = names(Assignment)
    row = fetch_one(
        f"DELETE FROM {A.table} WHERE {A.id} = %s AND {A.study} = %s AND {A.annotator} = %s AND {A.status} = %s "
        f"AND {A.updated_at} = %s AND EXISTS (SELECT 1 FROM {A.table} b WHERE b.{A.study} = %s "
        f"AND b.{A.annotator} = %s AND b.{A.status} = %s AND b.{A.id} < %s) RETURNING {A.item}",
        (
            assignment_id,
            study_id,
            user_id,
            ACTIVE,
            db_datetime(updated_at),
            study_id,
            user_id,
            ACTIVE,
            assignment_id,
        ),
    )
    return row[0] if row else None


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


def submit_own_active(assignment_id: int, study_id: int, user_id: int, now: datetime) -> Assignment | None:
    """Mark the user's own active assignment submitted, while they are an active annotator of the
    study: the assignment as now stored, with its item; None when any of that does not hold.

    One round trip for the common submit on PostgreSQL, in place of `locked_for_answer` then
    `mark_submitted`; the UPDATE locks the row as they did. (SQLite's RETURNING cannot name the
    item joined in FROM, so there the item is a second read.) On None the caller takes the
    step-by-step path, which says which condition failed (or revises an answered assignment).
    """
    joined = connection.vendor == "postgresql"
    row = fetch_one(
        own_active_submitted(joined_item=joined)
        + f" RETURNING {SUBMITTED_ROWS.select}"
        + (f", {ITEM_ROWS.select}" if joined else ""),
        own_active_submitted_params(assignment_id, study_id, user_id, now),
    )
    if row is None:
        return None
    assignment = SUBMITTED_ROWS.instance(row)
    assignment.item = ITEM_ROWS.instance(row, SUBMITTED_ROWS.width) if joined else item(assignment.item_id)
    return assignment


def own_active_submitted(*, joined_item: bool = False, conditions: str = "") -> str:
    """The UPDATE (no RETURNING) that marks the user's own active assignment submitted, while they are
    an active annotator of its study; parameters `own_active_submitted_params`, then those of `conditions`
    (more SQL conditions, ANDed). `joined_item`: the item joins as `i` (PostgreSQL's UPDATE ... FROM)."""
    A, IT, M = names(Assignment), names(Item), names(StudyMember)
    return (
        f"UPDATE {A.table} SET {A.status} = %s, {A.submitted_at} = %s, {A.lease_expires_at} = NULL, "
        f"{A.updated_at} = %s "
        + (f"FROM {IT.table} i WHERE i.{IT.id} = {A.table}.{A.item} AND " if joined_item else "WHERE ")
        + f"{A.table}.{A.id} = %s AND {A.table}.{A.study} = %s AND {A.table}.{A.annotator} = %s "
        f"AND {A.table}.{A.status} = %s AND EXISTS (SELECT 1 FROM {M.table} m WHERE m.{M.study} = {A.table}.{A.study} "
        f"AND m.{M.user} = %s AND m.{M.role} = %s AND m.{M.is_active})" + (f" AND {conditions}" if conditions else "")
    )


def own_active_submitted_params(assignment_id: int, study_id: int, user_id: int, now: datetime) -> list[Any]:
    """The parameters of `own_active_submitted`, its `conditions` aside."""
    when = db_datetime(now)
    return [SUBMITTED, when, when, assignment_id, study_id, user_id, ACTIVE, user_id, StudyMember.Role.ANNOTATOR]


def _with_item(row: Sequence[Any]) -> Assignment:
    assignment = ASSIGNMENT_ROWS.instance(row)
    assignment.item = ITEM_ROWS.instance(row, ASSIGNMENT_ROWS.width)
    return assignment


def first_unlocked_item(ordered_ids: Sequence[int], n: int) -> Item | None:
    """The first of these items (in this order) that still has a free slot, locked; on PostgreSQL
    rows locked by other claimers are stepped over (SKIP LOCKED), never waited for."""
    IT = names(Item)
    # The order is the caller's (a per-annotator hash), so it is spelled out as a CASE.
    rank = "CASE " + " ".join(f"WHEN i.{IT.id} = %s THEN {k}" for k in range(len(ordered_ids))) + " END"
    placeholders = ", ".join(["%s"] * len(ordered_ids))
    row = fetch_one(
        f"SELECT {ITEM_ROWS.select} FROM {IT.table} i WHERE i.{IT.id} IN ({placeholders}) AND i.{IT.slots_taken} < %s "
        f"AND {unchecked()} "  # made a check since the candidates were read (participants.configure_link)
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


#: The item columns of the claimed row, read back from the `picked` step of `claim_first_free_slot`.
PICKED_ROWS = ModelRows(Item, ITEM_FIELDS, alias="p")


class NotAlone(Exception):
    """A claim made without a transaction found that it may not go on alone: nothing was written."""


def claim_first_free_slot(
    candidates: Sequence[tuple[int, int, int]],
    values: dict[str, Any],
    systems: Sequence[str],
    n: int,
    *,
    alone: bool = False,
    slots: range | None = None,
    lease_only: bool = False,
) -> tuple[Item, int | None, int | None, str]:
    """PostgreSQL only: in one statement, lock the first candidate nobody else holds and that still
    has a free slot, take the lowest free slot number, bump the item's counter and insert the
    assignment. `candidates` are (item id, queue position, side coin) in the caller's order;
    `values` the assignment's other columns; `slots` the slot numbers the user may take (None: any
    of the `n`; exact N per condition: their condition's range). The side shown left follows
    `randomisation.left_system_for` (the item's coin plus the slot, alternating).

    Returns (item, assignment id, slot, left system). LookupError when every candidate is held by
    another claim or full. When the item's counter was below N but every slot was held (a counter
    edited by hand), nothing is written and the assignment id is None: the caller repairs it.

    With `alone` the statement is the whole claim, outside any transaction, and first does what the
    claim's transaction does before it (`annotator_member_id` with its lock, and "no active
    assignment of the user"): it locks the user's membership row by rewriting it, but only while
    the row is the version of the statement's own snapshot (its `xmin` unchanged, checked again on
    the newest version if the lock had to wait) and the user has no active assignment in the study.
    An unchanged version means no claim of the user committed since the snapshot (each rewrites
    it), so the snapshot's "no active assignment" is still true. Otherwise NotAlone, and nothing
    is written: the caller claims in a transaction, which says why or waits its turn.
    With `alone` and `lease_only` (the statement is its own transaction, outside any atomic block),
    its commit does not wait for the disk (lib/lease_commit.py).

    Why one statement: it replaces four round trips (lock, bump, read the held slots, insert) on
    the claim path, which is most of what a label costs the database (issue 15, §2); `alone` saves
    three more (BEGIN, the membership lock, COMMIT).
    """
    A, IT, M = names(Assignment), names(Item), names(StudyMember)
    # A volatile select-list entry of the subquery the result reads: PostgreSQL evaluates it, once.
    lease_commit = f", {LEASE_ONLY_COMMIT} AS lease_commit" if lease_only else ""
    two = len(systems) == 2
    taken = slots if slots is not None else range(n)
    range_free = (
        f" AND (SELECT COUNT(*) FROM {A.table} h WHERE h.{A.item} = i.{IT.id} AND h.{A.slot} >= %(first_slot)s "
        f"AND h.{A.slot} <= %(last_slot)s) < {len(taken)}"
        if slots is not None
        else ""
    )
    params: dict[str, Any] = {
        "first_slot": taken.start,
        "last_slot": taken.stop - 1,
        "items": [c[0] for c in candidates],
        "positions": [c[1] for c in candidates],
        "sides": [c[2] for c in candidates],
        "n": n,
        "first": systems[0] if two else "",
        "second": systems[1] if two else "",
        "two": two,
        "annotator_role": StudyMember.Role.ANNOTATOR,
        **{key: db_datetime(value) if isinstance(value, datetime) else value for key, value in values.items()},
    }
    member = (
        f"{M.study} = %(study_id)s AND {M.user} = %(annotator_id)s AND {M.role} = %(annotator_role)s AND {M.is_active}"
    )
    guard = (
        f"m AS (UPDATE {M.table} SET {M.is_active} = {M.is_active} WHERE {member} "
        f"AND xmin = (SELECT xmin FROM {M.table} WHERE {member}) "
        # 'active' as a literal, not a parameter: a prepared statement's generic plan then knows that few rows
        # are active (and may use the partial index of active ones). With a parameter, in a database whose
        # statistics are one big study's, the generic plan read every assignment (20 ms at 300,000; issue 35).
        f"AND NOT EXISTS (SELECT 1 FROM {A.table} o WHERE o.{A.study} = %(study_id)s "
        f"AND o.{A.annotator} = %(annotator_id)s AND o.{A.status} = '{ACTIVE}') RETURNING {M.id}), "
        if alone
        else ""
    )
    row = fetch_one(
        f"WITH {guard}c AS (SELECT * FROM unnest(%(items)s::bigint[], %(positions)s::bigint[], %(sides)s::int[]) "
        f"WITH ORDINALITY AS c(item_id, position, side, rank)), "
        f"p AS (SELECT {ITEM_ROWS.select}, c.position, c.side FROM {IT.table} i JOIN c ON c.item_id = i.{IT.id} "
        f"WHERE i.{IT.slots_taken} < %(n)s AND {unchecked()}{' AND EXISTS (SELECT 1 FROM m)' if alone else ''}"
        f"{range_free} "
        f"ORDER BY c.rank LIMIT 1 FOR UPDATE OF i SKIP LOCKED), "
        f"f AS (SELECT p.{IT.id} AS item_id, (SELECT min(s) FROM generate_series(%(first_slot)s::int, %(last_slot)s::int) s "
        f"WHERE NOT EXISTS (SELECT 1 FROM {A.table} h WHERE h.{A.item} = p.{IT.id} AND h.{A.slot} = s)) AS slot "
        f"FROM p), "
        f"b AS (UPDATE {IT.table} SET {IT.slots_taken} = {IT.slots_taken} + 1 FROM f "
        f"WHERE {IT.table}.{IT.id} = f.item_id AND f.slot IS NOT NULL RETURNING {IT.table}.{IT.id} AS item_id), "
        f"x AS (INSERT INTO {A.table} ({A.study}, {A.item}, {A.annotator}, {A.slot}, {A.max_slots}, "
        f"{A.queue_position}, {A.left_system}, {A.status}, {A.lease_expires_at}, {A.flagged}, {A.flag_reason}, "
        f"{A.created_at}, {A.submitted_at}, {A.updated_at}) "
        f"SELECT %(study_id)s, p.{IT.id}, %(annotator_id)s, f.slot, %(max_slots)s, p.position, "
        f"CASE WHEN %(two)s THEN (ARRAY[%(first)s, %(second)s])[((p.side + f.slot) %% 2) + 1] ELSE '' END, "
        f"%(status)s, %(lease_expires_at)s, false, '', %(created_at)s, NULL, %(updated_at)s "
        f"FROM p JOIN f ON f.item_id = p.{IT.id} JOIN b ON b.item_id = p.{IT.id} "
        f"RETURNING {A.id}, {A.slot}, {A.left_system}) "
        + (
            f"SELECT {PICKED_ROWS.select}, x.{A.id}, x.{A.slot}, x.{A.left_system}, g.held "
            f"FROM (SELECT count(*) AS held{lease_commit} FROM m) g LEFT JOIN p ON true LEFT JOIN x ON true"
            if alone
            else f"SELECT {PICKED_ROWS.select}, x.{A.id}, x.{A.slot}, x.{A.left_system} FROM p LEFT JOIN x ON true"
        ),
        params,
    )
    if alone and row is not None:
        if not row[-1]:
            raise NotAlone("the user's membership changed since the statement's snapshot, or they hold an item")
        row = row if row[0] is not None else None  # the guard held but no candidate could be locked
    if row is None:
        raise LookupError("every candidate is held by another claim or full")
    width = PICKED_ROWS.width
    return PICKED_ROWS.instance(row), row[width], row[width + 1], row[width + 2] or ""
