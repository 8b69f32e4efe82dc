"""The preset registry: the ids a Verifier row may name, and the one place they are looked up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from .base import Aggregate, Evidence, Message, Preset
from .custom import DEFAULT_LABELS, DEFAULT_TEMPLATE, make_custom_preset
from .facts_evidence import FACTS_EVIDENCE
from .factscore import FACTSCORE
from .pairwise import PAIRWISE_JUDGE
from .ragas import RAGAS
from .safe import SAFE
from .veriscore import VERISCORE_BINARY, VERISCORE_TERNARY
from .wice import WICE

__all__ = ["Aggregate", "Evidence", "Message", "PRESETS", "Preset", "get_preset"]

PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        preset.id: preset
        for preset in (
            VERISCORE_TERNARY,
            VERISCORE_BINARY,
            FACTSCORE,
            SAFE,
            FACTS_EVIDENCE,
            RAGAS,
            WICE,
            PAIRWISE_JUDGE,
            make_custom_preset(DEFAULT_TEMPLATE, DEFAULT_LABELS),
        )
    }
)
"""Every built-in preset by id; ``custom`` here carries the default template and labels."""


def get_preset(
    preset_id: str, *, template: str | None = None, labels: Sequence[str] | None = None, system: str = ""
) -> Preset:
    """The preset named ``preset_id``; for ``custom``, built from the researcher's template and labels.

    Raises KeyError for an unknown id and ValueError when template options
    are given for a preset that has no template.
    """
    if preset_id not in PRESETS:
        raise KeyError(f"unknown verifier preset {preset_id!r}; known: {', '.join(PRESETS)}")
    if preset_id != "custom":
        if template is not None or labels is not None or system:
            raise ValueError(f"preset {preset_id!r} takes no template, labels or system prompt")
        return PRESETS[preset_id]
    if template is None and labels is None and not system:
        return PRESETS["custom"]
    return make_custom_preset(
        DEFAULT_TEMPLATE if template is None else template, DEFAULT_LABELS if labels is None else labels, system=system
    )
