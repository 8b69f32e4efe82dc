"""RAGAS evaluation datasets (EvaluationDataset.to_jsonl, or a JSON array of samples).

Each sample (``user_input``/``question``, ``response``/``answer``,
``retrieved_contexts``/``contexts``, ``reference``/``ground_truth``) becomes
one response; its statements become verification items with the retrieved
contexts as evidence, so the report's faithfulness is RAGAS's definition.
RAGAS does not store its statements (they live in memory in its traces), so
the statements are the response's sentences, or ``statements`` when a sample
carries them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from annotation.lib.formats import RecordError, json_type
from annotation.transfer.adapters.base import (
    ITEMS,
    Adapter,
    Context,
    Converted,
    Origin,
    SourceFile,
    Yield,
    jsonl_objects,
    whole_json,
)

NAMES = {
    "user_input": ("user_input", "question"),
    "response": ("response", "answer"),
    "retrieved_contexts": ("retrieved_contexts", "contexts"),
    "reference": ("reference", "ground_truth"),
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def sentences(text: str) -> list[str]:
    """The response split after . ! or ? followed by a capital: RAGAS's statements stand-in."""
    return [part.strip() for part in _SENTENCE_END.split(text.strip()) if part.strip()]


def _field(sample: dict[str, Any], name: str) -> Any:
    for key in NAMES[name]:
        if key in sample:
            return sample[key]
    return None


def _samples(source: SourceFile, context: Context) -> Iterator[tuple[Origin, Any] | RecordError]:
    head = source.stream.read(1)
    while head in (b" ", b"\n", b"\r", b"\t", b"\xef", b"\xbb", b"\xbf"):
        head = source.stream.read(1)
    source.stream.seek(0)
    if head == b"[":
        value = whole_json(source.stream, limit=context.max_json_bytes)
        if isinstance(value, RecordError):
            yield value
            return
        for number, sample in enumerate(value, start=1):
            yield Origin(None, f"sample {number}"), sample
        return
    for line, record in jsonl_objects(source.stream):
        yield record if isinstance(record, RecordError) else (Origin(line), record)


class RagasAdapter(Adapter):
    name = "ragas"
    title = "RAGAS evaluation dataset (JSONL or JSON array)"
    targets = (ITEMS,)

    def convert(self, source: SourceFile, target: str, context: Context) -> Yield:
        if context.kind != "verification":
            yield RecordError(None, "RAGAS statements become claims to verify: import them into a verification study")
            return
        system = context.system_names[0] if context.system_names else ""
        for entry in _samples(source, context):
            if isinstance(entry, RecordError):
                yield entry
                continue
            origin, sample = entry
            if not isinstance(sample, dict):
                yield origin.error(f"must be an object, got {json_type(sample)}")
                continue
            response = _field(sample, "response")
            if not isinstance(response, str) or not response.strip():
                yield origin.error("needs a 'response' (or 'answer') string", "response")
                continue
            contexts = _field(sample, "retrieved_contexts") or []
            if not isinstance(contexts, list) or not all(isinstance(text, str) for text in contexts):
                yield origin.error("must be an array of strings", "retrieved_contexts")
                continue
            statements = sample.get("statements")
            if statements is None:
                statements = sentences(response)
            elif not isinstance(statements, list) or not all(isinstance(text, str) for text in statements):
                yield origin.error("must be an array of strings", "statements")
                continue
            question = _field(sample, "user_input")
            number = origin.line if origin.line is not None else origin.record.split()[-1]
            response_id = f"ragas-{number}"
            evidence = [
                {"text": text, "title": f"Context {n}", "source_type": "retrieved"}
                for n, text in enumerate(contexts, 1)
                if text.strip()
            ]
            for index, statement in enumerate(statements):
                yield Converted(
                    ITEMS,
                    Origin(origin.line, f"{origin.record + ', ' if origin.record else ''}statement {index + 1}"),
                    {
                        "id": f"{response_id}-{index + 1}",
                        "claim": statement,
                        "context": (f"Question: {question}\n\n" if isinstance(question, str) and question else "")
                        + response,
                        "response_id": response_id,
                        "system": system,
                        "evidence": evidence,
                    },
                )
