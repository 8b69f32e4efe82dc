"""Label vocabularies (DESIGN §3) and the mapping from raw to canonical labels.

Raw labels are always kept beside the canonical one; this module only decides
which canonical label a raw one stands for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

VERIFICATION_LABELS: tuple[str, ...] = ("supported", "contradicted", "inconclusive")
VERIFICATION_BINARY: dict[str, str] = {
    "supported": "positive",
    "contradicted": "negative",
    "inconclusive": "negative",
}
PREFERENCE_LABELS: tuple[str, ...] = ("a_strong", "a_slight", "tie", "b_slight", "b_strong")
PREFERENCE_BOTH_BAD = "both_bad"
PREFERENCE_STRENGTHS: tuple[str, ...] = ("strong", "slight")
EVIDENCE_JUDGEMENTS: tuple[str, ...] = ("support", "not_support", "irrelevant")
BINARY_SIDES: tuple[str, ...] = ("positive", "negative")


def default_labels(kind: str) -> list[str]:
    """The kind's default ordered label list."""
    return list(PREFERENCE_LABELS if kind == "preference" else VERIFICATION_LABELS)


def default_binary_map(kind: str, labels: Sequence[str]) -> dict[str, str]:
    """Binary collapse for the kind's default labels; empty for custom labels.

    Preference studies collapse to "which system won" in the analysis, not here.
    """
    if kind == "verification" and list(labels) == list(VERIFICATION_LABELS):
        return dict(VERIFICATION_BINARY)
    return {}


def canonical_label(raw: str, labels: Sequence[str], aliases: Mapping[str, str]) -> str | None:
    """Map a raw label to one of `labels`, or None when it is not one of them.

    Matching ignores case and surrounding blanks; aliases are tried first so a
    study can say that "yes" means "factual".
    """
    key = raw.strip().casefold()
    for alias, target in aliases.items():
        if alias.strip().casefold() == key:
            return target
    for label in labels:
        if label.casefold() == key:
            return label
    return None


def preference_label(preferred_index: int | None, strength: str) -> str:
    """The ordinal label for "system A/B preferred with this strength" (None: tie)."""
    if preferred_index is None:
        return "tie"
    side = "a" if preferred_index == 0 else "b"
    return f"{side}_{strength}"


def preference_parts(label: str) -> tuple[int | None, str]:
    """Split an ordinal preference label into (system index or None, strength)."""
    if label in ("tie", PREFERENCE_BOTH_BAD):
        return None, ""
    side, strength = label.split("_", 1)
    return (0 if side == "a" else 1), strength
