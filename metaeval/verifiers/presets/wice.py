"""WiCE-style entailment: numbered evidence sentences in, XML explanation and answer out.

Method: Kamoi, Goyal, Rodriguez & Durrett (2023), "WiCE: Real-World
Entailment for Claims in Wikipedia", EMNLP 2023 (arXiv:2303.01432). The
model reads a claim with sentences of a cited article, each tagged with its
position, explains which sentences bear on it, and answers supported /
partially_supported / not_supported inside ``<answer>``. This is the format
of WiCE's released GPT-4 outputs, which serve as our parser's test data.
Prompt wording is ours (WiCE's few-shot demos are not reused).

Scores follow WiCE's entailment scores: 1.0 / 0.5 / 0.0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .base import Evidence, Message, Preset
from .parsing import ParseResult, Vocabulary, last_line
from .rendering import context_block, field

__all__ = ["WICE", "parse", "render"]

LABELS = ("supported", "partially_supported", "not_supported")
SCORES = {"supported": 1.0, "partially_supported": 0.5, "not_supported": 0.0}

_SYSTEM = """\
You decide how far a claim from a Wikipedia article is backed by sentences taken from a source it cites.
Each evidence sentence is tagged with its position in the source, as <sentence_N>...</sentence_N>.
Answers:
- supported: the sentences back every part of the claim;
- partially_supported: they back some parts of the claim but not all;
- not_supported: they back no part of the claim.
Explain first, citing sentence numbers; then answer. Reply in this XML format and nothing else:
<output>
    <explanation>your reasoning</explanation>
    <answer>supported, partially_supported or not_supported</answer>
</output>"""

_VOCABULARY = Vocabulary(LABELS)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_EXPLANATION = re.compile(r"<explanation>(.*?)</explanation>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"</?\w+[^>]*>")


def _sentence(position: int, passage: Evidence) -> str:
    index = passage.get("index", position)
    attributes = "".join(
        f' {name}="{value}"'
        for name, value in (("title", field(passage, "title")), ("url", field(passage, "url")))
        if value
    )
    return f"        <sentence_{index}{attributes}>{field(passage, 'text')}</sentence_{index}>"


def render(claim: str, context: str = "", evidence: Sequence[Evidence] = ()) -> list[Message]:
    """The claim and its evidence sentences in WiCE's XML input layout.

    A passage's ``index`` key (its position in the source article) numbers
    it when present, else its position in the list; title and URL become
    attributes. Text is not XML-escaped: the reader is a model, not a parser.
    """
    sentences = "\n".join(_sentence(position, passage) for position, passage in enumerate(evidence))
    user = (
        f"{context_block(context)}<input>\n    <claim>{claim.strip()}</claim>\n    <evidence>\n{sentences}\n"
        "    </evidence>\n</input>"
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def _explanation(text: str) -> str:
    found = _EXPLANATION.findall(text)
    return found[-1].strip() if found else _TAG.sub("", text).strip()


def parse(raw: str | None) -> ParseResult:
    """ok: the last ``<answer>`` holds exactly one label; fallback: a verdict in the last line without tags.

    Regular expressions, not an XML parser: real outputs are not always
    well-formed XML (an unescaped "&" in the explanation, for one).
    """
    text = raw or ""
    answers = _ANSWER.findall(text)
    label = _VOCABULARY.exact(answers[-1]) if answers else None
    if label is not None:
        return ParseResult(label, "ok", SCORES[label], _explanation(text), text)
    line, _ = last_line(_TAG.sub(" ", text))
    verdict = _VOCABULARY.last(line)
    if verdict is None and answers:
        verdict = _VOCABULARY.last(answers[-1])
    if verdict is not None:
        return ParseResult(verdict.label, "fallback", SCORES[verdict.label], _explanation(text), text)
    return ParseResult.unparseable(text, _explanation(text))


WICE = Preset(
    id="wice",
    labels=LABELS,
    method=(
        "WiCE (Kamoi et al., EMNLP 2023, arXiv:2303.01432): claim plus position-tagged evidence sentences in XML; "
        "the model explains, then answers supported / partially_supported / not_supported in <answer>. Prompt "
        "wording is ours; WiCE's demos are not reused. Score 1.0 / 0.5 / 0.0 as WiCE's entailment scores. A "
        "verdict outside the answer tag (tag missing or not a label) is a fallback."
    ),
    render=render,
    parse=parse,
)
