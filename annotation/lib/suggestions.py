"""Where a condition's machine suggestion comes from: a source the analysis app registers.

Why a registry: the suggestion is a verifier's prediction, and verifiers live in metaeval, which
builds on annotation (annotation imports neither metaeval nor accounts: .importlinter). metaeval
registers its source when it starts (metaeval/apps.py); without it, no suggestion is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: (study, verifier name, item) -> {"label", "rationale", "verifier"} or None when it has no prediction.
SuggestionSource = Callable[[Any, str, Any], dict[str, str] | None]

_source: SuggestionSource | None = None


def register_suggestion_source(source: SuggestionSource) -> None:
    global _source
    _source = source


def suggestion_for(study: Any, verifier: str, item: Any) -> dict[str, str] | None:
    """The named verifier's prediction on the item, as the annotate page shows it; None when there is none."""
    if not verifier or _source is None:
        return None
    return _source(study, verifier, item)
