"""The one result type every statistic returns.

A number that goes into a paper must say when it is undefined, how many items
it rests on and how uncertain it is. ``Estimate`` carries exactly that, and
``to_dict`` turns it into JSON without ever letting a NaN through: an undefined
value is ``None`` with a reason, never 0 or 1.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Estimate", "json_ready"]


def _finite_or_none(x: Any) -> float | None:
    """A plain float, or None for None/NaN/inf (JSON has no NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _json_key(key: Any) -> Any:
    if isinstance(key, (str, int, float, bool)) or key is None:
        return key
    if isinstance(key, np.generic):
        return key.item()
    return str(key)


def json_ready(obj: Any) -> Any:
    """Recursively convert numpy scalars/arrays, tuples and NaN to JSON types."""
    if isinstance(obj, Estimate):
        return obj.to_dict()
    if isinstance(obj, dict):
        return {_json_key(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [json_ready(v) for v in obj.tolist()]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _finite_or_none(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


@dataclass(frozen=True)
class Estimate:
    """A point estimate, or ``None`` with the reason it is undefined.

    ``n_items`` is the number of items the value rests on; ``ci`` an optional
    (low, high) interval; ``extra`` any counts that explain the value (items
    left out, observed and chance agreement, ...).
    """

    value: float | None
    reason: str | None = None
    n_items: int = 0
    ci: tuple[float, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        value = _finite_or_none(self.value)
        reason = self.reason
        if value is None and reason is None:
            # A NaN that reached us is still undefined; say so rather than hide it.
            reason = "undefined (the computation gave no finite value)"
        ci = self.ci
        if ci is not None:
            lo, hi = _finite_or_none(ci[0]), _finite_or_none(ci[1])
            ci = None if lo is None or hi is None else (lo, hi)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "n_items", int(self.n_items))
        object.__setattr__(self, "ci", ci)

    @property
    def defined(self) -> bool:
        return self.value is not None

    @classmethod
    def undefined(cls, reason: str, n_items: int = 0, **extra: Any) -> Estimate:
        return cls(None, reason=reason, n_items=n_items, extra=extra)

    def with_ci(self, ci: tuple[float, float] | None, **extra: Any) -> Estimate:
        """A copy with an interval (and more extra keys) attached."""
        return dataclasses.replace(self, ci=ci, extra={**self.extra, **extra})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"value", "reason", "n_items", "ci", **extra}``."""
        out: dict[str, Any] = {
            "value": self.value,
            "reason": self.reason,
            "n_items": self.n_items,
            "ci": list(self.ci) if self.ci is not None else None,
        }
        for key, val in self.extra.items():
            if key not in out:
                out[key] = json_ready(val)
        return out
