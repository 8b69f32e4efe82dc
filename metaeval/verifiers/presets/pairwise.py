"""A pairwise judge for preference studies: which of two claim lists extracted from one text is better.

The judge sees the source text (and question) with the two lists as "List 1"
and "List 2", never with system names, and answers on the annotators'
5-point scale. The runner asks twice per item, once with each list first
(``runner.spec.render_item``), and combines the two verdicts in system space
(``runner.outcomes.pairwise_outcome``), so a judge that favours whatever it
reads first cancels out, and the disagreement between the two orders is its
position inconsistency (report, ``pairwise_judges``).
"""

from __future__ import annotations

from collections.abc import Sequence

from annotation.vocab import PREFERENCE_CHOICES, PREFERENCE_LABELS, PREFERENCE_TIE

from .base import Evidence, Message, Preset
from .parsing import ParseResult, Vocabulary, parse_plain_verdict

__all__ = ["PAIRWISE_JUDGE", "VERDICTS", "parse_pairwise", "render_pair"]

#: What the judge may answer, as the annotators' screen choices (left = List 1); "both bad" is not offered.
VERDICTS: tuple[str, ...] = tuple(choice for choice in PREFERENCE_CHOICES if choice != "both_bad")

_SYSTEM = """\
You compare two lists of claims that were extracted from the same text. A good list:
- states only what the text says (no claim the text does not support, nothing distorted);
- covers every verifiable fact of the text (nothing important left out);
- has atomic claims (one fact each) that stand alone (no unresolved "he", "it", "this");
- leaves out opinions, advice and other statements that cannot be checked;
- does not repeat itself.
Decide which list is better overall, and by how much. Judge only the lists' content: \
their order on the page and their length alone say nothing.
You may reason briefly first. Your last line must be exactly one of:
List 1 much better
List 1 slightly better
Tie
List 2 slightly better
List 2 much better"""

_VOCABULARY = Vocabulary(
    {
        "list 1 much better": "left_strong",
        "list 1 slightly better": "left_slight",
        "tie": PREFERENCE_TIE,
        "list 2 slightly better": "right_slight",
        "list 2 much better": "right_strong",
    }
)


def _numbered(claims: Sequence[str]) -> str:
    lines = [f"{number}. {str(claim).strip()}" for number, claim in enumerate(claims, start=1)]
    return "\n".join(lines) if lines else "(no claims)"


def render_pair(source: str, question: str, list_1: Sequence[str], list_2: Sequence[str]) -> list[Message]:
    """The judge's request for one presentation order: the text, then List 1 and List 2."""
    parts = []
    if question.strip():
        parts.append(f"Question: {question.strip()}")
    parts.append(f"Text:\n{source.strip() or '(no text)'}")
    parts.append(f"List 1:\n{_numbered(list_1)}")
    parts.append(f"List 2:\n{_numbered(list_2)}")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _no_claim_render(claim: str, context: str = "", evidence: Sequence[Evidence] = ()) -> list[Message]:
    raise ValueError("the pairwise judge compares an item's two claim lists; a verification item has none")


def parse_pairwise(raw: str | None) -> ParseResult:
    """The last of the five verdicts (as a screen choice: left = List 1); ok on the last line, else fallback."""
    return parse_plain_verdict(raw, _VOCABULARY)


PAIRWISE_JUDGE = Preset(
    id="pairwise_judge",
    labels=VERDICTS,
    method=(
        "Pairwise judge for preference studies: the source text and both claim lists as 'List 1' and 'List 2' "
        "(no system names), one verdict on the 5-point scale (List 1 much / slightly better, tie, List 2 slightly "
        "/ much better). Every item is asked twice, each list once as List 1; each verdict is turned into system "
        "space (-2 = A much better ... +2 = B much better) and the two are added: -4..-3 A strong, -2..-1 A slight, "
        "0 tie, 1..2 B slight, 3..4 B strong (opposite verdicts cancel to a tie). Both verdicts are kept; where "
        "they disagree on the winner the judge is position-inconsistent on that item. Asking in both orders "
        "follows Zheng et al. (2023), Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena, arXiv:2306.05685, "
        "which measured LLM judges' position bias. Prompt wording is ours."
    ),
    render=_no_claim_render,
    parse=parse_pairwise,
    pairwise=True,
    render_pair=render_pair,
    pair_labels=PREFERENCE_LABELS,
)
