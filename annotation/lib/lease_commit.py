"""Claims commit without waiting for the disk: PostgreSQL's `synchronous_commit` off for a lease's own transaction.

Why (issue 35): during a million-row import every commit waits until the write-ahead log the
import wrote before it is on disk, so each of an annotator's commits slowed from 0.7 to 4 ms at
p95 while their queries stayed at 0.3 ms. A claim writes only a lease (the assignment row, the
item's slot counter, the membership lock): soft state. A commit that is not waited for is
visible to everyone at once, exactly like a waited one; only a crash of the database server in
the next fraction of a second (or a failover to a replica, which it is not waited for either) can undo it, and then the database is as it was before the claim
(the assignment, its slot and its counter together): the annotator's page shows an item whose
lease is gone, and its answer is refused as "no longer assigned to you". Any later waited commit
(every answer's) puts the claims before it on disk too.

Never for a transaction that stores anything else: answers, skips, flags, revisions and every
researcher's write keep waiting. So the setting is local to the claim's own transaction, and only
when that transaction is the outermost one (`lease_only_commit_applies`): inside another one it would
apply to everything that transaction writes.
"""

from __future__ import annotations

from django.db import connection

#: A select-list expression: on PostgreSQL, this transaction's commit does not wait for the disk.
LEASE_ONLY_COMMIT = "set_config('synchronous_commit', 'off', true)"


def lease_only_commit_applies() -> bool:
    """Whether a claim about to start now is its own transaction on PostgreSQL: autocommit on (no transaction
    opened by hand) and no outer atomic block."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block and connection.get_autocommit()


def commit_without_waiting() -> None:
    """Inside the outermost transaction of a claim (checked by the caller, before it opened it): its commit does not wait."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {LEASE_ONLY_COMMIT}")
