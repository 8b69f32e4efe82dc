"""Factcheck-GPT / Factcheck-Bench (Wang et al., 2023): the benchmark JSONL, Factbench.jsonl, subtasks 3 and 4.

Benchmark: per document, per sentence, the claims with their automatically
retrieved evidence and the annotators' stance on each passage and label of
each claim. A claim becomes a verification item with the passages as
evidence (each typed by its URL's domain, links.source_type, so Wikipedia
pages are `wiki`) and its label as gold; the stances become the evidence judgements
of one annotation by ``factcheck-bench`` (its label being the claim's label):

    completely-support -> support      partially-support -> support
    refute             -> not_support  irrelevant        -> irrelevant

Claim labels: true -> supported, false -> contradicted, "unknown" /
"not_enough_evidence" -> inconclusive (through the study's labels and aliases).

Subtask 3 (one claim, one evidence passage, the annotators' stance) becomes a
verification item of that claim with that one passage: its stance is the
passage's judgement (above) and gives the item's gold label and the label of
the ``factcheck-bench`` annotation: completely-support -> supported, refute ->
contradicted, partially-support and irrelevant -> inconclusive (the passage
alone neither confirms nor refutes the claim). Subtasks 1, 2 (check-worthiness)
and 5 (revisions) hold no verification labels and are refused.
"""

from __future__ import annotations

from typing import Any

from annotation.lib.formats import RecordError, json_type
from annotation.transfer.adapters.base import (
    ANNOTATIONS,
    ITEMS,
    Adapter,
    Context,
    Converted,
    Origin,
    SourceFile,
    Yield,
    jsonl_objects,
    string,
)
from annotation.transfer.adapters.links import source_type, web_url

ANNOTATOR = "factcheck-bench"
STANCES = {
    "completely-support": "support",
    "partially-support": "support",
    "refute": "not_support",
    "irrelevant": "irrelevant",
}
#: Subtask 3: what one passage's stance says about the claim, as a verification label.
STANCE_LABELS = {
    "completely-support": ("supported", "true", "S"),
    "refute": ("contradicted", "unsupported", "false", "NS"),
    "partially-support": ("inconclusive", "unknown"),
    "irrelevant": ("inconclusive", "unknown"),
}
CLAIM_LABELS = {
    "true": ("supported", "true", "S"),
    "false": ("contradicted", "unsupported", "false", "NS"),
    "unknown": ("inconclusive", "unknown"),
    "not_enough_evidence": ("inconclusive", "not_enough_evidence"),
}


def _claim_label(value: Any, context: Context) -> str | None:
    key = str(value).lower() if isinstance(value, (bool, str)) else None
    if key not in CLAIM_LABELS:
        return None
    return context.label(*CLAIM_LABELS[key]) or key


class FactcheckGPTAdapter(Adapter):
    name = "factcheckgpt"
    title = "Factcheck-GPT benchmark / Factbench / subtask 3 and 4 JSONL"
    targets = (ITEMS, ANNOTATIONS)

    def convert(self, source: SourceFile, target: str, context: Context) -> Yield:
        if context.kind != "verification":
            yield RecordError(None, "Factcheck-GPT's claims are verified: import them into a verification study")
            return
        system = context.system_names[0] if context.system_names else ""
        for line, record in jsonl_objects(source.stream, arrays=True, limit=context.max_json_bytes):
            if isinstance(record, RecordError):
                yield record
                continue
            origin = Origin(line)
            if isinstance(record.get("sentences"), dict):
                yield from _document(line, record, target, context, system)
            elif isinstance(record.get("claims"), list):
                yield from _factbench(line, record, target, context, system)
            elif isinstance(record.get("claim"), str) and "stance" in record:
                yield from _stance(line, record, target, context, system)
            elif isinstance(record.get("claim"), str) and "label" in record:
                label = _claim_label(record["label"], context)
                if label is None:
                    yield origin.error(f"must be true, false or not_enough_evidence, got {record['label']!r}", "label")
                elif target == ITEMS:
                    yield Converted(
                        ITEMS,
                        origin,
                        {"id": f"fcgpt-{line}", "claim": record["claim"], "gold": label, "system": system},
                    )
            else:
                yield origin.error(
                    "is not a Factcheck-GPT benchmark document (sentences), Factbench line (claims), "
                    "subtask 3 line (claim, evidence, stance) or subtask 4 line (claim, label)"
                )


