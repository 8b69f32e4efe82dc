"""From answers to outcomes: parse what the model said, map it to a study label, pool passages into a verdict.

An outcome keeps the raw output and says how it was read (``parse_status``):
an answer that names no label the study knows is stored as unparseable,
never guessed; an evidence-level preset judges every passage, and one
failed passage fails the claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from annotation.vocab import PREFERENCE_TIE, preference_choice_parts, preference_label

from ...models import Prediction
from .chunks import Outcome
from .client import Answer, shorten
from .spec import RunSpec

if TYPE_CHECKING:
    from .jobs import Job

__all__ = ["claim_outcome", "combine_orders", "pair_label", "pairwise_outcome", "passages_outcome"]


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


#: A system-space preference label as a number: -2 = A much better ... +2 = B much better.
PAIR_POINTS = {"a_strong": -2, "a_slight": -1, PREFERENCE_TIE: 0, "b_slight": 1, "b_strong": 2}


def pair_label(first_choice: str, *, swapped: bool) -> str:
    """A judge's screen choice (left = List 1) as a system-space label; ``swapped``: B's list was List 1."""
    position, strength = preference_choice_parts(first_choice)
    if position is None:
        return PREFERENCE_TIE
    return preference_label(1 - position if swapped else position, strength)


def combine_orders(labels: Sequence[str]) -> str:
    """Both orders' labels added on the -2..+2 scale: -4..-3 A strong, -2..-1 A slight, 0 tie, then B alike."""
    total = sum(PAIR_POINTS[label] for label in labels)
    if total == 0:
        return PREFERENCE_TIE
    strength = "strong" if abs(total) >= 3 else "slight"
    return preference_label(0 if total < 0 else 1, strength)


def pairwise_outcome(spec: RunSpec, job: Job, answers: Sequence[Answer], latency_ms: int) -> Outcome:
    """Pairwise presets: the verdicts of both presentation orders, combined in system space.

    Both orders' labels are kept (``order_labels``) so the report can measure
    position inconsistency; an item where either order is unreadable is
    unparseable as a whole (half a comparison would carry the position bias
    the second order is there to cancel).
    """
    assert spec.preset is not None
    outcome = Outcome(
        job.item_id,
        job.cache_key,
        latency_ms=latency_ms,
        tokens_in=sum(answer.tokens_in for answer in answers),
        tokens_out=sum(answer.tokens_out for answer in answers),
    )
    names = [f"{system}'s list as List 1" for system in (spec.systems or ("A", "B"))]
    outcome.raw_output = "\n\n".join(
        f"--- {name} ---\n{answer.text or ''}" for name, answer in zip(names, answers, strict=False)
    )
    failed = [f"{name}: {answer.error}" for name, answer in zip(names, answers, strict=False) if answer.error]
    if failed:
        outcome.error = shorten("; ".join(failed))
        return outcome
    results = [spec.preset.parse(answer.text) for answer in answers]
    labels = [
        pair_label(result.label, swapped=order == 1) if result.label is not None else None
        for order, result in enumerate(results)
    ]
    outcome.order_labels = labels
    outcome.rationale = "\n".join(
        f"{name}: {result.label or 'unparseable'} ({label or 'no verdict'}). {result.rationale}".strip()
        for name, result, label in zip(names, results, labels, strict=False)
    )
    if len(labels) != 2 or any(label is None for label in labels):
        outcome.parse_status = Prediction.ParseStatus.UNPARSEABLE
        return outcome
    combined = combine_orders([label for label in labels if label is not None])
    outcome.raw_label = combined
    outcome.score = sum(PAIR_POINTS[label] for label in labels if label is not None) / 2
    outcome.label = spec.mapper(combined)
    loose = any(result.status != "ok" for result in results)
    outcome.parse_status = Prediction.ParseStatus.FALLBACK if loose else Prediction.ParseStatus.OK
    if outcome.label is None:
        outcome.parse_status = Prediction.ParseStatus.UNPARSEABLE
        outcome.rationale = f"verdict {combined!r} is not one of the study's labels.\n{outcome.rationale}"
    return outcome
