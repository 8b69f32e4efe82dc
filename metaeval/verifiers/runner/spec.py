"""From a Verifier row to what the runner needs: its preset, its label mapping and cache keys.

Kept free of queries so that validation (services), the dry run (CLI) and
the runner all read a verifier's configuration the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from annotation.vocab import canonical_label

from ..presets.base import Evidence, Message, Preset
from ..presets.custom import DEFAULT_LABELS
from ..presets import get_preset

__all__ = [
    "ENV_NAME",
    "key_variable_problem",
    "LabelMapper",
    "cache_key",
    "item_input",
    "preset_for",
    "render_item",
    "url_problem",
]

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
#: Bumped when the runner's parsing or request shape changes in a way that must invalidate old answers.
CACHE_VERSION = 1


KEY_SUFFIX = "_API_KEY"
EXTRA_KEY_VARIABLES = "CLAIMLAB_VERIFIER_KEY_VARIABLES"


def key_variable_problem(name: str) -> str | None:
    """Why a verifier may not read its API key from the variable ``name``, or None.

    Names must end in ``_API_KEY`` (OPENAI_API_KEY, TOGETHER_API_KEY, ...),
    or be listed by the operator in CLAIMLAB_VERIFIER_KEY_VARIABLES
    (comma-separated). Otherwise a researcher could name SECRET_KEY or
    DATABASE_URL and have the worker send it, as a bearer token, to a base
    URL of their choosing.
    """
    if not ENV_NAME.fullmatch(name) or len(name) > 100:
        looks_like_key = len(name) > 20 and not name.isupper()
        return ("must be the NAME of an environment variable (capitals, digits, _), e.g. OPENAI_API_KEY"
                + ("; do not paste the key itself" if looks_like_key else ""))
    allowed = {part.strip() for part in os.environ.get(EXTRA_KEY_VARIABLES, "").split(",") if part.strip()}
    if not name.endswith(KEY_SUFFIX) and name not in allowed:
        return (f"must end in {KEY_SUFFIX} (e.g. OPENAI_API_KEY), so that no other secret of the server can be sent "
                f"to an endpoint; an operator can allow other names in {EXTRA_KEY_VARIABLES}")
    return None


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) base URL, or None when it is one."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "must name a host, e.g. http://127.0.0.1:8001/v1"
    if parts.username or parts.password:
        return "must not contain a user name or password; put the key in an environment variable"
    return None


def preset_for(preset_id: str, *, template: str = "", labels: Sequence[str] = (), system: str = "") -> Preset:
    """The preset a verifier names; for ``custom`` built from its template and labels.

    Raises KeyError (unknown id) or ValueError (bad custom template/labels).
    """
    if preset_id == "custom":
        return get_preset("custom", template=template or None, labels=list(labels) or list(DEFAULT_LABELS),
                          system=system)
    return get_preset(preset_id)


class LabelMapper:
    """Preset labels -> study labels: the verifier's own map first, then the study's labels and aliases."""

    def __init__(self, study_labels: Sequence[str], aliases: Mapping[str, str], label_map: Mapping[str, str]):
        self.study_labels = list(study_labels)
        self.aliases = dict(aliases)
        self.label_map = {key.strip().casefold(): value for key, value in label_map.items()}

    def __call__(self, raw: str) -> str | None:
        mapped = self.label_map.get(raw.strip().casefold())
        if mapped is not None:
            return mapped if mapped in self.study_labels else None
        return canonical_label(raw, self.study_labels, self.aliases)

    def unmapped(self, labels: Sequence[str]) -> list[str]:
        """The labels of ``labels`` that map to no study label."""
        return [label for label in labels if self(label) is None]


@dataclass(frozen=True)
class ItemInput:
    """What a prompt is made of: claim, context and evidence passages."""

    claim: str
    context: str
    evidence: tuple[Evidence, ...]


def item_input(payload: Mapping[str, Any]) -> ItemInput:
    """An item's verification payload as prompt input (missing parts become empty)."""
    evidence = payload.get("evidence") or []
    return ItemInput(
        claim=str(payload.get("claim") or ""),
        context=str(payload.get("context") or ""),
        evidence=tuple(passage for passage in evidence if isinstance(passage, Mapping)),
    )


def render_item(preset: Preset, data: ItemInput) -> list[list[Message]]:
    """The chat requests for one item: one for claim-level presets, one per passage for evidence-level ones."""
    if preset.evidence_level:
        assert preset.render_passage is not None
        return [preset.render_passage(data.claim, passage, data.context) for passage in data.evidence]
    return [preset.render(data.claim, data.context, data.evidence)]


def cache_key(parts: Mapping[str, Any]) -> str:
    """SHA-256 of a canonical JSON of what determines an answer (model, messages, parameters, preset, parser)."""
    text = json.dumps({"v": CACHE_VERSION, **parts}, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
