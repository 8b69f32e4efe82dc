"""FActScore (Min et al., 2023): labelled data (data/labeled/*.jsonl) and the scorer's output JSON.

Labelled data: one response per line; ``annotations`` is null when the
response abstained (kept on the study as an abstention, so the respond ratio
is right), else per sentence the human atomic facts with ``S``/``NS``/``IR``.
Each human fact becomes a verification item (the sentence as its context) and
its label an annotation by one annotator identity, ``factscore-human``.

Scorer output: ``{"score", "respond_ratio", "decisions": [null | [{"atom",
"is_supported"}]], ...}``. It names no response, so each decision's atoms are
found among the study's items by their claim text (all in one response).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from annotation.lib.formats import RecordError, json_type
from annotation.transfer.adapters.base import (
    ABSTENTIONS,
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
    short,
    text_field,
    whole_json,
)

HUMAN_ANNOTATOR = "factscore-human"
LABELS = {
    "S": ("S", "supported", "support"),
    "NS": ("NS", "not_supported", "unsupported"),
    "IR": ("IR", "irrelevant"),
}
_SLUG = re.compile(r"[^A-Za-z0-9]+")


def response_id(system: str, topic: str, line: int) -> str:
    """A response id readable in the report: system, topic and the line it is on."""
    return f"{system}:{_SLUG.sub('-', topic).strip('-')[:80] or 'response'}:{line}"


class FActScoreAdapter(Adapter):
    name = "factscore"
    title = "FActScore labelled data (JSONL) / scorer output (JSON)"
    targets = (ITEMS, ANNOTATIONS, PREDICTIONS)

    def convert(self, source: SourceFile, target: str, context: Context) -> Yield:
        if context.kind != "verification":
            yield RecordError(None, "FActScore's facts become claims to verify: import them into a verification study")
        elif target == PREDICTIONS:
            yield from self._predictions(source, context)
        else:
            yield from self._labelled(source, target, context)

    def _labelled(self, source: SourceFile, target: str, context: Context) -> Yield:
        system = (context.system_names[0] if context.system_names else "") or source.stem or "factscore"
        for line, record in jsonl_objects(source.stream):
            if isinstance(record, RecordError):
                yield record
                continue
            origin = Origin(line)
            if "annotations" not in record:
                hint = " (is this the scorer's output? import it with import_predictions --from factscore)"
                yield origin.error("is missing: FActScore's labelled data has one per line" + hint, "annotations")
                continue
            topic = text_field(record, "topic", origin)
            output = text_field(record, "output", origin, required=False)
            if isinstance(topic, RecordError) or isinstance(output, RecordError):
                yield from (value for value in (topic, output) if isinstance(value, RecordError))
                continue
            domain = _domain(record.get("cat"))
            response = response_id(system, topic, line)
            sentences = record["annotations"]
            if sentences is None:
                yield Converted(ABSTENTIONS, origin, {"response_id": response, "system": system, "domain": domain})
                continue
            if not isinstance(sentences, list):
                yield origin.error(f"must be an array of sentences or null, got {json_type(sentences)}", "annotations")
                continue
            facts = 0
            for s, sentence in enumerate(sentences):
                where = f"annotations[{s}]"
                if not isinstance(sentence, dict):
                    yield origin.error(f"must be an object, got {json_type(sentence)}", where)
                    continue
                human = sentence.get("human-atomic-facts")
                if human is None:
                    continue  # an irrelevant sentence: no facts were labelled
                if not isinstance(human, list):
                    yield origin.error(
                        f"must be an array or null, got {json_type(human)}", f"{where}.human-atomic-facts"
                    )
                    continue
                for f, fact in enumerate(human):
                    place = f"{where}.human-atomic-facts[{f}]"
                    if not isinstance(fact, dict) or not isinstance(fact.get("text"), str) or not fact["text"].strip():
                        yield origin.error("must be an object with a non-empty 'text'", place)
                        continue
                    raw = fact.get("label")
                    if raw not in LABELS:
                        yield origin.error(f"label must be one of S, NS, IR, got {raw!r}", f"{place}.label")
                        continue
                    facts += 1
                    item_id = f"{response}:{s + 1}.{f + 1}"
                    fact_origin = Origin(line, f"sentence {s + 1}, fact {f + 1} ({short(fact['text'], 50)!r})")
                    if target == ITEMS:
                        text = sentence.get("text")
                        yield Converted(
                            ITEMS,
                            fact_origin,
                            {
                                "id": item_id,
                                "claim": fact["text"],
                                "context": text if isinstance(text, str) else "",
                                "domain": domain,
                                "response_id": response,
                                "system": system,
                            },
                        )
                    yield Converted(
                        ANNOTATIONS,
                        fact_origin,
                        {
                            "item": item_id,
                            "annotator": HUMAN_ANNOTATOR,
                            "label": context.label(*LABELS[raw]) or raw,
                            "raw_label": raw,
                        },
                    )
            if not facts:
                context.skipped["answered responses without any labelled fact"] += 1

    def _predictions(self, source: SourceFile, context: Context) -> Yield:
        value = whole_json(source.stream, limit=context.max_json_bytes)
        if isinstance(value, RecordError):
            yield value
            return
        if not isinstance(value, dict) or not isinstance(value.get("decisions"), list):
            found = json_type(value) if not isinstance(value, dict) else "an object without a 'decisions' array"
            yield RecordError(
                None, f"expected FActScore's scorer output, an object with a 'decisions' array; found {found}"
            )
            return
        verifier = context.verifier or "factscore"
        labels = {True: context.label(*LABELS["S"]), False: context.label(*LABELS["NS"])}
        for answer, label in labels.items():
            if label is None:
                yield RecordError(
                    None,
                    f"is_supported {str(answer).lower()} has no label in this study ({', '.join(context.labels)}); "
                    "add an alias (e.g. supported=..., not_supported=...)",
                )
                return
        index = context.claims_index()
        for d, decision in enumerate(value["decisions"]):
            origin = Origin(None, f"decision {d + 1}")
            if decision is None:
                continue  # an abstained response: no atoms
            if not isinstance(decision, list):
                yield origin.error(f"must be an array of atoms or null, got {json_type(decision)}", f"decisions[{d}]")
                continue
            atoms: list[tuple[int, str, bool]] = []
            for a, atom in enumerate(decision):
                where = f"decisions[{d}][{a}]"
                if not isinstance(atom, dict) or not isinstance(atom.get("atom"), str):
                    yield origin.error("must be an object with an 'atom' string", where)
                elif not isinstance(atom.get("is_supported"), bool):
                    got = json_type(atom.get("is_supported"))
                    yield origin.error(f"must be true or false, got {got}", f"{where}.is_supported")
                else:
                    atoms.append((a, atom["atom"], atom["is_supported"]))
            yield from _matched(atoms, index, origin, d, verifier, labels)


def _matched(
    atoms: list[tuple[int, str, bool]],
    index: dict[str, list[tuple[str, str]]],
    origin: Origin,
    d: int,
    verifier: str,
    labels: dict[bool, str | None],
) -> Yield:
    """Predictions for one decision's atoms, all on items of the one response most of them belong to."""
    votes = Counter(response for _, text, _ in atoms for response in {r for _, r in index.get(text, [])})
    if not votes:
        if atoms:
            yield origin.error(
                f"none of its {len(atoms)} atoms is the claim of an item of this study; "
                "import the facts as items first (import_items --from factscore)"
            )
        return
    response = votes.most_common(1)[0][0]
    used: set[str] = set()
    for a, text, supported in atoms:
        item = next((i for i, r in index.get(text, []) if r == response and i not in used), None)
        if item is None:
            yield origin.error(
                f"atom {short(text, 60)!r} is not a claim of response {response!r}", f"decisions[{d}][{a}]"
            )
            continue
        used.add(item)
        yield Converted(
            PREDICTIONS,
            Origin(None, f"decision {d + 1}, atom {a + 1}"),
            {"item": item, "verifier": verifier, "label": labels[supported] or "", "rationale": ""},
        )


def _domain(cat: Any) -> str:
    """FActScore's rarity bucket (cat[0]: very rare ... very freq) as the domain."""
    if isinstance(cat, list) and cat and isinstance(cat[0], str):
        return cat[0][:100]
    return ""
