"""PostgreSQL: an import of new items COPYs its rows straight into the item table, in one transaction.

Why not the staging table there (item_staging.py): staging writes every row twice (the temporary
table, then INSERT ... SELECT at the switch) and ran one COPY per batch of 1,000 rows, waiting for
the server after each: a million items took 3.6x a bare COPY of the same rows (issue 35).
PostgreSQL does not need it. Rows a transaction inserts are invisible to every other connection
until it commits, and inserting them takes no lock that annotators wait on (the items' foreign key
to the study is checked at commit: DEFERRABLE INITIALLY DEFERRED). So one COPY stays open while
the file is read: the server stores rows while Python parses the next ones (two processes, both
cores), and a problem on any line rolls the whole transaction back, all or nothing as before.
SQLite keeps staging: there a writing transaction holds the database's only write lock.

Item imports of one study are serialised by a transaction-level advisory lock (`lock_item_imports`,
taken by the staging switch too), so an import reads the study's items after the one before it has
committed, instead of checking at the end for ids another import took meanwhile.

Only for imports that cannot update items (no `update`, or a study without items yet): an update
import stages as before, since its switch reads the rows it replaces.
"""

from __future__ import annotations

import json
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction

from annotation.errors import ImportFailed
from annotation.lib.copy_text import OpenCopy, lock_imports
from annotation.lib.formats import RecordError
from annotation.lib.rawsql import Names, execute, fetch_all
from annotation.models import DomainCount, Item, Study
from annotation.transfer.services.item_staging import MAX_REPORTED_CONFLICTS, mixed_response_errors
from annotation.workbench.adaptive import unopened_slots

#: The advisory lock namespace of item imports (the study's id is the other key).
ITEM_IMPORT_LOCK = 73_501
#: The columns a new item's row gives, in COPY order.
COPY_COLUMNS = (
    "study",
    "external_id",
    "position",
    "claim_rank",
    "domain",
    "summary",
    "payload",
    "response_id",
    "system",
    "gold_label",
    "gold_raw",
    "slots_taken",
    "created_at",
    "updated_at",
)


def lock_item_imports(study: Study) -> None:
    """PostgreSQL: wait for the study's other item import to commit or roll back; held until this transaction ends."""
    lock_imports(ITEM_IMPORT_LOCK, study.pk)


class ItemCopy:
    """One import's COPY into the item table: new items in file order, positions after the study's last.

    Made under the import lock: `existing` (the study's items, external id -> pk) and `last` (its
    last position) then stay true until this transaction ends.
    """

    def __init__(self, study: Study, *, now: datetime) -> None:
        self.study = study
        self.now = now
        self.existing: dict[str, int] = dict(Item.objects.filter(study=study).values_list("external_id", "pk"))
        last = Item.objects.filter(study=study).order_by("-position").values_list("position", flat=True).first()
        self.last: int = last or 0
        self.slots_taken = unopened_slots(study)
        self.domains: Counter[str] = Counter()
        self.gold: Counter[str] = Counter()
        self.lines = array("q")  # the file line of each new item, by its rank - 1 (compact: a million is 8 MB)
        item = Names(Item)
        self.copy = OpenCopy(item.table, [getattr(item, name) for name in COPY_COLUMNS])

    def add(self, row: Sequence[Any]) -> None:
        """Write one new item, a tuple in item_staging.STAGED_FIELDS order (its `new_rank` set, no target)."""
        line, new_rank, _target, external_id, rank, domain, summary, payload, response_id, system, gold, raw = row
        self.copy.write_row(
            (
                self.study.pk,
                external_id,
                self.last + new_rank,
                rank,
                domain,
                summary,
                json.dumps(payload),  # what Django's JSONField stores: json.dumps, no encoder
                response_id,
                system,
                gold,
                raw,
                self.slots_taken,
                self.now,
                self.now,
            )
        )
        self.domains[domain] += 1
        if gold:
            self.gold[domain] += 1
        self.lines.append(line)


