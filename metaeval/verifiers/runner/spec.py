"""From a run's fixed configuration to what a chunk needs: its preset, its label mapping, its items' prompts.

Kept free of queries so that validation (services), the dry run (CLI) and
the runner all read a verifier's configuration the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from annotation.vocab import canonical_label

from ...models import Verifier, VerifierRun
from ..presets import get_preset
from ..presets.base import Evidence, Message, Preset
from ..presets.custom import DEFAULT_LABELS
from .keys import Target, target_for

__all__ = [
    "ItemInput",
    "LabelMapper",
    "RunSpec",
    "item_input",
    "preset_for",
    "render_item",
    "spec_for",
]


def preset_for(preset_id: str, *, template: str = "", labels: Sequence[str] = (), system: str = "") -> Preset:
    """The preset a verifier names; for ``custom`` built from its template and labels.

    Raises KeyError (unknown id) or ValueError (bad custom template/labels).
    """
    if preset_id == "custom":
        return get_preset(
            "custom", template=template or None, labels=list(labels) or list(DEFAULT_LABELS), system=system
        )
    return get_preset(preset_id)


class LabelMapper:
    """Preset labels -> study labels: the verifier's own map first, then the study's labels and aliases."""

    def __init__(self, study_labels: Sequence[str], aliases: Mapping[str, str], label_map: Mapping[str, str]):
        self.study_labels = list(study_labels)
        self.aliases = dict(aliases)
        self.label_map = {key.strip().casefold(): value for key, value in label_map.items()}

    def __call__(self, raw: str) -> str | None:
        mapped = self.label_map.get(raw.strip().casefold())
        if mapped is not None:
            return mapped if mapped in self.study_labels else None
        return canonical_label(raw, self.study_labels, self.aliases)

    def unmapped(self, labels: Sequence[str]) -> list[str]:
        """The labels of ``labels`` that map to no study label."""
        return [label for label in labels if self(label) is None]


@dataclass(frozen=True)
class ItemInput:
    """What a prompt is made of: claim, context and evidence passages; or a preference item's text and lists."""

    claim: str
    context: str
    evidence: tuple[Evidence, ...]
    source: str = ""
    question: str = ""
    lists: tuple[tuple[str, ...], ...] = ()


def item_input(payload: Mapping[str, Any], systems: Sequence[str] = ()) -> ItemInput:
    """An item's payload as prompt input (missing parts become empty).

    A preference item's lists come in the study's declared order of
    ``systems`` (A, B), never in the payload's key order.
    """
    evidence = payload.get("evidence") or []
    lists = payload.get("lists") or {}
    return ItemInput(
        claim=str(payload.get("claim") or ""),
        context=str(payload.get("context") or ""),
        evidence=tuple(passage for passage in evidence if isinstance(passage, Mapping)),
        source=str(payload.get("source") or ""),
        question=str(payload.get("question") or ""),
        lists=tuple(
            tuple(str(claim) for claim in lists[system])
            for system in systems
            if isinstance(lists, Mapping) and isinstance(lists.get(system), list)
        ),
    )


def render_item(preset: Preset, data: ItemInput) -> list[list[Message]]:
    """The chat requests for one item.

    One for claim-level presets, one per passage for evidence-level ones,
    and two for pairwise presets: system A's list as List 1, then system B's.
    """
    if preset.pairwise:
        assert preset.render_pair is not None
        if len(data.lists) != 2:
            raise ValueError("the pairwise judge needs an item with both of the study's claim lists")
        first, second = data.lists
        return [
            preset.render_pair(data.source, data.question, first, second),
            preset.render_pair(data.source, data.question, second, first),
        ]
    if preset.evidence_level:
        assert preset.render_passage is not None
        return [preset.render_passage(data.claim, passage, data.context) for passage in data.evidence]
    return [preset.render(data.claim, data.context, data.evidence)]


@dataclass(frozen=True)
class RunSpec:
    """Everything a chunk needs to know about its run's verifier, read once per chunk."""

    kind: str
    params: dict[str, Any]
    mapper: LabelMapper
    preset: Preset | None = None
    target: Target | None = None
    count_irrelevant: bool = False
    parser_key: dict[str, Any] = field(default_factory=dict)
    systems: tuple[str, ...] = ()

    @property
    def is_llm(self) -> bool:
        return self.kind == Verifier.Kind.LLM


def spec_for(run: VerifierRun, *, need_key: bool = True) -> RunSpec:
    """The run's configuration (fixed at its start) as a RunSpec; EndpointUnavailable when it cannot be reached."""
    study = run.verifier.study
    params = run.params or {}
    kind = params.get("kind", run.verifier.kind)
    mapper = LabelMapper(study.labels, study.label_aliases, params.get("label_map") or {})
    if kind != Verifier.Kind.LLM:
        return RunSpec(kind=kind, params=params, mapper=mapper)
    preset = preset_for(
        params["preset"],
        template=params.get("template", ""),
        labels=params.get("custom_labels", []),
        system=params.get("system_prompt", ""),
    )
    parser_key = {
        "labels": list(preset.prediction_labels),
        "label_map": params.get("label_map") or {},
        "study_labels": list(study.labels),
        "aliases": study.label_aliases,
    }
    if preset.evidence_level:
        parser_key["count_irrelevant"] = study.irrelevant_in_credibility
    return RunSpec(
        kind=kind,
        params=params,
        mapper=mapper,
        preset=preset,
        target=target_for(params, run.verifier.api_key_encrypted, need_key=need_key),
        count_irrelevant=study.irrelevant_in_credibility,
        parser_key=parser_key,
        systems=tuple(study.systems or ()),
    )
