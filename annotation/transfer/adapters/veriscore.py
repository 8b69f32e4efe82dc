"""VeriScore (Song et al., 2024): claims_*.jsonl, evidence_*.jsonl and verification_*_{2,3}.jsonl.

The three files are one record per response, each adding a key to the last
(``all_claims`` / ``claim_search_results`` / ``claim_verification_result``);
early files say ``all_claim_lst``, ``all_facts_lst`` or ``fact_lst_lst``.
A response is identified by a hash of its question and text, so two
extractors' files of the same responses pair up, and a verification file
finds the items its claims became. The human-labelled few-shot examples
(``few_shot_examples.jsonl``) are read by veriscore_examples.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
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
    file_stem,
    jsonl_objects,
    short,
    string,
    text_field,
)
from annotation.transfer.adapters.links import source_type, web_url
from annotation.transfer.adapters.veriscore_examples import example_records, is_example

NO_CLAIM = "No verifiable claim."
FLAT_KEYS = ("all_claims", "all_claim_lst", "all_facts_lst", "claims")
PER_SENTENCE_KEYS = ("claim_list", "fact_lst_lst")
#: VeriScore's labels (label_n=2 and 3) and the study labels each may stand for, tried in order.
LABEL_CANDIDATES = {
    "supported": ("supported", "S", "support"),
    "unsupported": ("unsupported", "not_supported", "NS"),
    "contradicted": ("contradicted", "refuted"),
    "inconclusive": ("inconclusive", "not_enough_info"),
}


def response_key(question: str, response: str) -> str:
    """A stable id for a response: the same text in two pipelines' files gets the same id."""
    digest = hashlib.sha256(f"{question.strip()}\x1f{response.strip()}".encode()).hexdigest()
    return f"r-{digest[:16]}"


def claims_of(record: dict[str, Any], origin: Origin) -> list[str] | RecordError:
    """The response's de-duplicated claims, in order, without VeriScore's "No verifiable claim." marks."""
    for key in FLAT_KEYS:
        if key in record:
            value = record[key]
            break
    else:
        for key in PER_SENTENCE_KEYS:
            if key in record:
                sentences = record[key]
                if not isinstance(sentences, list) or not all(isinstance(s, list) for s in sentences):
                    return origin.error(
                        f"must be an array of per-sentence claim arrays, got {json_type(sentences)}", key
                    )
                value = [claim for sentence in sentences for claim in sentence]
                break
        else:
            if record.get("abstained") is True:
                return []
            return origin.error(f"has no claims: expected one of {', '.join(FLAT_KEYS + PER_SENTENCE_KEYS)}")
    if value is None:
        value = []
    if not isinstance(value, list):
        return origin.error(f"must be an array of claims, got {json_type(value)}", key)
    claims: list[str] = []
    for index, claim in enumerate(value):
        if claim is None or claim == NO_CLAIM:
            continue
        if not isinstance(claim, str):
            return origin.error(f"must hold strings, got {json_type(claim)} at position {index + 1}", key)
        if claim.strip() and claim not in claims:
            claims.append(claim)
    return claims


class _Response:
    """The fields of one VeriScore record that every target reads."""

    def __init__(self, line: int, record: dict[str, Any]) -> None:
        self.origin = Origin(line)
        self.record = record
        self.errors: list[RecordError] = []
        self.question = self._text("question", required=False)
        self.response = self._text("response")
        self.domain = self._text("prompt_source", required=False)[:100]
        self.model = self._text("model", required=False)[:200]
        self.abstained = record.get("abstained") is True
        self.key = response_key(self.question, self.response) if not self.errors else ""
        claims = claims_of(record, self.origin) if not self.errors else []
        if isinstance(claims, RecordError):
            self.errors.append(claims)
            claims = []
        self.claims = claims

    def _text(self, name: str, *, required: bool = True) -> str:
        value = text_field(self.record, name, self.origin, required=required)
        if isinstance(value, RecordError):
            self.errors.append(value)
            return ""
        return value


def _responses(source: SourceFile, context: Context) -> Iterator[_Response | RecordError]:
    """The file's responses; a few-shot example line is an error here (only a verification items import reads
    them, in `_lines`)."""
    for line, record in _lines(source, context):
        if isinstance(record, dict):
            record = Origin(line).error(
                "is a labelled example (claim, search_result, human_label), not a response: import the examples "
                "as items of a verification study"
            )
        yield record