def _stance(line: int, record: dict[str, Any], target: str, context: Context, system: str) -> Yield:
    """A subtask 3 line: one claim with one passage and its stance."""
    origin = Origin(line)
    stance, evidence = record["stance"], record.get("evidence")
    if stance not in STANCES:
        yield origin.error(f"must be one of {', '.join(STANCES)}, got {stance!r}", "stance")
        return
    if not isinstance(evidence, str) or not evidence.strip():
        yield origin.error("must be the evidence passage's text", "evidence")
        return
    label = context.label(*STANCE_LABELS[stance])
    if label is None:
        yield origin.error(f"stance {stance!r} needs one of the labels {', '.join(STANCE_LABELS[stance])}", "stance")
        return
    item_id = f"fcgpt-stance-{line}"
    if target == ITEMS:
        yield Converted(
            ITEMS,
            origin,
            {
                "id": item_id,
                "claim": record["claim"],
                "system": system,
                "gold": label,
                "evidence": [{"text": evidence, "source_type": "web"}],
            },
        )
    yield Converted(
        ANNOTATIONS,
        origin,
        {
            "item": item_id,
            "annotator": ANNOTATOR,
            "label": label,
            "evidence_judgements": [{"index": 0, "judgement": STANCES[stance]}],
        },
    )


def _factbench(line: int, record: dict[str, Any], target: str, context: Context, system: str) -> Yield:
    origin = Origin(line)
    claims, labels = record["claims"], record.get("claim_labels")
    if not isinstance(labels, list) or len(labels) != len(claims):
        yield origin.error("must be an array as long as 'claims'", "claim_labels")
        return
    source = string(record.get("source"))
    response = string(record.get("response"))
    for index, (claim, raw) in enumerate(zip(claims, labels, strict=True)):
        label = _claim_label(raw, context)
        if not isinstance(claim, str) or label is None:
            yield origin.error(f"claim {index + 1} needs text and a true/false/unknown label", f"claims[{index}]")
            continue
        if target == ITEMS:
            yield Converted(
                ITEMS,
                Origin(line, f"claim {index + 1}"),
                {
                    "id": f"factbench-{line}-{index + 1}",
                    "claim": claim,
                    "context": response,
                    "domain": source[:100],
                    "response_id": f"factbench-{line}",
                    "system": system,
                    "gold": label,
                },
            )


def _document(line: int, record: dict[str, Any], target: str, context: Context, system: str) -> Yield:
    response = string(record.get("response"))
    response_id = f"fcgpt-{line}"
    for key, sentence in record["sentences"].items():
        origin = Origin(line, f"{key}")
        if not isinstance(sentence, dict):
            yield origin.error(f"must be an object, got {json_type(sentence)}")
            continue
        claims = sentence.get("claims") or []
        if not isinstance(claims, list):
            yield origin.error(f"must be an array, got {json_type(claims)}", "claims")
            continue
        parallel = {
            name: sentence.get(name) or []
            for name in ("auto_evidence", "auto_evidence_url", "stance_claim_autoEvid", "claims_factuality_label")
        }
        for index, claim in enumerate(claims):
            place = Origin(line, f"{key}, claim {index + 1}")
            if not isinstance(claim, str) or not claim.strip():
                yield place.error("must be a non-empty string", f"claims[{index}]")
                continue
            raw_label = _at(parallel["claims_factuality_label"], index)
            label = _claim_label(raw_label, context)
            if label is None:
                yield place.error(
                    f"must be true, false or unknown, got {raw_label!r}", f"claims_factuality_label[{index}]"
                )
                continue
            texts = _at(parallel["auto_evidence"], index) or []
            urls = _at(parallel["auto_evidence_url"], index) or []
            stances = _at(parallel["stance_claim_autoEvid"], index) or []
            if not all(isinstance(v, list) for v in (texts, urls, stances)):
                yield place.error("evidence, urls and stances must be arrays per claim", "auto_evidence")
                continue
            evidence: list[dict[str, str]] = []
            judgements: list[dict[str, Any]] = []
            bad: RecordError | None = None
            for n, text in enumerate(texts):
                if not isinstance(text, str) or not text.strip():
                    continue
                url = _at(urls, n)
                stance = _at(stances, n)
                if stance is not None and stance not in STANCES:
                    bad = place.error(
                        f"must be one of {', '.join(STANCES)}, got {stance!r}", f"stance_claim_autoEvid[{index}][{n}]"
                    )
                    break
                if stance is not None:
                    judgements.append({"index": len(evidence), "judgement": STANCES[stance]})
                link = web_url(url)
                evidence.append({"text": text, "url": link, "source_type": source_type(link) or "web"})
            if bad is not None:
                yield bad
                continue
            item_id = f"{response_id}-{key}-{index + 1}"
            if target == ITEMS:
                yield Converted(
                    ITEMS,
                    place,
                    {
                        "id": item_id,
                        "claim": claim,
                        "context": response,
                        "response_id": response_id,
                        "system": system,
                        "gold": label,
                        "evidence": evidence,
                    },
                )
            if judgements:
                yield Converted(
                    ANNOTATIONS,
                    place,
                    {"item": item_id, "annotator": ANNOTATOR, "label": label, "evidence_judgements": judgements},
                )


def _at(values: Any, index: int) -> Any:
    return values[index] if isinstance(values, list) and index < len(values) else None
