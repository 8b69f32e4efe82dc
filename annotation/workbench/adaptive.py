"""Adaptive overlap (issue 33): every item gets n_min annotators, and another, up to N, only while
their answers do not reach k in agreement (e.g. 2, and a third on disagreement).

How it keeps exact N's guarantees without a second mechanism: an adaptive item's counter
(`Item.slots_taken`) counts its unopened slots as taken. A new item starts with N - n_min of them,
so the claim's unchanged `slots_taken < N` (assignment_sql.py) hands out n_min slots, the
(item, slot) unique constraint still bounds every item at N, and items with a slot open stay at
the top of the claim's walk as items in progress do. The answer that leaves an item with every
open slot answered and no lease out decides, under the item's row lock (the answer's own count
on the item takes it, progress/counters.insert_locking_item), so of two answers given at once the
second decides on both:

- k or more answers agree, and there are at least n_min: the item closes (counter N,
  `Item.closed_after` = its answers) and counts as complete;
- otherwise, below N: one more slot opens (counter N - 1).

A revision of an answer later does not reopen a closed item (its answers are used as revised);
a revision on an open item counts at the item's next answer. A skip or a lapsed lease gives its
slot back as in any study.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from django.db.models import F

from annotation.models import Annotation, Assignment, Item, Study
from annotation.vocab import preference_parts

__all__ = [
    "agreeing",
    "answer_decides",
    "direction",
    "open_new_items",
    "shift_unopened_slots",
    "unopened_slots",
]


def unopened_slots(study: Study) -> int:
    """The slots a new item of the study starts with counted as taken: N - n_min (0 when not adaptive)."""
    return study.unopened_slots


def direction(study: Study, label: str) -> str:
    """What two answers must share to agree: the label, or in a preference study the direction
    (which system won, or a tie / both bad): "A slightly better" agrees with "A much better"."""
    if not study.is_preference:
        return label
    try:
        preferred, _ = preference_parts(label)
    except ValueError:
        return label
    return label if preferred is None else "ab"[preferred]


def agreeing(study: Study, labels: Iterable[str]) -> int:
    """The largest number of answers that agree (`direction`), 0 without answers."""
    counts = Counter(direction(study, label) for label in labels)
    return max(counts.values(), default=0)


def answer_decides(study: Study, item_id: int) -> int:
    """After a new answer on an adaptive item (its row locked by the answer's count): close it or open
    a slot, as the rule says; the answers that complete the item, for the counters (`answer_added`).

    Call in the answer's transaction, after the item's row lock. The answers are read after the
    lock, so they include every answer committed before it (PostgreSQL's READ COMMITTED takes a
    snapshot per statement); a lease still out (another answer on its way, or a slot not taken
    back) leaves the decision to the answer that ends it.
    """
    n = study.annotators_per_item
    labels = list(Annotation.objects.filter(assignment__item_id=item_id).values_list("label", flat=True))
    answers = len(labels)
    if answers >= n:
        return n
    if Assignment.objects.filter(item_id=item_id, status=Assignment.Status.ACTIVE).exists():
        return n
    min_n, k = study.adaptive_min_n or n, study.adaptive_agreement or n
    if answers >= min_n and agreeing(study, labels) >= k:
        Item.objects.filter(pk=item_id).update(slots_taken=n, closed_after=answers)
        return answers
    # Every open slot answered (the counter is N) and the rule not met: one more opens. With a
    # slot still free (a skip gave it back) the counter is below N and nothing changes.
    Item.objects.filter(pk=item_id, slots_taken=n).update(slots_taken=n - 1)
    return n


def open_new_items(study: Study) -> int:
    """Give the study's new items (counter 0: never initialised) their unopened slots; how many.

    An adaptive item's counter is never 0 once initialised (it counts N - n_min unopened slots, and
    slots open only after answers that keep theirs), so 0 marks exactly the items added since.
    Called after every write that adds items to a study (imports, copies, the demo).
    """
    unopened = unopened_slots(study)
    if not unopened:
        return 0
    return Item.objects.filter(study=study, slots_taken=0).update(slots_taken=unopened)


def shift_unopened_slots(study: Study, before: int) -> None:
    """After a settings change (only before the first answer): move every item's counter by the change
    in unopened slots (`before`: the count under the old settings). Leases already out keep theirs."""
    change = unopened_slots(study) - before
    if change > 0:
        Item.objects.filter(study=study).update(slots_taken=F("slots_taken") + change)
    elif change < 0:
        Item.objects.filter(study=study, slots_taken__gte=-change).update(slots_taken=F("slots_taken") + change)