def _lines(source: SourceFile, context: Context) -> Iterator[tuple[int, _Response | RecordError | dict[str, Any]]]:
    """Each line as a response, an error, or (a dict) a few-shot example; a JSON array of records reads too."""
    for line, record in jsonl_objects(source.stream, arrays=True, limit=context.max_json_bytes):
        if isinstance(record, RecordError) or is_example(record):
            yield line, record
        else:
            yield line, _Response(line, record)


def claim_id(key: str, index: int) -> str:
    return f"{key}-{index + 1}"


class VeriScoreAdapter(Adapter):
    name = "veriscore"
    title = "VeriScore claims / evidence / verification / labelled examples JSONL"
    targets = (ITEMS, ANNOTATIONS, PREDICTIONS)

    def convert(self, source: SourceFile, target: str, context: Context) -> Yield:
        if target == PREDICTIONS:
            yield from self._predictions(source, context)
        elif context.kind == "preference":
            yield from self._preference_items(source, context)
        else:
            yield from self._verification_items(source, context)

    # --- verification items: one per claim -------------------------------------------------

    def _verification_items(self, source: SourceFile, context: Context) -> Yield:
        seen: dict[str, int] = {}
        for line, response in _lines(source, context):
            if isinstance(response, dict):
                yield from example_records(line, response, context)
                continue
            if isinstance(response, RecordError):
                yield response
                continue
            if response.errors:
                yield from response.errors
                continue
            if response.key in seen:
                yield response.origin.error(f"the same question and response as line {seen[response.key]}")
                continue
            seen[response.key] = response.origin.line or 0
            if response.abstained or not response.claims:
                yield Converted(
                    ABSTENTIONS,
                    response.origin,
                    {"response_id": response.key, "system": response.model, "domain": response.domain},
                )
                continue
            evidence = response.record.get("claim_search_results")
            if evidence is not None and not isinstance(evidence, (dict, list)):
                yield response.origin.error(f"must be an object, got {json_type(evidence)}", "claim_search_results")
                continue
            for index, claim in enumerate(response.claims):
                passages = evidence.get(claim, []) if isinstance(evidence, dict) else []
                converted = _passages(passages, response.origin.error, claim)
                if isinstance(converted, RecordError):
                    yield converted
                    continue
                yield Converted(
                    ITEMS,
                    Origin(response.origin.line, f"claim {index + 1} ({short(claim, 60)!r})"),
                    {
                        "id": claim_id(response.key, index),
                        "claim": claim,
                        "context": response.response,
                        "domain": response.domain,
                        "response_id": response.key,
                        "system": response.model,
                        "evidence": converted,
                    },
                )

    # --- preference items: two extractors' lists of the same response ------------------------

    def _preference_items(self, source: SourceFile, context: Context) -> Yield:
        if context.pair is None:
            yield RecordError(
                None,
                f"a preference study compares two extractors: give the second extractor's claims file "
                f"with {context.option('pair')}",
            )
            return
        names = _system_names(source, context)
        if isinstance(names, RecordError):
            yield names
            return
        second: dict[str, _Response] = {}
        for response in _responses(context.pair, context):
            if isinstance(response, RecordError):
                yield _in_pair(response, context.pair)
                continue
            if response.errors:
                yield from (_in_pair(error, context.pair) for error in response.errors)
                continue
            response.record = {}  # only the key and the claims are needed: do not hold its evidence in memory
            second.setdefault(response.key, response)
        used: set[str] = set()
        for response in _responses(source, context):
            if isinstance(response, RecordError):
                yield response
                continue
            if response.errors:
                yield from response.errors
                continue
            other = second.get(response.key)
            if other is None:
                yield response.origin.error(
                    f"no response with the same question and text in {context.pair.name or 'the second file'}"
                )
                continue
            if response.key in used:
                yield response.origin.error("the same question and response appear twice in this file")
                continue
            used.add(response.key)
            if response.abstained or other.abstained or not response.claims or not other.claims:
                context.skipped["responses without claims from one of the extractors"] += 1
                continue
            yield Converted(
                ITEMS,
                response.origin,
                {
                    "id": response.key,
                    "source": response.response,
                    "question": response.question,
                    "domain": response.domain,
                    "response_id": response.key,
                    "system": response.model,
                    "lists": {names[0]: response.claims, names[1]: other.claims},
                },
            )
        unmatched = len(set(second) - used)
        if unmatched:
            context.skipped[f"responses of {context.pair.name or 'the second file'} absent from the first"] += unmatched

    # --- predictions: a verification file's labels on the claims' items --------------------------

    def _predictions(self, source: SourceFile, context: Context) -> Yield:
        verifier = context.verifier or _verifier_name(source)
        for response in _responses(source, context):
            if isinstance(response, RecordError):
                yield response
                continue
            if response.errors:
                yield from response.errors
                continue
            results = response.record.get("claim_verification_result")
            if not isinstance(results, list):
                yield response.origin.error(
                    "is missing: a verification file (verification_*_2.jsonl or _3.jsonl) holds the verifier's labels"
                    if results is None
                    else f"must be an array, got {json_type(results)}",
                    "claim_verification_result",
                )
                continue
            for position, result in enumerate(results):
                where = f"claim_verification_result[{position}]"
                if not isinstance(result, dict) or not isinstance(result.get("claim"), str):
                    yield response.origin.error("must be an object with a 'claim' string", where)
                    continue
                claim = result["claim"]
                if claim not in response.claims:
                    yield response.origin.error(f"claim {short(claim, 60)!r} is not among the response's claims", where)
                    continue
                raw = result.get("verification_result")
                if raw is not None and not isinstance(raw, str):
                    yield response.origin.error(
                        f"must be a string or null, got {json_type(raw)}", f"{where}.verification_result"
                    )
                    continue
                yield Converted(
                    PREDICTIONS,
                    Origin(response.origin.line, f"claim {position + 1} ({short(claim, 60)!r})"),
                    {
                        "item": claim_id(response.key, response.claims.index(claim)),
                        "verifier": verifier,
                        "label": _study_label(raw, context),
                        "rationale": "",
                    },
                )


