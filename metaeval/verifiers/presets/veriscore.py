"""VeriScore-style claim verification against web search results, ternary and binary.

Method: Song, Kim & Iyyer (2024), "VeriScore: Evaluating the factuality of
verifiable claims in long-form text generation", Findings of EMNLP 2024
(arXiv:2406.19276). The model sees the claim with numbered search results
(title, snippet, link) and few-shot demos, and names one verdict. The prompt
wording is ours; the 9 demos are VeriScore's own (Apache-2.0).
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import Evidence, Message, Preset, Renderer
from .demos import load_demos
from .parsing import ParseResult, Vocabulary, parse_plain_verdict
from .rendering import context_block, search_results

__all__ = ["VERISCORE_BINARY", "VERISCORE_TERNARY"]

_TERNARY_SYSTEM = """\
You check a single factual claim against the web search results given with it.
Pick exactly one verdict:
- Supported: at least one search result states what the claim says, and none clearly says otherwise.
- Contradicted: the search results state something that cannot be true at the same time as the claim.
- Inconclusive: the search results neither confirm nor rule out the claim (off topic, too vague, \
cut off, or disagreeing with each other).
Judge from the search results only, not from what you remember. A snippet that ends in "..." \
says no more than the words shown. Every part of the claim must be covered for it to be Supported.
You may reason briefly first. Your last line must be the verdict alone: Supported, Contradicted \
or Inconclusive."""

_BINARY_SYSTEM = """\
You check a single factual claim against the web search results given with it.
Pick exactly one verdict:
- Supported: at least one search result states what the claim says, and none clearly says otherwise.
- Unsupported: the search results say something else, or do not say enough to confirm every part \
of the claim.
Judge from the search results only, not from what you remember. A snippet that ends in "..." \
says no more than the words shown.
You may reason briefly first. Your last line must be the verdict alone: Supported or Unsupported."""

_SPELLING = {
    "supported": "Supported.",
    "contradicted": "Contradicted.",
    "inconclusive": "Inconclusive.",
    "unsupported": "Unsupported.",
}


def _question(claim: str, context: str, evidence: Sequence[Evidence]) -> str:
    return f"{context_block(context)}Claim: {claim.strip()}\n\nSearch results:\n{search_results(evidence)}"


def _renderer(mode: str, system: str) -> Renderer:
    def render(claim: str, context: str = "", evidence: Sequence[Evidence] = ()) -> list[Message]:
        """System instructions, the demos as earlier turns, then the claim under test."""
        messages: list[Message] = [{"role": "system", "content": system}]
        for demo in load_demos(mode):
            messages.append({"role": "user", "content": _question(demo.claim, "", demo.evidence)})
            messages.append({"role": "assistant", "content": _SPELLING[demo.label]})
        messages.append({"role": "user", "content": _question(claim, context, evidence)})
        return messages

    return render


_TERNARY_VOCABULARY = Vocabulary(["supported", "contradicted", "inconclusive"])
_BINARY_VOCABULARY = Vocabulary(
    {"supported": "supported", "unsupported": "unsupported", "not supported": "unsupported"}
)


def parse_ternary(raw: str | None) -> ParseResult:
    """Last verdict word; ok on the last line, fallback elsewhere. Never defaults to a label."""
    return parse_plain_verdict(raw, _TERNARY_VOCABULARY)


def parse_binary(raw: str | None) -> ParseResult:
    """As :func:`parse_ternary`; ``not supported`` reads as unsupported, ``unsupported`` never as supported."""
    return parse_plain_verdict(raw, _BINARY_VOCABULARY)


_NOTE = (
    "VeriScore (Song, Kim & Iyyer, Findings of EMNLP 2024, arXiv:2406.19276): claim plus numbered Google "
    "search snippets (title, content, link), VeriScore's 9 few-shot demos as earlier chat turns, one verdict. "
    "Prompt wording is ours. Unlike VeriScore, an answer without a verdict is unparseable, not 'unsupported'."
)

VERISCORE_TERNARY = Preset(
    id="veriscore_ternary",
    labels=("supported", "contradicted", "inconclusive"),
    method=_NOTE + " Ternary: the demos keep their human labels (3 of each).",
    render=_renderer("ternary", _TERNARY_SYSTEM),
    parse=parse_ternary,
)

VERISCORE_BINARY = Preset(
    id="veriscore_binary",
    labels=("supported", "unsupported"),
    method=_NOTE + " Binary: demos labelled Contradicted or Inconclusive are shown as Unsupported "
    "(VeriScore's own binary mode shows them unmapped, under labels its question does not offer).",
    render=_renderer("binary", _BINARY_SYSTEM),
    parse=parse_binary,
)
