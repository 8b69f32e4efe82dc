"""Number formatting for report pages: three decimals, a dash for undefined, never "nan"."""

from __future__ import annotations

import math
from typing import Any

from django import template

register = template.Library()

DASH = "—"


@register.filter
def num(value: Any, digits: int = 3) -> str:
    """A float to ``digits`` decimals; an int as it is; None/NaN as a dash."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{float(value):.{int(digits)}f}"


@register.filter
def pct(value: Any, digits: int = 1) -> str:
    """A share as a percentage; None as a dash."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    return f"{100 * float(value):.{int(digits)}f}%"


@register.filter
def ci(row: Any) -> str:
    """``[low, high]`` of a Row or an estimate dict; a dash without an interval."""
    low = getattr(row, "ci_low", None)
    high = getattr(row, "ci_high", None)
    if isinstance(row, dict):
        interval = row.get("ci") or (None, None)
        low, high = interval
    if low is None or high is None:
        return DASH
    return f"[{low:.3f}, {high:.3f}]"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """``mapping[key]`` for keys a template cannot spell (spaces, dashes)."""
    if isinstance(mapping, dict):
        return mapping.get(key)
    return None


@register.filter
def get_index(sequence: Any, index: int) -> Any:
    """``sequence[index]``, or None when out of range."""
    try:
        return sequence[index]
    except (IndexError, TypeError, KeyError):
        return None
