"""How many glibc malloc arenas a Claimlab process keeps (``CLAIMLAB_MALLOC_ARENAS``).

Why (issue 35): glibc gives each thread that allocates under contention an arena of its own, and an
arena's freed memory is kept for that arena. A big report's build reads on threads of its own
(``metaeval/snapshot_reads``: the labels, their assignments and the items side by side), stores its
first sections on another and computes the per-domain agreement on a third: each left its transient
arrays in its own arena. With a million claims that was 60 MB of a build's 1 GB (measured with
``MALLOC_ARENA_MAX=1``, glibc's own variable, at the same speed). Set here, at settings time, before
any thread of the process allocates. An operator's ``MALLOC_ARENA_MAX`` wins; 0 leaves glibc's default
(8 per core); elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

__all__ = ["limit_malloc_arenas"]

#: mallopt's parameter number for the arena limit (glibc's malloc.h: M_ARENA_MAX).
M_ARENA_MAX = -8


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap this process's malloc arenas at ``arenas``; True when glibc took the cap."""
    if arenas <= 0 or os.environ.get("MALLOC_ARENA_MAX") or platform.libc_ver()[0] != "glibc":
        return False
    path = ctypes.util.find_library("c")
    if path is None:
        return False
    return bool(ctypes.CDLL(path).mallopt(M_ARENA_MAX, arenas))
