"""Reading stored per-passage evidence judgements (Facts&Evidence style).

Annotations keep what the annotator (or an imported file) gave, one object
per evidence passage, so the spelling varies: ``{"index": 0, "judgement":
"support", "useful": true}``, ``{"passage": 2, "label": "not support"}``,
``{"stance": "irrelevant"}`` (position = passage). This module maps those to
the canonical support / not_support / irrelevant and the passage position,
and says what it could not read instead of guessing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Judgement", "canonical_judgement", "read_judgements"]

_JUDGEMENT_KEYS = ("judgement", "judgment", "label", "stance", "value")
_INDEX_KEYS = ("index", "passage", "evidence", "rank")
_SYNONYMS = {
    "support": "support",
    "supports": "support",
    "supported": "support",
    "completely-support": "support",
    "completely_support": "support",
    "not_support": "not_support",
    "not support": "not_support",
    "not-support": "not_support",
    "not_supported": "not_support",
    "does not support": "not_support",
    "notsupport": "not_support",
    "refute": "not_support",
    "refutes": "not_support",
    "contradict": "not_support",
    "contradicts": "not_support",
    "partially-support": "not_support",
    "partially_support": "not_support",
    "irrelevant": "irrelevant",
    "not relevant": "irrelevant",
    "not_relevant": "irrelevant",
}


@dataclass(frozen=True)
class Judgement:
    """One readable judgement: passage position, canonical verdict, useful flag."""

    passage: int
    judgement: str
    useful: bool | None


def canonical_judgement(raw: Any) -> str | None:
    """support / not_support / irrelevant, or None when the value is not one of them.

    Partial support counts as not support, as in Factcheck-Bench's mapping
    to Facts&Evidence (a claim only partly covered is not supported).
    """
    if not isinstance(raw, str):
        return None
    return _SYNONYMS.get(raw.strip().casefold())


def read_judgements(entries: Iterable[Any]) -> tuple[list[Judgement], int]:
    """The readable judgements of one annotation and how many entries were not."""
    readable: list[Judgement] = []
    unreadable = 0
    for position, entry in enumerate(entries or []):
        if not isinstance(entry, dict):
            unreadable += 1
            continue
        raw = next((entry[key] for key in _JUDGEMENT_KEYS if key in entry), None)
        verdict = canonical_judgement(raw)
        index = next((entry[key] for key in _INDEX_KEYS if key in entry), position)
        if verdict is None or isinstance(index, bool) or not isinstance(index, int) or index < 0:
            unreadable += 1
            continue
        useful = entry.get("useful")
        readable.append(Judgement(index, verdict, useful if isinstance(useful, bool) else None))
    return readable, unreadable
