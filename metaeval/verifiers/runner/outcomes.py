"""From answers to outcomes: parse what the model said, map it to a study label, pool passages into a verdict.

An outcome keeps the raw output and says how it was read (``parse_status``):
an answer that names no label the study knows is stored as unparseable,
never guessed; an evidence-level preset judges every passage, and one
failed passage fails the claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...models import Prediction
from .chunks import Outcome
from .client import Answer, shorten
from .spec import RunSpec

if TYPE_CHECKING:
    from .jobs import Job

__all__ = ["claim_outcome", "passages_outcome"]


def claim_outcome(spec: RunSpec, job: Job, answer: Answer, latency_ms: int) -> Outcome:
    """Claim-level presets: one answer, parsed and mapped to the study's labels."""
    assert spec.preset is not None
    outcome = Outcome(
        job.item_id,
        job.cache_key,
        latency_ms=latency_ms,
        tokens_in=answer.tokens_in,
        tokens_out=answer.tokens_out,
        raw_output=answer.text or "",
    )
    if answer.error:
        outcome.error = answer.error
        return outcome
    parsed = spec.preset.parse(answer.text)
    outcome.raw_label = parsed.label or ""
    outcome.score = parsed.score
    outcome.rationale = parsed.rationale
    outcome.parse_status = parsed.status
    if parsed.label is not None:
        outcome.label = spec.mapper(parsed.label)
        if outcome.label is None:
            outcome.parse_status = Prediction.ParseStatus.UNPARSEABLE
            outcome.rationale = f"verdict {parsed.label!r} is not one of the study's labels. {parsed.rationale}".strip()
    return outcome


def passages_outcome(spec: RunSpec, job: Job, answers: Sequence[Answer], latency_ms: int) -> Outcome:
    """Evidence-level presets: every passage's judgement, pooled into the claim's verdict."""
    assert spec.preset is not None and spec.preset.aggregate is not None
    outcome = Outcome(
        job.item_id,
        job.cache_key,
        latency_ms=latency_ms,
        tokens_in=sum(answer.tokens_in for answer in answers),
        tokens_out=sum(answer.tokens_out for answer in answers),
    )
    outcome.raw_output = "\n\n".join(
        f"--- passage {number} ---\n{answer.text or ''}" for number, answer in enumerate(answers, start=1)
    )
    failed = [f"passage {number}: {answer.error}" for number, answer in enumerate(answers, start=1) if answer.error]
    if failed:
        outcome.error = shorten("; ".join(failed))
        return outcome
    if not answers:
        outcome.parse_status = Prediction.ParseStatus.UNPARSEABLE
        outcome.rationale = "the item has no evidence passages to judge"
        return outcome
    results = [spec.preset.parse(answer.text) for answer in answers]
    pooled = spec.preset.aggregate(results, count_irrelevant=spec.count_irrelevant)
    outcome.score = pooled["score"]
    outcome.rationale = "\n".join(
        f"[{number}] {result.label or 'unparseable'}: {result.rationale}"
        for number, result in enumerate(results, start=1)
    )
    if pooled["label"] is None:
        outcome.parse_status = Prediction.ParseStatus.UNPARSEABLE
        return outcome
    outcome.raw_label = pooled["label"]
    outcome.label = spec.mapper(pooled["label"])
    loose = any(result.status != "ok" for result in results)
    outcome.parse_status = Prediction.ParseStatus.FALLBACK if loose else Prediction.ParseStatus.OK
    if outcome.label is None:
        outcome.parse_status = Prediction.ParseStatus.UNPARSEABLE
    return outcome
