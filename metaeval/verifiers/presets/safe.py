"""SAFE-style rating: reason over the evidence, then a final answer in square brackets.

Method: Wei et al. (2024), "Long-form factuality in large language models"
(SAFE, Search-Augmented Factuality Evaluator), NeurIPS 2024
(arXiv:2403.18802). SAFE issues its own Google searches step by step; here
the evidence is given with the item and only the final rating step is used:
think it through, then answer ``[Supported]`` or ``[Not Supported]``.
Prompt wording is ours.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .base import Evidence, Message, Preset
from .parsing import ParseResult, Vocabulary, last_line
from .rendering import context_block, numbered_passages

__all__ = ["SAFE", "parse", "render"]

_SYSTEM = """\
You rate whether a statement is supported by a set of search results.
Work step by step: say what the statement claims, what the relevant results say, and whether they \
agree. Use only the search results; a statement that they do not back up is Not Supported.
Finish with your final answer in square brackets, exactly one of: [Supported] or [Not Supported]."""

_VOCABULARY = Vocabulary({"supported": "supported", "not supported": "unsupported", "unsupported": "unsupported"})
_BRACKETED = re.compile(r"\[([^\[\]\n]{1,40})\]")
_OPTION_AFTER = re.compile(r"\s*(?:,|/|\bor\b)\s*\[", re.IGNORECASE)
_OPTION_BEFORE = re.compile(r"\]\s*(?:,|/|\bor\b)\s*$", re.IGNORECASE)


def render(claim: str, context: str = "", evidence: Sequence[Evidence] = ()) -> list[Message]:
    """The statement, then the numbered search results, then the bracketed-answer request."""
    user = (
        f"{context_block(context)}Statement: {claim.strip()}\n\nSearch results:\n\n{numbered_passages(evidence)}"
        "\n\nIs the statement supported by these search results?"
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def _offered(text: str, bracket: re.Match[str]) -> bool:
    """True when the bracket is one of a list of options ("[Supported] or [Not Supported]")."""
    return bool(_OPTION_AFTER.match(text, bracket.end()) or _OPTION_BEFORE.search(text[: bracket.start()]))


def parse(raw: str | None) -> ParseResult:
    """ok: the last bracketed verdict; fallback: a bare verdict in the last line; else unparseable."""
    text = raw or ""
    for bracket in reversed(list(_BRACKETED.finditer(text))):
        label = _VOCABULARY.exact(bracket.group(1))
        if label is not None and not _offered(text, bracket):
            return ParseResult(label, "ok", None, text[: bracket.start()].strip(), text)
    line, offset = last_line(text)
    verdict = _VOCABULARY.last(line)
    if verdict is not None:
        return ParseResult(verdict.label, "fallback", None, text[:offset].strip() or text.strip(), text)
    return ParseResult.unparseable(text, text.strip())


SAFE = Preset(
    id="safe",
    labels=("supported", "unsupported"),
    method=(
        "SAFE rating step (Wei et al., 'Long-form factuality in large language models', NeurIPS 2024, "
        "arXiv:2403.18802): step-by-step reasoning over search results, final answer [Supported] or "
        "[Not Supported]; the evidence comes with the item instead of SAFE's own searches. Prompt wording is "
        "ours. The last bracketed verdict counts; a bare verdict on the last line is a fallback."
    ),
    render=render,
    parse=parse,
)