@contextmanager
def item_copy_for(study: Study, *, now: datetime) -> Iterator[ItemCopy]:
    """A transaction holding the study's item-import lock and an open COPY into the item table.

    Leaving with an exception aborts the COPY and rolls everything back; the caller ends the COPY
    (`ItemCopy.copy.end`) and makes the rows live (`finish_copy`) before leaving normally, which commits.
    """
    with transaction.atomic():
        lock_item_imports(study)
        target = ItemCopy(study, now=now)
        target.copy.start()
        try:
            yield target
        except BaseException as failure:
            target.copy.end(failure)
            raise
        target.copy.end()  # the caller ended it before `finish_copy`: nothing to do


def finish_copy(target: ItemCopy, *, systems: list[str]) -> None:
    """Check what only the stored items can tell, count the new items and set the study's systems; or ImportFailed.

    Runs in the COPY's transaction after the COPY ended. The new items are those past `target.last`.
    """
    study = target.study
    locked = Study.objects.select_for_update(no_key=True).get(pk=study.pk)
    if study.is_preference and locked.systems and systems != locked.systems:
        raise ImportFailed(
            [
                RecordError(
                    None,
                    f"the study's systems became {locked.systems} while this file (systems {systems}) "
                    "was being read; nothing was changed",
                )
            ]
        )
    if target.existing and not study.is_preference:
        mixed = responses_mixed_with_stored(target)
        if mixed:
            raise ImportFailed(mixed)
    item = Names(Item)
    slots = unopened_slots(locked)
    if slots != target.slots_taken:  # adaptive overlap changed while the file was read (workbench/adaptive.py)
        execute(
            f"UPDATE {item.table} SET {item.slots_taken} = %s WHERE {item.study} = %s AND {item.position} > %s",
            [slots, study.pk, target.last],
        )
    _count_new_items(target)
    if study.is_preference and systems != locked.systems:
        locked.systems = systems
        locked.save(update_fields=["systems", "updated_at"])
        study.systems = systems


def _count_new_items(target: ItemCopy) -> None:
    """The study's item counters (progress/counters.py) gain the new items per domain, in the import's transaction."""
    domains = Names(DomainCount)
    for domain, items in target.domains.items():
        execute(
            f"INSERT INTO {domains.table} ({domains.study}, {domains.domain}, {domains.items}, {domains.gold}) "
            "VALUES (%s, %s, %s, %s) "
            f"ON CONFLICT ({domains.study}, {domains.domain}) DO UPDATE SET "
            f"{domains.items} = {domains.table}.{domains.items} + excluded.{domains.items}, "
            f"{domains.gold} = {domains.table}.{domains.gold} + excluded.{domains.gold}",
            [target.study.pk, domain, items, target.gold[domain]],
        )


def responses_mixed_with_stored(target: ItemCopy) -> list[RecordError]:
    """New claims whose response the study's earlier items give another system or domain (as
    item_staging.responses_mixed_with_stored, by line: a new item's line is its position past the last)."""
    item = Names(Item)
    rows = fetch_all(
        f"SELECT n.{item.position} - %s, n.{item.response_id}, n.{item.system}, n.{item.domain}, "
        f"o.{item.external_id}, o.{item.system}, o.{item.domain} FROM {item.table} AS n "
        f"JOIN {item.table} AS o ON o.{item.study} = n.{item.study} AND o.{item.response_id} = n.{item.response_id} "
        f"AND o.{item.position} <= %s "
        f"WHERE n.{item.study} = %s AND n.{item.position} > %s AND n.{item.response_id} <> '' "
        f"AND (o.{item.system} <> n.{item.system} OR o.{item.domain} <> n.{item.domain}) "
        f"ORDER BY n.{item.position}, o.{item.position}, o.{item.id} LIMIT %s",
        [target.last, target.last, target.study.pk, target.last, MAX_REPORTED_CONFLICTS],
    )
    return mixed_response_errors([(target.lines[rank - 1], *rest) for rank, *rest in rows])
