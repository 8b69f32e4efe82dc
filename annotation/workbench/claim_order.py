"""The order in which fresh items are handed out, and which items never are: SQL fragments shared
by the claim (workbench/assignment_sql.py) and the annotator's progress count (workbench/selectors.py),
so the two agree on what is still available.
"""

from __future__ import annotations

from annotation.lib.rawsql import names
from annotation.models import Item


def claim_order(alias: str = "i") -> str:
    """The ORDER BY of the claim's walk: items in progress first, then the study's random permutation.

    One backward scan of the (study, is_check, slots_taken, claim_rank) index (with `unchecked`).
    Without the rank, items equally far along stood in the index's physical order, so the walk's
    window held the newest imports and a study stopped part-way had labelled the end of its file
    (issue 29).
    """
    IT = names(Item)
    return f"{alias}.{IT.slots_taken} DESC, {alias}.{IT.claim_rank} DESC"


def unchecked(alias: str = "i") -> str:
    """The condition that leaves out items used as attention or qualification checks: never handed
    out as items, to annotators or participants (issue 29), so a check stays blind.

    An equality, not `NOT is_check`: it is the index's second column, so both the claim's walk and
    the progress count stay index scans (the count an index-only one: with the flag only in the
    rows, counting 1,000 open items read 1,000 table rows, +1.8 ms per API turn at 100,000 items).
    """
    return f"{alias}.{names(Item).is_check} = false"
