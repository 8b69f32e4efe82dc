"""Evidence judgements: the one rule for what an answer may say about its item's passages.

The submit of an answer (web form, API) and the import of annotations made
elsewhere both go through `checked_judgements`, so a stored judgement always
has the same shape, `{"index": 0, "judgement": "support", "useful": false}`,
with the index in range and the judgement from EVIDENCE_JUDGEMENTS. A submit
must judge every passage (`complete`): the credibility scores need them all.
An import may keep a partial set, as it was collected.
"""

from __future__ import annotations

from typing import Any

from annotation.lib.formats import json_type
from annotation.vocab import EVIDENCE_JUDGEMENTS

JUDGEMENT_KEYS = ("index", "judgement", "useful")


class InvalidEvidence(ValueError):
    """Judgements that break the rule; the message is for the user, `entry` the position at fault (if one)."""

    def __init__(self, message: str, entry: int | None = None) -> None:
        super().__init__(message)
        self.entry = entry


def checked_judgements(given: Any, passages: int, *, complete: bool) -> list[dict[str, Any]]:
    """The judgements of an item with `passages` passages, checked and in index order.

    Raises InvalidEvidence on the first problem. `useful` defaults to false
    (an unticked box); keys other than index, judgement and useful are
    refused, so a misspelt key is not silently dropped.
    """
    if not isinstance(given, list):
        raise InvalidEvidence("evidence judgements must be an array of objects with 'index' and 'judgement'")
    if given and not passages:
        raise InvalidEvidence("this item has no evidence passages to judge")
    judgements: dict[int, dict[str, Any]] = {}
    for position, entry in enumerate(given):
        judgement = _checked(entry, passages, position)
        if judgement["index"] in judgements:
            raise InvalidEvidence(f"evidence passage {judgement['index']} is judged twice", position)
        judgements[judgement["index"]] = judgement
    missing = [index for index in range(passages) if index not in judgements]
    if complete and missing:
        raise InvalidEvidence(
            f"every evidence passage needs a judgement; missing index {', '.join(map(str, missing))} "
            f"(the item has {passages} passages, index 0..{passages - 1})"
        )
    return [judgements[index] for index in sorted(judgements)]


def _checked(entry: Any, passages: int, position: int) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise InvalidEvidence(
            f"each evidence judgement must be an object with 'index' and 'judgement', got {json_type(entry)}", position
        )
    unknown = sorted(str(key) for key in entry if key not in JUDGEMENT_KEYS)
    if unknown:
        raise InvalidEvidence(
            f"unknown key(s) {', '.join(map(repr, unknown))} in an evidence judgement; "
            f"expected {', '.join(JUDGEMENT_KEYS)}",
            position,
        )
    index, judgement, useful = entry.get("index"), entry.get("judgement"), entry.get("useful", False)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < passages:
        raise InvalidEvidence(f"evidence index must be 0..{passages - 1}, got {index!r}", position)
    if judgement not in EVIDENCE_JUDGEMENTS:
        raise InvalidEvidence(
            f"evidence judgement must be one of {', '.join(EVIDENCE_JUDGEMENTS)}, got {judgement!r}", position
        )
    if not isinstance(useful, bool):
        raise InvalidEvidence("'useful' must be true or false", position)
    return {"index": index, "judgement": judgement, "useful": useful}
