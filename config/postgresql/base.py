"""Django's PostgreSQL backend, with batches that fit the 65,535 parameters of a bound statement.

Why: Claimlab binds parameters on the server (settings: DATABASE_PREPARED_STATEMENTS, issue
15), and PostgreSQL's wire protocol carries at most 65,535 parameters per statement. Django
5.2 sizes its batches for PostgreSQL as if there were no limit (client-side binding has
none), so deleting a study of 100,000 items (the cascade's `IN` lists) or a `bulk_create`
without `batch_size` failed with "number of parameters must be between 0 and 65535". Django
6.0 caps these batches itself; this backend does the same until Claimlab moves to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.backends.postgresql import base, operations

#: PostgreSQL's limit on the parameters of one statement (a 16-bit count in the Bind message).
MAX_BOUND_PARAMETERS = 65_535


class DatabaseOperations(operations.DatabaseOperations):
    def bulk_batch_size(self, fields: Sequence[Any], objs: Sequence[Any]) -> int:
        """As many rows as fit in one statement's parameters when they are bound by the server."""
        size = super().bulk_batch_size(fields, objs)
        if not self.connection.features.uses_server_side_binding:
            return size
        return max(min(size, MAX_BOUND_PARAMETERS // max(len(fields), 1)), 1)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
