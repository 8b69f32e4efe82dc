"""Facts&Evidence-style verification: one judgement per evidence passage, pooled into credibility.

Method: Boonsanong et al. (2025), "Facts&Evidence: An Interactive Tool for
Transparent Fine-Grained Factual Verification of Machine-Generated Text",
NAACL 2025 System Demonstrations (arXiv:2503.14797). Each retrieved passage
is judged on its own, with a short explanation, so a reader can see which
sources back a claim; the claim's credibility is the share of judged
passages that support it. Prompt wording is ours.

Per passage the model answers Yes (supports), No (about the claim but does
not support it) or Irrelevant, mapped to the evidence-judgement vocabulary of
docs/architecture.md, Label vocabularies: support / not_support / irrelevant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .base import Aggregate, Evidence, Message, Preset
from .parsing import ParseResult, Vocabulary, last_line, marked_verdict, strip_markup
from .rendering import context_block, field

__all__ = ["FACTS_EVIDENCE", "aggregate", "parse", "render_passage"]

PASSAGE_LABELS = ("support", "not_support", "irrelevant")
CLAIM_LABELS = ("supported", "unsupported")

_SYSTEM = """\
You judge one evidence passage against one claim.
First explain in one to three sentences what the passage says about the claim. Then answer:
- Yes: the passage backs up the claim.
- No: the passage is about what the claim is about, but does not back it up (it says something \
different, or leaves out what the claim asserts).
- Irrelevant: the passage is not about the claim's subject at all.
Use only the passage. Reply in exactly this format:
Rationale: <your explanation>
Answer: <Yes, No or Irrelevant>"""

_VOCABULARY = Vocabulary(
    {"yes": "support", "no": "not_support", "irrelevant": "irrelevant", "not relevant": "irrelevant"}
)
_ANSWER_ENDS = re.compile(r"[\s*_`]*(?:$|[.,;:!—–-])")
_RATIONALE = re.compile(
    r"^[\s*_#>`-]*rationale[\s*_`]*:[\s*_`]*(.*?)(?=^[\s*_#>`-]*answer\b|\Z)", re.IGNORECASE | re.MULTILINE | re.DOTALL
)


def render_passage(claim: str, passage: Evidence, context: str = "") -> list[Message]:
    """The claim, then one passage with its title, URL and source type when known."""
    fields = {
        "Title": field(passage, "title"),
        "URL": field(passage, "url"),
        "Source type": field(passage, "source_type"),
    }
    header = [f"{name}: {value}" for name, value in fields.items() if value]
    passage_block = "\n".join([*header, f"Text: {field(passage, 'text')}"])
    user = f"{context_block(context)}Claim: {claim.strip()}\n\nEvidence passage:\n{passage_block}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def render(claim: str, context: str = "", evidence: Sequence[Evidence] = ()) -> list[Message]:
    """Not available: this preset asks about one passage at a time (use ``render_passage``)."""
    raise TypeError("facts_evidence judges each passage separately: call render_passage(claim, passage, context)")


def _rationale(text: str, answer_line_start: int) -> str:
    found = _RATIONALE.search(text)
    return found.group(1).strip() if found else text[:answer_line_start].strip()


def parse(raw: str | None) -> ParseResult:
    """One passage's answer: ok from ``Answer: ...``; fallback when the last line opens with a bare verdict.

    The fallback wants the verdict set off ("No, the passage ...", "**Yes**")
    because "no" also starts ordinary prose ("No date is given").
    """
    text = raw or ""
    marked = marked_verdict(text, _VOCABULARY)
    if marked is not None:
        verdict, line_start = marked
        return ParseResult(verdict.label, "ok", None, _rationale(text, line_start), text)
    line, offset = last_line(text)
    bare = strip_markup(line)
    verdicts = _VOCABULARY.verdicts(bare)
    if verdicts and verdicts[0].start == 0 and _ANSWER_ENDS.match(bare, verdicts[0].end):
        return ParseResult(verdicts[0].label, "fallback", None, _rationale(text, offset), text)
    return ParseResult.unparseable(text, text.strip())


def aggregate(results: Sequence[ParseResult], *, count_irrelevant: bool, supported_above: float = 0.5) -> Aggregate:
    """Credibility of a claim from its passages' parsed judgements.

    score = support / (support + not_support [+ irrelevant when
    ``count_irrelevant``]); label = supported when the score is above
    ``supported_above`` (by default: most counted passages support it).
    Unparseable passages are left out of both and counted in
    ``n_unparseable``; with nothing counted, label and score are None.
    """
    counts = dict.fromkeys(PASSAGE_LABELS, 0)
    unparseable = 0
    for result in results:
        if result.label is None:
            unparseable += 1
        elif result.label in counts:
            counts[result.label] += 1
        else:
            raise ValueError(f"not a passage judgement: {result.label!r}")
    denominator = counts["support"] + counts["not_support"] + (counts["irrelevant"] if count_irrelevant else 0)
    score = counts["support"] / denominator if denominator else None
    label = None if score is None else ("supported" if score > supported_above else "unsupported")
    return {
        "label": label,
        "score": score,
        "n_support": counts["support"],
        "n_not_support": counts["not_support"],
        "n_irrelevant": counts["irrelevant"],
        "n_unparseable": unparseable,
    }


FACTS_EVIDENCE = Preset(
    id="facts_evidence",
    labels=PASSAGE_LABELS,
    claim_labels=CLAIM_LABELS,
    method=(
        "Facts&Evidence (Boonsanong et al., NAACL 2025 System Demonstrations, arXiv:2503.14797): each evidence "
        "passage judged separately with a short rationale (Yes / No / Irrelevant -> support / not_support / "
        "irrelevant); the claim's credibility = support / (support + not_support [+ irrelevant, a study "
        "option]); supported when credibility > 0.5. Unparseable passages are excluded and counted. Prompt "
        "wording is ours."
    ),
    render=render,
    parse=parse,
    evidence_level=True,
    render_passage=render_passage,
    aggregate=aggregate,
)
