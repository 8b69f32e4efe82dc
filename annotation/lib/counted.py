"""A queryset whose length is already known, so paging it does not count the rows again.

Django's Paginator (and DRF's pagination, which uses it) asks the queryset for ``count()``: a
``COUNT(*)`` over every matching row, which at a million items costs more than the page itself
(issue 35: the item list grew 42-54x from 1,000 to 1,000,000 items). Where the count is kept in
counter rows (annotation/progress/counters.py), wrap the queryset in ``Counted`` with it.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet


class Counted:
    """`queryset` with `count` rows, as far as a Paginator asks: ``count()``, ``len()``, slices."""

    def __init__(self, queryset: QuerySet, count: int) -> None:
        self.queryset = queryset
        self._count = count

    @property
    def ordered(self) -> bool:
        """As the queryset's (the Paginator warns about unordered lists)."""
        return self.queryset.ordered

    def count(self) -> int:
        return self._count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        return self.queryset[index]

    def __iter__(self):
        return iter(self.queryset)
