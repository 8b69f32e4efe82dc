"""FActScore-style True/False verification of one atomic fact against retrieved passages.

Method: Min et al. (2023), "FActScore: Fine-grained Atomic Evaluation of
Factual Precision in Long Form Text Generation", EMNLP 2023
(arXiv:2305.14251): retrieved passages (title and text), then the fact and
the question "True or False?". Prompt wording is ours.

Parsing differs on purpose. FActScore's parser looks for the substrings
"true"/"false" (so "untrue" counts as true), settles an answer with both by
comparing where each first appears, and calls an answer with neither
supported unless it contains "not", "cannot", "unknown" or "information".
Here the *last* verdict word wins, as a whole word, case-insensitive ("It is
not true that ..., so the answer is False" reads as False), and an answer
with no verdict is unparseable.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import Evidence, Message, Preset
from .parsing import ParseResult, Vocabulary, parse_plain_verdict
from .rendering import context_block, titled_passages

__all__ = ["FACTSCORE", "parse", "render"]

_SYSTEM = """\
You decide whether a short statement is true according to the reference passages you are given.
Treat the passages as the only source of truth: a statement they do not back up counts as False, \
even if you believe it. Keep any explanation short and put it first; end with one word on its \
own line: True or False."""

_VOCABULARY = Vocabulary(
    {"true": "supported", "false": "unsupported", "not true": "unsupported", "untrue": "unsupported"}
)


def render(claim: str, context: str = "", evidence: Sequence[Evidence] = ()) -> list[Message]:
    """Passages first, then the statement and the True-or-False question."""
    user = (
        f"Reference passages:\n\n{titled_passages(evidence)}\n\n{context_block(context)}"
        f"Statement: {claim.strip()}\nTrue or False?"
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def parse(raw: str | None) -> ParseResult:
    """True -> supported, False -> unsupported; the last verdict word counts."""
    return parse_plain_verdict(raw, _VOCABULARY)


FACTSCORE = Preset(
    id="factscore",
    labels=("supported", "unsupported"),
    method=(
        "FActScore (Min et al., EMNLP 2023, arXiv:2305.14251): retrieved passages as Title/Text, then the fact "
        "and 'True or False?'. Prompt wording is ours. True -> supported, False -> unsupported. Where FActScore "
        "matches substrings, compares first positions when both words occur and guesses when neither does, "
        "the last whole-word verdict wins here and no verdict is unparseable."
    ),
    render=render,
    parse=parse,
)
