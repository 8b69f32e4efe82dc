"""A study's between-subject conditions (issue 32): which ones it declares, checked once and stored complete.

Why: the automation-bias question ("do annotators who see a verifier's suggestion agree with it
more?") needs the platform to assign the conditions, not the researcher's script. Written as
strings or objects::

    ["no_suggestion", "verifier_suggestion:gpt4-judge"]
    [{"key": "control"}, {"key": "shown", "verifier": "gpt4-judge"}]

stored as ``[{"key": "no_suggestion", "verifier": ""}, {"key": "verifier_suggestion", "verifier":
"gpt4-judge"}]``. A condition with a verifier shows that verifier's prediction beside the item,
marked as a machine suggestion (a preference judge's verdict in the screen's terms: "List 1
slightly better"). Exact N holds, as the researcher chooses (Study.exact_n_per), per item across
conditions (the item's N slots go to whoever claims them, whatever their condition) or per item in
each condition (N x C slots, N of them in each condition's range: conditions.services.claimable_slots).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from annotation.errors import ServiceError

MAX_CONDITIONS = 6
KEY_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,31}")
#: What the settings and the report say about exact N, by Study.exact_n_per.
EXACT_N_RULES = {
    "item": "exact N holds per item across conditions: an item's N annotators may come from any condition",
    "condition": "exact N holds per item in each condition: every item is labelled by N annotators of each condition",
}


def _one(raw: Any, position: int) -> dict[str, str]:
    where = f"condition {position}"
    if isinstance(raw, str):
        written, _, named = raw.strip().partition(":")
        raw = {"key": written.strip(), "verifier": named.strip()}
    if not isinstance(raw, Mapping) or set(raw) - {"key", "verifier"}:
        raise ServiceError(
            f"{where}: write a key, or key:<verifier name> (e.g. verifier_suggestion:gpt4), or {{key, verifier}}"
        )
    key, verifier = raw.get("key"), raw.get("verifier") or ""
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise ServiceError(f"{where}: the key must be 1-32 lower-case letters, digits or _, e.g. no_suggestion")
    if not isinstance(verifier, str) or len(verifier) > 100:
        raise ServiceError(f"{where} ({key}): the verifier is a verifier's name (at most 100 characters)")
    return {"key": key, "verifier": verifier.strip()}


def parse_conditions(raw: Any) -> list[dict[str, str]]:
    """The study's conditions, checked; none (an empty list) or 2 to MAX_CONDITIONS distinct ones."""
    if raw in (None, "", []):
        return []
    if isinstance(raw, str):
        raw = [part for part in re.split(r"[\n,]", raw) if part.strip()]
    if not isinstance(raw, list):
        raise ServiceError("conditions must be a list")
    conditions = [_one(entry, position) for position, entry in enumerate(raw, start=1)]
    if not 2 <= len(conditions) <= MAX_CONDITIONS:
        raise ServiceError(f"a study has no conditions or 2 to {MAX_CONDITIONS}, got {len(conditions)}")
    keys = [condition["key"] for condition in conditions]
    if len(set(keys)) != len(keys):
        raise ServiceError(f"condition keys must be distinct, got {', '.join(keys)}")
    return conditions


def conditions_text(conditions: list[dict[str, str]]) -> str:
    """Stored conditions as the settings page shows them, one per line."""
    return "\n".join(f"{c['key']}:{c['verifier']}" if c["verifier"] else c["key"] for c in conditions)
