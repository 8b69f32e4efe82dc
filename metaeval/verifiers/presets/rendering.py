"""Evidence passages as text blocks for prompts, in the layouts the presets' methods used.

Items store evidence as dicts (docs/formats.md); missing or non-string fields are
left out rather than printed as "None", so a passage without a title or URL
still renders cleanly.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import Evidence

__all__ = ["context_block", "field", "numbered_passages", "search_results", "titled_passages"]


def field(passage: Evidence, name: str) -> str:
    """A passage field as stripped text ("" when absent or not a string)."""
    value = passage.get(name)
    return value.strip() if isinstance(value, str) else ""


def search_results(evidence: Sequence[Evidence]) -> str:
    """Web search results as VeriScore shows them: numbered blocks of Title, Content, Link."""
    blocks = []
    for number, passage in enumerate(evidence, start=1):
        fields = {"Title": field(passage, "title"), "Content": field(passage, "text"), "Link": field(passage, "url")}
        lines = [f"Search result {number}", *(f"{name}: {value}" for name, value in fields.items() if value)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) if blocks else "(no search results)"


def titled_passages(evidence: Sequence[Evidence]) -> str:
    """Passages as FActScore shows retrieved text: a Title line, then the Text (plus Source when known)."""
    blocks = []
    for passage in evidence:
        fields = {"Title": field(passage, "title"), "Source": field(passage, "url"), "Text": field(passage, "text")}
        blocks.append("\n".join(f"{name}: {value}" for name, value in fields.items() if value))
    return "\n\n".join(blocks) if blocks else "(no passages)"


def numbered_passages(evidence: Sequence[Evidence]) -> str:
    """Passages as ``[n] Title (url)`` headers over their text, for presets that cite by number."""
    blocks = []
    for number, passage in enumerate(evidence, start=1):
        title, url = field(passage, "title"), field(passage, "url")
        header = " ".join(part for part in (f"[{number}]", title, f"({url})" if url else "") if part)
        blocks.append(f"{header}\n{field(passage, 'text')}")
    return "\n\n".join(blocks) if blocks else "(no passages)"


def context_block(context: str) -> str:
    """A paragraph giving the text the claim was taken from, or "" when there is none."""
    context = (context or "").strip()
    return f"The claim was taken from this text:\n{context}\n\n" if context else ""
