"""WiCE (Kamoi et al., EMNLP 2023): Wikipedia claims checked against their cited sources' sentences.

Claims file (``data/entailment_retrieval/claim/*.jsonl``): per line ``label``,
``claim``, ``evidence`` (the cited page's sentences) and ``meta`` {id,
claim_context, ...}. Each line becomes a verification item (id ``meta.id``,
domain ``wikipedia``, the claim's preceding Wikipedia text as its context, the
non-empty sentences as its passages); WiCE's label is emitted as an annotation by
``wice_human``, which the items import makes the gold label or keeps as that
annotator's (adapters/source_labels.py). This is how fixtures/build_demo.py
builds the WiCE demo.

Predictions (``oracle_chunks_claim_<split>.<model>.entailment_score.json``): one
object, claim id -> score 1.0 / 0.5 / 0.0 (supported / partially_supported /
not_supported, the maximum over the oracle chunks); the verifier is the model
named in the file name (or --verifier), the score is kept.
"""

from __future__ import annotations

from typing import Any

from annotation.lib.formats import RecordError, json_type
from annotation.transfer.adapters.base import (
    ANNOTATIONS,
    ITEMS,
    PREDICTIONS,
    Adapter,
    Context,
    Converted,
    Origin,
    SourceFile,
    Yield,
    jsonl_objects,
    text_field,
    whole_json,
)

ANNOTATOR = "wice_human"
DOMAIN = "wikipedia"
#: WiCE's labels and the study labels each may stand for, tried in order.
LABEL_CANDIDATES = {
    "supported": ("supported", "S", "support"),
    "partially_supported": ("partially_supported", "partially supported", "partial"),
    "not_supported": ("not_supported", "unsupported", "NS"),
}
#: A model's claim score (the maximum over chunks) and the WiCE label it stands for.
SCORE_LABELS = {1.0: "supported", 0.5: "partially_supported", 0.0: "not_supported"}
_SCORE_SUFFIX = ".entailment_score.json"


def study_label(label: str, context: Context) -> str | None:
    return context.label(*LABEL_CANDIDATES.get(label, ()))


def claim_item(record: dict[str, Any], origin: Origin) -> dict[str, Any] | RecordError:
    """One claims-file line as a verification item (the demo's items.jsonl holds exactly these)."""
    meta = record.get("meta")
    if not isinstance(meta, dict) or not isinstance(meta.get("id"), str) or not meta["id"].strip():
        return origin.error("must be an object with the claim's 'id'", "meta")
    claim = text_field(record, "claim", origin)
    if isinstance(claim, RecordError):
        return claim
    sentences = record.get("evidence")
    if not isinstance(sentences, list):
        return origin.error(f"must be an array of the cited page's sentences, got {json_type(sentences)}", "evidence")
    context = meta.get("claim_context")
    return {
        "id": meta["id"],
        "domain": DOMAIN,
        "claim": claim.strip(),
        "context": context.strip() if isinstance(context, str) else "",
        "evidence": [{"text": text.strip()} for text in sentences if isinstance(text, str) and text.strip()],
    }


def verifier_name(file_name: str) -> str:
    """The model in 'oracle_chunks_claim_test.gpt-3.5-turbo-0613.entailment_score.json' (dots kept), else 'wice'."""
    name = file_name.rsplit("/", 1)[-1]
    if name.endswith(_SCORE_SUFFIX) and "." in name.removesuffix(_SCORE_SUFFIX):
        return name.removesuffix(_SCORE_SUFFIX).split(".", 1)[1][:100]
    return "wice"


class WiCEAdapter(Adapter):
    name = "wice"
    title = "WiCE claims JSONL / entailment_score.json predictions"
    targets = (ITEMS, ANNOTATIONS, PREDICTIONS)

    def convert(self, source: SourceFile, target: str, context: Context) -> Yield:
        if context.kind != "verification":
            yield RecordError(None, "WiCE's claims are verified against their sources: use a verification study")
        elif target == PREDICTIONS:
            yield from _predictions(source, context)
        else:
            yield from _claims(source, context)


def _claims(source: SourceFile, context: Context) -> Yield:
    for line, record in jsonl_objects(source.stream, arrays=True, limit=context.max_json_bytes):
        if isinstance(record, RecordError):
            yield record
            continue
        origin = Origin(line)
        item = claim_item(record, origin)
        if isinstance(item, RecordError):
            yield item
            continue
        raw = record.get("label")
        label = study_label(raw, context) if isinstance(raw, str) else None
        if label is None:
            wanted = ", ".join(LABEL_CANDIDATES.get(raw, LABEL_CANDIDATES)) if isinstance(raw, str) else ""
            yield origin.error(f"{raw!r} needs one of the study's labels {wanted} (or an alias)", "label")
            continue
        yield Converted(ITEMS, origin, item)
        yield Converted(ANNOTATIONS, origin, {"item": item["id"], "annotator": ANNOTATOR, "label": label})


def _predictions(source: SourceFile, context: Context) -> Yield:
    scores = whole_json(source.stream, limit=context.max_json_bytes)
    hint = "WiCE's predictions are one JSON object, claim id -> score (oracle_chunks_claim_test.<model>.entailment_score.json)"
    if isinstance(scores, RecordError):
        yield RecordError(scores.line, f"{scores.message} ({hint})", scores.field)
        return
    if not isinstance(scores, dict):
        yield RecordError(None, f"got {json_type(scores)}: {hint}")
        return
    verifier = context.verifier or verifier_name(source.name)
    for claim_id, score in scores.items():
        origin = Origin(None, f"claim {claim_id!r}")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or float(score) not in SCORE_LABELS:
            yield origin.error(f"the score must be 1.0, 0.5 or 0.0, got {score!r}")
            continue
        raw = SCORE_LABELS[float(score)]
        yield Converted(
            PREDICTIONS,
            origin,
            {"item": claim_id, "verifier": verifier, "label": study_label(raw, context) or raw, "score": float(score)},
        )
