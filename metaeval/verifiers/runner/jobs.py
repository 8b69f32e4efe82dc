"""What to do for each item of a chunk: its requests and cache key, or (baselines) its outcome outright.

A prompt that cannot be rendered for one item becomes an error on that
item's prediction; the other items go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...models import Verifier
from ..presets.base import Message
from ..presets.baselines import DEFAULT_THRESHOLD, overlap_score
from .cache import cache_key
from .chunks import Outcome
from .client import shorten
from .spec import ItemInput, RunSpec, item_input, render_item

__all__ = ["Job", "build_job", "safe_job"]


@dataclass
class Job:
    """One item to answer: its requests (one, or one per passage) and its cache key."""

    item_id: int
    cache_key: str
    requests: list[list[Message]] = field(default_factory=list)
    outcome: Outcome | None = None  # baselines: computed without any call


def build_job(spec: RunSpec, item_id: int, data: ItemInput) -> Job:
    """The item's job; raises when its prompt cannot be built (see ``safe_job``)."""
    params = spec.params
    if spec.kind == Verifier.Kind.BASELINE_MAJORITY:
        label = params["majority_label"]
        key = cache_key({"kind": spec.kind, "label": label})
        rationale = (
            f"always the most frequent of the study's {params.get('majority_source', 'labels')}: {label} "
            f"({params.get('majority_count')} of {params.get('majority_total')})"
        )
        return Job(
            item_id,
            key,
            outcome=Outcome(
                item_id, key, label=label, raw_label=label, rationale=rationale, parse_status="ok", latency_ms=0
            ),
        )
    if spec.kind == Verifier.Kind.BASELINE_OVERLAP:
        options = params.get("options") or {}
        threshold = float(options.get("threshold", DEFAULT_THRESHOLD))
        positive, negative = options["positive_label"], options["negative_label"]
        texts = [str(passage.get("text") or "") for passage in data.evidence]
        key = cache_key(
            {
                "kind": spec.kind,
                "threshold": threshold,
                "positive": positive,
                "negative": negative,
                "claim": data.claim,
                "evidence": texts,
            }
        )
        score = overlap_score(data.claim, texts)
        label = positive if score > threshold else negative
        rationale = (
            f"{score:.0%} of the claim's content words occur in its evidence "
            f"({'above' if score > threshold else 'not above'} the threshold of {threshold:.0%})"
        )
        return Job(
            item_id,
            key,
            outcome=Outcome(
                item_id,
                key,
                label=label,
                raw_label=label,
                score=score,
                rationale=rationale,
                parse_status="ok",
                latency_ms=0,
            ),
        )
    if spec.preset is None:
        raise ValueError(f"a {spec.kind} verifier has nothing to run")
    requests = render_item(spec.preset, data)
    key = cache_key(
        {
            "model": params["model"],
            "messages": requests,
            "temperature": params["temperature"],
            "max_tokens": params["max_tokens"],
            "preset": spec.preset.id,
            "parser": spec.parser_key,
        }
    )
    return Job(item_id, key, requests=requests)


def safe_job(spec: RunSpec, item_id: int, payload: dict[str, Any]) -> Job:
    """The item's job; a prompt that cannot be rendered for this item becomes an error on its prediction."""
    try:
        return build_job(spec, item_id, item_input(payload, spec.systems))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        key = cache_key({"render_error": f"{type(exc).__name__}: {exc}", "item": item_id, "params": spec.params})
        return Job(item_id, key, outcome=Outcome(item_id, key, error=shorten(f"could not build the prompt: {exc}")))