def _study_label(raw: str | None, context: Context) -> str:
    """VeriScore's label as the study's, or the raw text (stored as unparseable by the predictions import)."""
    if raw is None:
        return ""
    key = raw.strip().rstrip(".").lower()
    return context.label(*LABEL_CANDIDATES.get(key, ())) or raw


def _passages(value: Any, error: Any, claim: str) -> list[dict[str, str]] | RecordError:
    if not isinstance(value, list):
        return error(f"search results of claim {short(claim, 60)!r} must be an array", "claim_search_results")
    passages = []
    for index, hit in enumerate(value):
        if not isinstance(hit, dict):
            return error(
                f"search result {index + 1} of claim {short(claim, 60)!r} must be an object", "claim_search_results"
            )
        text = hit.get("snippet") or ""
        if not isinstance(text, str) or not text.strip():
            continue  # Serper sometimes returns a hit without a snippet: nothing to judge
        link = web_url(string(hit.get("link")))
        passages.append(
            {
                "text": text,
                "title": str(hit.get("title") or "")[:500],
                "url": link,
                "source_type": source_type(string(hit.get("link"))),
            }
        )
    return passages


def _system_names(source: SourceFile, context: Context) -> tuple[str, str] | RecordError:
    if context.system_names:
        names = context.system_names
    elif len(context.systems) == 2:
        names = (context.systems[0], context.systems[1])
    else:
        assert context.pair is not None
        names = (_stem(source.name) or "first", _stem(context.pair.name) or "second")
    if names[0] == names[1]:
        return RecordError(None, f"both extractors are called {names[0]!r}; name them with {context.option('systems')}")
    if context.systems and set(names) != set(context.systems):
        return RecordError(
            None, f"systems {', '.join(names)} do not match the study's systems {', '.join(context.systems)}"
        )
    return names


def _stem(name: str) -> str:
    return file_stem(name).removeprefix("claims_").removeprefix("evidence_")[:200]


def _verifier_name(source: SourceFile) -> str:
    return "veriscore-binary" if file_stem(source.name).endswith("_2") else "veriscore"


def _in_pair(error: RecordError, pair: SourceFile) -> RecordError:
    return RecordError(error.line, f"in {pair.name or 'the second file'}: {error.message}", error.field)
