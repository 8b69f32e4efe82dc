"""Background work yields the CPU to people waiting on a page (``CLAIMLAB_BACKGROUND_NICE``).

Why (issue 35): on a two-core server a million-row import parses its file in Python while its database
server process writes the rows, and an annotator's turn (the web process and its own database process)
waits for a core behind both: at a million items the annotators' p95 was 3.9-4.0x that with no import, 3.3-3.5x
with the import command niced (two A/B pairs, benchmarks/import_contention.py --million). The
worker (its imports, exports, report builds and verifier runs; RQ's work horses are forked from it) and the
import commands run at a lower CPU priority (a higher niceness), so the scheduler gives a waiting annotator's
process the core first; with nothing else to run they go as fast as before. The database server's own
processes keep their priority (they serve annotators too). A niceness is only ever raised here: an unprivileged
process cannot lower it back, and an operator who started the process nicer keeps that.
"""

from __future__ import annotations

import os

__all__ = ["lower_priority"]


def lower_priority(niceness: int) -> int:
    """Raise this process's niceness to ``niceness`` (0: leave it; never lowered); return its niceness now."""
    if not hasattr(os, "nice"):  # not on this platform
        return 0
    current = os.nice(0)
    if niceness > current:
        current = os.nice(min(niceness, 19) - current)
    return current
