"""Verifier prompt presets and the parsers for their answers (docs/architecture.md, Mechanisms).

Pure Python: no models, no network. A runner renders a preset's chat
messages, sends them to any OpenAI-compatible endpoint, and stores what
``parse`` returns, raw output included. See ``registry.PRESETS`` for the ids;
``baselines`` holds the two verifiers that need no model at all.
"""

from .base import Aggregate, Evidence, Message, Preset
from .parsing import PARSE_STATUSES, ParseResult, ParseStatus
from .registry import PRESETS, get_preset

__all__ = [
    "Aggregate",
    "Evidence",
    "Message",
    "PARSE_STATUSES",
    "PRESETS",
    "ParseResult",
    "ParseStatus",
    "Preset",
    "get_preset",
]
