"""Fewer garbage collections while a big import reads its file.

Why: an import makes several container objects per line (the decoded record, its row, the
tuple written), and CPython's collector runs every 700 new containers, its older generations
rescanning everything long-lived: at 100,000 items a fifth of an item import's time went into it
(7.3 s, 5.8 s with collection off). The import holds nothing cyclic that must be freed
meanwhile (its batches are dropped as they are written), so collection is made rarer while it
runs, not switched off: other threads of the process keep a collector.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: The youngest generation's threshold while an import runs (CPython's default: 700).
IMPORT_GEN0_THRESHOLD = 100_000


@contextmanager
def paused_collection() -> Iterator[None]:
    """Raise the collector's first threshold for the block (nested blocks keep the outer one's), then restore it."""
    before = gc.get_threshold()
    if before[0] >= IMPORT_GEN0_THRESHOLD:
        yield
        return
    gc.set_threshold(IMPORT_GEN0_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
