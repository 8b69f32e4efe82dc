"""Reproducible randomisation: a keyed hash of (study seed, annotator, item).

Orders and left/right placements are computed once on the server and stored on
the assignment, so a reload shows the same thing and an analysis months later
can recompute and check them from the seed.
"""

from __future__ import annotations

import hashlib


def keyed_hash(seed: int, *parts: str) -> int:
    """A 63-bit non-negative integer from BLAKE2b keyed with the study seed."""
    key = int(seed).to_bytes(8, "big", signed=True)
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), key=key, digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def claim_rank(seed: int, item_key: str) -> int:
    """Where the item stands among the study's items equally far along (lower comes later: the claim
    walks the index from the top).

    Why a per-study rank and not only the annotator's queue position: a claim looks at a bounded
    window of the (study, is_check, slots_taken, claim_rank) index (workbench/assignment_sql.py), and the queue
    position only chooses inside that window. Ordering the window by this rank makes the order in
    which items are started a random permutation of the study's items, so a study stopped after any
    number of labels has a uniform random sample of its items labelled, whatever order its file had.
    """
    return keyed_hash(seed, "rank", item_key)


def queue_position(seed: int, annotator_key: str, item_key: str) -> int:
    """Where the item sits in this annotator's queue (lower comes first)."""
    return keyed_hash(seed, "order", annotator_key, item_key)


def left_system_for(seed: int, item_key: str, slot: int, systems: list[str]) -> str:
    """The system shown as "List 1" in this slot.

    Counterbalanced across an item's annotators: a per-item coin decides the
    side for slot 0 and each next slot alternates, so N annotators of an item
    see each order floor(N/2) or ceil(N/2) times.
    """
    if len(systems) != 2:
        return ""
    return systems[(side_coin(seed, item_key) + slot) % 2]


def side_coin(seed: int, item_key: str) -> int:
    """The per-item coin (0 or 1) of `left_system_for`: slot s shows systems[(coin + s) % 2] left."""
    return keyed_hash(seed, "side", item_key) & 1
