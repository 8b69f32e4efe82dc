"""Validation of imported records (docs/formats.md) into typed rows.

Each `parse_*` function takes one record (a dict from JSONL or CSV) and returns
either a row ready to store or the list of problems, each naming its field.
They touch no database (what they need to know of the study comes in as
arguments): the import services decide what to do with the rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from annotation.lib.formats import JSONTooDeep, RecordError, json_type, loads, nul_error_in_json
from annotation.models import MAX_ACTIVE_MS
from annotation.vocab import PREFERENCE_STRENGTHS, PREFERENCE_TIE, canonical_label, preference_label, preference_parts
from annotation.workbench.evidence import InvalidEvidence, checked_judgements

MAX_ID_LENGTH = 200
MAX_SHORT_TEXT = 200
MAX_DOMAIN_LENGTH = 100

VERIFICATION_FIELDS = {"id", "domain", "claim", "context", "response_id", "system", "gold", "evidence"}
PREFERENCE_FIELDS = {"id", "domain", "source", "question", "lists", "response_id", "system", "gold"}
EVIDENCE_FIELDS = {"text", "title", "url", "source_type"}
#: What makes urlsplit read a URL differently from its plain form (see `_url_ok`).
_URL_ODD = re.compile(r"[\[\]\t\r\n]")


@dataclass
class ItemRow:
    external_id: str
    domain: str
    summary: str
    payload: dict[str, Any]
    response_id: str = ""
    system: str = ""
    gold_label: str = ""
    gold_raw: str = ""


@dataclass
class AnnotationRow:
    item: str
    annotator: str
    label: str
    raw_label: str
    preferred_system: str = ""
    strength: str = ""
    choice: str = ""
    left_system: str = ""
    justification: str = ""
    evidence_judgements: list[dict[str, Any]] = field(default_factory=list)
    active_ms: int | None = None


#: String fields read stripped of white space (ids and names of things).
_STRIPPED = frozenset(("id", "item", "annotator"))


class _Problems:
    """Collects the problems of one record."""

    def __init__(self, line: int) -> None:
        self.line = line
        self.errors: list[RecordError] = []

    def add(self, field_name: str | None, message: str) -> None:
        self.errors.append(RecordError(self.line, message, field_name))

    def string(self, record: dict, name: str, *, required: bool = False, max_length: int | None = None) -> str:
        """A string field (numbers accepted for ids), '' when absent and optional."""
        value = record.get(name)
        # The common case first, without the checks below (an import calls this ~10 times a line): a
        # string of a field not stripped, within its limit, with more than white space in it.
        if (
            type(value) is str
            and name not in _STRIPPED
            and (max_length is None or len(value) <= max_length)
            and value[:1].strip()
        ):
            return value
        if value is None or (isinstance(value, str) and value.strip() == ""):
            if required:
                self.add(name, "is required and must be a non-empty string")
            return ""
        if (
            isinstance(value, bool)
            or not isinstance(value, (str, int))
            or (isinstance(value, int) and name not in ("id", "item", "annotator", "response_id", "label", "gold"))
        ):
            self.add(name, f"must be a string, got {json_type(value)}")
            return ""
        text = str(value).strip() if name in _STRIPPED else str(value)
        if max_length is not None and len(text) > max_length:
            self.add(name, f"is {len(text)} characters long; the limit is {max_length}")
            return ""
        return text


class _TooDeep:
    """What _maybe_json returns for JSON text it refused (too deep, or a NUL; the problem is already recorded)."""


TOO_DEEP = _TooDeep()


def _maybe_json(value: Any, expected: type, problems: _Problems, name: str) -> Any:
    """CSV cells carry nested values as JSON text; decode them when they look like it.

    Text nested beyond formats.MAX_JSON_DEPTH, or holding a NUL escape (the one rule of
    formats.py), is a problem of field `name` (TOO_DEEP).
    """
    if isinstance(value, str) and not isinstance(value, expected):
        stripped = value.strip()
        if stripped[:1] in "[{":
            try:
                decoded = loads(stripped)
            except json.JSONDecodeError:
                return value
            except JSONTooDeep as exc:
                problems.add(name, f"holds JSON {exc}")
                return TOO_DEEP
            refused = nul_error_in_json(stripped, decoded, line=problems.line, field=name)
            if refused is not None:
                problems.add(refused.field, refused.message)
                return TOO_DEEP
            return decoded
    return value


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unknown_fields(record: dict, known: set[str], problems: _Problems, prefix: str = "") -> None:
    """Name fields we do not know: a typo must not silently drop data."""
    extra = sorted(name for name in record if name not in known and not name.startswith("list:"))
    if extra:
        problems.add(
            prefix + extra[0] if len(extra) == 1 else None,
            f"unknown field(s) {', '.join(repr(prefix + name) for name in extra)}; "
            f"expected some of {', '.join(sorted(known))}",
        )


def _gold(record: dict, problems: _Problems, labels: list[str], aliases: dict[str, str]) -> tuple[str, str]:
    raw = problems.string(record, "gold", max_length=MAX_SHORT_TEXT)
    if not raw:
        return "", ""
    label = canonical_label(raw, labels, aliases)
    if label is None:
        problems.add("gold", f"{raw!r} is not one of the study's labels ({', '.join(labels)})")
        return "", ""
    return label, raw


def _url_ok(url: str) -> bool:
    # Fast path for the usual passage URL (urlsplit is a tenth of an item import's time): an
    # http(s) scheme, then a host that starts with a letter or digit, no brackets (IPv6 forms) and
    # no tab or line break (which urlsplit removes), all ASCII (urlsplit refuses some other hosts):
    # urlsplit gives it that scheme and a netloc.
    head = url[:8].lower()
    start = 8 if head == "https://" else 7 if head[:7] == "http://" else 0
    if start and url.isascii() and url[start : start + 1].isalnum() and not _URL_ODD.search(url):
        return True
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def parse_verification_item(
    line: int, record: dict, *, labels: list[str], aliases: dict[str, str]
) -> ItemRow | list[RecordError]:
    """A verification item: claim, optional context, evidence passages, gold."""
    problems = _Problems(line)
    _unknown_fields(record, VERIFICATION_FIELDS, problems)
    external_id = problems.string(record, "id", required=True, max_length=MAX_ID_LENGTH)
    claim = problems.string(record, "claim", required=True)
    context = problems.string(record, "context")
    domain = problems.string(record, "domain", max_length=MAX_DOMAIN_LENGTH)
    response_id = problems.string(record, "response_id", max_length=MAX_ID_LENGTH)
    system = problems.string(record, "system", max_length=MAX_SHORT_TEXT)
    gold_label, gold_raw = _gold(record, problems, labels, aliases)
    evidence_value = _maybe_json(record.get("evidence"), list, problems, "evidence")
    evidence: list[dict[str, str]] = []
    if evidence_value is not None and evidence_value != "" and evidence_value is not TOO_DEEP:
        if not isinstance(evidence_value, list):
            problems.add("evidence", f"must be an array of passages, got {json_type(evidence_value)}")
        else:
            for index, passage in enumerate(evidence_value):
                where = f"evidence[{index}]"
                if not isinstance(passage, dict):
                    problems.add(where, f"must be an object with a 'text', got {json_type(passage)}")
                    continue
                sub = _Problems(line)
                _unknown_fields(passage, EVIDENCE_FIELDS, sub, prefix=f"{where}.")
                text = sub.string(passage, "text", required=True)
                title = sub.string(passage, "title", max_length=500)
                url = sub.string(passage, "url", max_length=2000)
                source_type = sub.string(passage, "source_type", max_length=50)
                if url and not _url_ok(url):
                    sub.add("url", "must be an http:// or https:// address")
                for error in sub.errors:
                    name = error.field or ""
                    problems.add(name if name.startswith(where) else f"{where}.{name}", error.message)
                evidence.append({"text": text, "title": title, "url": url, "source_type": source_type})
    if problems.errors:
        return problems.errors
    return ItemRow(
        external_id=external_id,
        domain=domain,
        summary=_shorten(claim),
        payload={"claim": claim, "context": context, "evidence": evidence},
        response_id=response_id,
        system=system,
        gold_label=gold_label,
        gold_raw=gold_raw,
    )


def _claim_list(value: Any, where: str, problems: _Problems) -> list[str] | None:
    value = _maybe_json(value, list, problems, where)
    if value is TOO_DEEP:
        return None
    if isinstance(value, str):
        value = [part for part in value.splitlines() if part.strip()]
    if not isinstance(value, list):
        problems.add(where, f"must be an array of claims, got {json_type(value)}")
        return None
    if not value:
        problems.add(where, "is an empty claim list; each system needs at least one claim")
        return None
    claims: list[str] = []
    for index, claim in enumerate(value):
        if not isinstance(claim, str) or not claim.strip():
            problems.add(f"{where}[{index}]", "each claim must be a non-empty string")
            return None
        claims.append(claim)
    return claims


def parse_preference_item(
    line: int, record: dict, *, systems: list[str], labels: list[str], aliases: dict[str, str]
) -> ItemRow | list[RecordError]:
    """A preference item: source text and exactly two systems' claim lists.

    `systems` are the study's two systems in declared order (empty: the first
    item declares them); lists are stored in that order whatever the file says.
    """
    problems = _Problems(line)
    _unknown_fields(record, PREFERENCE_FIELDS, problems)
    external_id = problems.string(record, "id", required=True, max_length=MAX_ID_LENGTH)
    source = problems.string(record, "source", required=True)
    question = problems.string(record, "question")
    domain = problems.string(record, "domain", max_length=MAX_DOMAIN_LENGTH)
    response_id = problems.string(record, "response_id", max_length=MAX_ID_LENGTH)
    system = problems.string(record, "system", max_length=MAX_SHORT_TEXT)
    gold_label, gold_raw = _gold(record, problems, labels, aliases)
    lists_value = _maybe_json(record.get("lists"), dict, problems, "lists")
    csv_lists = {name[5:]: value for name, value in record.items() if name.startswith("list:")}
    if lists_value is None and csv_lists:
        lists_value = csv_lists
    lists: dict[str, list[str]] = {}
    if lists_value is TOO_DEEP:
        pass
    elif lists_value is None:
        problems.add("lists", "is required: an object with the two systems' claim lists")
    elif not isinstance(lists_value, dict):
        problems.add("lists", f"must be an object mapping system -> claims, got {json_type(lists_value)}")
    elif len(lists_value) != 2:
        problems.add(
            "lists",
            f"must hold exactly two systems, found {len(lists_value)} ({', '.join(map(str, lists_value)) or 'none'})",
        )
    else:
        names = [str(name).strip() for name in lists_value]
        if systems and set(names) != set(systems):
            problems.add(
                "lists",
                f"systems {', '.join(names)} do not match the study's systems {', '.join(systems)}",
            )
        elif any(not name or len(name) > MAX_SHORT_TEXT for name in names):
            problems.add("lists", "system names must be non-empty and at most 200 characters")
        else:
            for name, value in zip(names, lists_value.values(), strict=True):
                claims = _claim_list(value, f"lists.{name}", problems)
                if claims is not None:
                    lists[name] = claims
            order = systems or names
            lists = {name: lists[name] for name in order if name in lists}
    if problems.errors:
        return problems.errors
    return ItemRow(
        external_id=external_id,
        domain=domain,
        summary=_shorten(source),
        payload={"source": source, "question": question, "lists": lists},
        response_id=response_id,
        system=system,
        gold_label=gold_label,
        gold_raw=gold_raw,
    )


ANNOTATION_FIELDS = {
    "item",
    "annotator",
    "label",
    "raw_label",
    "preferred",
    "preferred_system",
    "strength",
    "choice",
    "left_system",
    "right_system",
    "justification",
    "rationale",
    "evidence",
    "evidence_judgements",
    "active_ms",
    # Columns of our own export, accepted and ignored so an export re-imports as is.
    "study",
    "domain",
    "status",
    "created_at",
    "submitted_at",
    "revision_count",
    "source",
    "adjudicated_label",
}


def parse_annotation(
    line: int,
    record: dict,
    *,
    kind: str,
    labels: list[str],
    aliases: dict[str, str],
    systems: list[str],
    passages: Callable[[str], int | None],
) -> AnnotationRow | list[RecordError]:
    """An annotation made elsewhere: a label, or a preferred system and strength.

    `passages` gives an item's number of evidence passages (None: no such
    item, reported by the caller), for checking the evidence judgements.
    """
    problems = _Problems(line)
    _unknown_fields(record, ANNOTATION_FIELDS, problems)
    item = problems.string(record, "item", required=True, max_length=MAX_ID_LENGTH)
    annotator = problems.string(record, "annotator", required=True, max_length=100)
    justification = problems.string(record, "justification") or problems.string(record, "rationale")
    choice = problems.string(record, "choice", max_length=32)
    left_system = problems.string(record, "left_system", max_length=MAX_SHORT_TEXT)
    active_ms = _active_ms(record, problems)
    evidence = _evidence(record, item, problems, passages)
    given = problems.string(record, "label", max_length=MAX_SHORT_TEXT)
    raw_label = problems.string(record, "raw_label", max_length=MAX_SHORT_TEXT) or given
    preferred_system = strength = ""
    label = ""
    if kind == "preference":
        if left_system and systems and left_system not in systems:
            problems.add("left_system", f"{left_system!r} is not one of the study's systems ({', '.join(systems)})")
        preferred = problems.string(record, "preferred", max_length=MAX_SHORT_TEXT) or problems.string(
            record, "preferred_system", max_length=MAX_SHORT_TEXT
        )
        strength = problems.string(record, "strength", max_length=16).strip().lower()
        if given:
            label = canonical_label(given, labels, aliases) or ""
            if not label:
                problems.add("label", f"{given!r} is not one of the study's labels ({', '.join(labels)})")
        elif preferred and preferred.lower() != PREFERENCE_TIE:
            if preferred not in systems:
                problems.add(
                    "preferred",
                    f"{preferred!r} is not one of the study's systems ({', '.join(systems) or 'none declared'})",
                )
            elif strength not in PREFERENCE_STRENGTHS:
                problems.add("strength", f"must be 'strong' or 'slight' when a system is preferred, got {strength!r}")
            else:
                label = preference_label(systems.index(preferred), strength)
                raw_label = raw_label or f"{preferred}:{strength}"
        elif preferred.lower() == PREFERENCE_TIE or strength == PREFERENCE_TIE:
            label, raw_label = PREFERENCE_TIE, raw_label or PREFERENCE_TIE
        else:
            problems.add("label", "give either 'label' or 'preferred' (a system name or 'tie') with 'strength'")
        if label:
            if label not in labels:
                problems.add("label", f"{label!r} is not allowed in this study ({', '.join(labels)})")
            else:
                index, strength = preference_parts(label)
                if index is not None:
                    preferred_system = systems[index] if len(systems) == 2 else ""
                    if not preferred_system:
                        problems.add("label", "the study has no declared systems yet; import its items first")
    else:
        if not given:
            problems.add("label", "is required")
        else:
            label = canonical_label(given, labels, aliases) or ""
            if not label:
                problems.add("label", f"{given!r} is not one of the study's labels ({', '.join(labels)})")
    if problems.errors:
        return problems.errors
    return AnnotationRow(
        item=item,
        annotator=annotator,
        label=label,
        raw_label=raw_label,
        preferred_system=preferred_system,
        strength=strength,
        choice=choice,
        left_system=left_system,
        justification=justification,
        evidence_judgements=evidence,
        active_ms=active_ms,
    )


def _evidence(
    record: dict, item: str, problems: _Problems, passages: Callable[[str], int | None]
) -> list[dict[str, Any]]:
    """The record's evidence judgements, checked as a submit checks them, except that a partial set is kept."""
    name = "evidence_judgements" if "evidence_judgements" in record else "evidence"
    value = _maybe_json(record.get(name), list, problems, name)
    if value is TOO_DEEP or value in (None, "", []):
        return []
    count = passages(item) if item else None
    if count is None and isinstance(value, list):
        return []  # no (such) item: reported on its own
    try:
        return checked_judgements(value, count or 0, complete=False)
    except InvalidEvidence as exc:
        problems.add(name if exc.entry is None else f"{name}[{exc.entry}]", str(exc))
        return []


def _active_ms(record: dict, problems: _Problems) -> int | None:
    value = record.get("active_ms")
    if value in (None, ""):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        # Whole numbers only: int(1.5) would silently drop the fraction.
        number = int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or not 0 <= number <= MAX_ACTIVE_MS:
        problems.add("active_ms", f"must be a whole number of milliseconds from 0 to {MAX_ACTIVE_MS:,}, got {value!r}")
        return None
    return number
