"""RAGAS-faithfulness-style verification: JSON verdicts (1/0) with reasons, per statement.

Method: Es, James, Espinosa-Anke & Schockaert (2024), "RAGAs: Automated
Evaluation of Retrieval Augmented Generation", EACL 2024 System
Demonstrations (arXiv:2309.15217). In RAGAS faithfulness an LLM gives each
statement a reason and a verdict (1 = can be inferred from the context, 0 =
cannot) in JSON, and the score is the share of statements with verdict 1.
Here the claim is the statement and the evidence is the context. Prompt
wording is ours.

The model may split the claim into several statements; the score is then
the share judged 1, and the claim is supported only when every one is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .base import Evidence, Message, Preset
from .parsing import ParseResult, ParseStatus, extract_json
from .rendering import context_block, numbered_passages

__all__ = ["RAGAS", "parse", "render"]

_SYSTEM = """\
You check whether statements can be inferred from a context.
For each statement write a one-sentence reason, then a verdict: 1 if the context states it or \
directly implies it, 0 if it does not (this includes the context saying nothing about it).
Reply with JSON only, shaped like this:
{"statements": [{"statement": "<the statement>", "reason": "<why>", "verdict": 1}]}"""

_TRUE = {1, "1", "yes", "true"}
_FALSE = {0, "0", "no", "false"}
_LOOSE_VERDICT = re.compile(r"[\"']?verdict[\"']?\s*[:=]\s*[\"']?([01])(?![\d.])", re.IGNORECASE)


def render(claim: str, context: str = "", evidence: Sequence[Evidence] = ()) -> list[Message]:
    """The evidence as the context, then the claim as the one statement to judge."""
    user = f"Context:\n\n{numbered_passages(evidence)}\n\n{context_block(context)}Statements:\n1. {claim.strip()}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def _statements(value: Any) -> list[dict] | None:
    """The statement objects of a RAGAS-shaped answer (an object with "statements", or a bare list)."""
    if isinstance(value, dict):
        value = value.get("statements")
    if isinstance(value, list) and value and all(isinstance(item, dict) and "verdict" in item for item in value):
        return value
    return None


def _verdict(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    key = value.strip().casefold() if isinstance(value, str) else value
    if isinstance(key, (int, str)) and key in _TRUE:
        return 1
    if isinstance(key, (int, str)) and key in _FALSE:
        return 0
    return None


def _result(verdicts: list[int], status: ParseStatus, rationale: str, raw: str) -> ParseResult:
    score = sum(verdicts) / len(verdicts)
    return ParseResult("supported" if score == 1 else "unsupported", status, score, rationale, raw)


def parse(raw: str | None) -> ParseResult:
    """ok: the answer is RAGAS-shaped JSON (a code fence around it is fine) with readable verdicts.

    fallback: the JSON had to be dug out of prose or repaired, some verdicts
    were unreadable, or only ``"verdict": 0/1`` fragments of broken JSON were
    found; unparseable: no verdict at all.
    """
    text = raw or ""
    found = extract_json(text, accept=lambda value: _statements(value) is not None)
    if found is not None:
        items, repaired = _statements(found[0]) or [], found[1]
        readable = [(item, _verdict(item.get("verdict"))) for item in items]
        verdicts = [verdict for _, verdict in readable if verdict is not None]
        if verdicts:
            rationale = "\n".join(
                f"{verdict}: {str(item.get('reason', '')).strip()}" for item, verdict in readable if verdict is not None
            )
            status: ParseStatus = "fallback" if repaired or len(verdicts) < len(items) else "ok"
            return _result(verdicts, status, rationale, text)
    salvaged = [int(match.group(1)) for match in _LOOSE_VERDICT.finditer(text)]
    if salvaged:
        return _result(salvaged, "fallback", text.strip(), text)
    return ParseResult.unparseable(text, text.strip())


RAGAS = Preset(
    id="ragas",
    labels=("supported", "unsupported"),
    method=(
        "RAGAS faithfulness (Es et al., EACL 2024 System Demonstrations, arXiv:2309.15217): per statement a "
        "reason and a JSON verdict 1/0 against the context; score = share of verdicts 1. The claim is the "
        "statement and the evidence the context; supported only when every statement is 1. Prompt wording is "
        "ours. Code fences are accepted; JSON dug out of prose or repaired is a fallback."
    ),
    render=render,
    parse=parse,
)
