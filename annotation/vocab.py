"""Label vocabularies (docs/architecture.md, Label vocabularies) and the mapping from raw to canonical labels.

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
PREFERENCE_TIE = "tie"
PREFERENCE_LABELS: tuple[str, ...] = ("a_strong", "a_slight", PREFERENCE_TIE, "b_slight", "b_strong")
PREFERENCE_BOTH_BAD = "both_bad"
#: Labels that decline to decide (the progress page's share abstaining): "both bad", "inconclusive".
ABSTAIN_LABELS: tuple[str, ...] = (PREFERENCE_BOTH_BAD, "inconclusive")
PREFERENCE_STRENGTHS: tuple[str, ...] = ("strong", "slight")
#: What the annotator picks on screen (left is "List 1"); the label says which *system* won.
PREFERENCE_CHOICES: tuple[str, ...] = (
    "left_strong",
    "left_slight",
    PREFERENCE_TIE,
    "right_slight",
    "right_strong",
    PREFERENCE_BOTH_BAD,
)
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


def preference_label(preferred_index: int | None, strength: str = "") -> str:
    """The ordinal label for "system A (0) / B (1) preferred with this strength"; None is a tie.

    A/B are the study's systems in declared order, never screen positions.
    """
    if preferred_index is None:
        return PREFERENCE_TIE
    if preferred_index not in (0, 1) or strength not in PREFERENCE_STRENGTHS:
        raise ValueError(f"no preference label for system {preferred_index!r} with strength {strength!r}")
    return f"{'ab'[preferred_index]}_{strength}"


def preference_parts(label: str) -> tuple[int | None, str]:
    """Split a preference label into (system index, strength); (None, "") for tie and both_bad."""
    return _sided_parts(label, ("a", "b"), PREFERENCE_LABELS)


def preference_choice_parts(choice: str) -> tuple[int | None, str]:
    """Split a screen choice into (position: 0 left, 1 right, strength); (None, "") for tie and both_bad."""
    return _sided_parts(choice, ("left", "right"), PREFERENCE_CHOICES)


def _sided_parts(value: str, sides: tuple[str, str], known: Sequence[str]) -> tuple[int | None, str]:
    if value in (PREFERENCE_TIE, PREFERENCE_BOTH_BAD):
        return None, ""
    if value not in known:
        raise ValueError(f"{value!r} is not one of {', '.join(known)}")
    side, strength = value.split("_", 1)
    return sides.index(side), strength


def preference_as_seen(label: str, systems: Sequence[str], left_system: str) -> str:
    """A stored (system-space) preference label as the annotator who had `left_system` as List 1 saw the
    choice: "List 1 much better", "About the same", "Both bad" (what feedback and suggestions show)."""
    if label == PREFERENCE_TIE:
        return "About the same"
    if label == PREFERENCE_BOTH_BAD:
        return "Both bad"
    index, strength = preference_parts(label)
    if index is None or len(systems) != 2:
        return label.replace("_", " ")
    preferred = systems[index]
    return f"List {1 if preferred == left_system else 2} {'much' if strength == 'strong' else 'slightly'} better"
