"""The shape every verifier preset has, kept apart from the registry so preset modules can import it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from .parsing import ParseResult

__all__ = ["Aggregate", "Evidence", "Message", "Preset"]

Evidence = Mapping[str, Any]
"""One evidence passage as items store it (docs/formats.md): text, title, url, source_type; extra keys are ignored."""


class Message(TypedDict):
    """One chat message, as the OpenAI chat API takes it."""

    role: Literal["system", "user", "assistant"]
    content: str


class Aggregate(TypedDict):
    """A claim-level verdict pooled from per-passage judgements."""

    label: str | None
    score: float | None
    n_support: int
    n_not_support: int
    n_irrelevant: int
    n_unparseable: int


Renderer = Callable[[str, str, Sequence[Evidence]], list[Message]]
Parser = Callable[[str | None], ParseResult]
PassageRenderer = Callable[[str, Evidence, str], list[Message]]
PairRenderer = Callable[[str, str, Sequence[str], Sequence[str]], list[Message]]
Aggregator = Callable[..., Aggregate]


@dataclass(frozen=True, kw_only=True)
class Preset:
    """A prompt and the parser for its answers: what a Verifier row names by ``id``.

    ``labels`` is what ``parse`` emits. Claim-level presets are called once
    per claim with ``render(claim, context, evidence)``. Evidence-level
    presets (``evidence_level=True``) are called once per passage with
    ``render_passage(claim, passage, context)``; their parsed passages are
    pooled into a claim verdict (labels ``claim_labels``) by
    ``aggregate(results, count_irrelevant=...)``.
    Pairwise presets (``pairwise=True``, preference studies) are called
    twice per item with ``render_pair(source, question, list_1, list_2)``,
    once with each system's list first; ``parse`` reads a screen choice
    (left = List 1) and the runner combines both orders into one of
    ``pair_labels`` (the study's preference labels).
    """

    id: str
    labels: tuple[str, ...]
    method: str
    render: Renderer
    parse: Parser
    evidence_level: bool = False
    render_passage: PassageRenderer | None = None
    aggregate: Aggregator | None = None
    claim_labels: tuple[str, ...] | None = None
    pairwise: bool = False
    render_pair: PairRenderer | None = None
    pair_labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if [self.render_pair is not None, self.pair_labels is not None] != [self.pairwise] * 2:
            raise ValueError(f"{self.id}: render_pair and pair_labels go with pairwise=True, both and only then")
        if self.pairwise and self.evidence_level:
            raise ValueError(f"{self.id}: a preset is pairwise or evidence-level, not both")
        present = [part is not None for part in (self.render_passage, self.aggregate, self.claim_labels)]
        if present != [self.evidence_level] * 3:
            raise ValueError(
                f"{self.id}: render_passage, aggregate and claim_labels go with evidence_level=True, "
                "all three and only then"
            )

    @property
    def prediction_labels(self) -> tuple[str, ...]:
        """The labels a claim-level prediction of this preset can carry."""
        if self.pair_labels is not None:
            return self.pair_labels
        return self.claim_labels if self.claim_labels is not None else self.labels
