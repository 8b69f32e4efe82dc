"""The dataset's tables (configs), built from the study's items and its annotation export rows.

- ``annotations``: one row per (item, annotator), the columns of the CSV/JSONL
  export (README, File formats) minus the study slug.
- ``items``: one row per item: its content, every label given (``labels``, in
  the order of ``annotators``), the reference label (strict majority, more
  than half of the item's labels, else null, so ties are null) and
  ``adjudicated_label`` (null until studies have adjudication: the seam for it).
- ``preference_pairs`` (preference studies): TRL-style ``prompt`` / ``chosen`` /
  ``rejected`` rows from each item's majority direction (see ``pair_rows``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from annotation.models import Item, Study
from annotation.selectors import export_rows
from annotation.vocab import PREFERENCE_BOTH_BAD, PREFERENCE_TIE, preference_parts

__all__ = [
    "ANNOTATION_SCHEMA",
    "PAIR_SCHEMA",
    "PairCounts",
    "Tables",
    "build_tables",
    "item_schema",
    "pair_rows",
    "reference_label",
]

ANNOTATION_SCHEMA = pa.schema(
    [
        ("item", pa.string()),
        ("domain", pa.string()),
        ("annotator", pa.string()),
        ("label", pa.string()),
        ("raw_label", pa.string()),
        ("left_system", pa.string()),
        ("right_system", pa.string()),
        ("preferred_system", pa.string()),
        ("strength", pa.string()),
        ("choice", pa.string()),
        ("justification", pa.string()),
        ("evidence_judgements", pa.string()),
        ("active_ms", pa.int64()),
        ("status", pa.string()),
        ("created_at", pa.string()),
        ("submitted_at", pa.string()),
        ("revision_count", pa.int64()),
        ("source", pa.string()),
    ]
)
_COMMON = [("item", pa.string()), ("domain", pa.string()), ("response_id", pa.string()), ("system", pa.string())]
_LABELS = [
    ("gold_label", pa.string()),
    ("annotators", pa.list_(pa.string())),
    ("labels", pa.list_(pa.string())),
    ("n_labels", pa.int64()),
    ("reference_label", pa.string()),
    ("adjudicated_label", pa.string()),
]
_VERIFICATION = [("claim", pa.string()), ("context", pa.string()), ("evidence", pa.string())]
_PREFERENCE = [
    ("question", pa.string()),
    ("source", pa.string()),
    ("system_a", pa.string()),
    ("system_b", pa.string()),
    ("claims_a", pa.list_(pa.string())),
    ("claims_b", pa.list_(pa.string())),
]
PAIR_SCHEMA = pa.schema(
    [
        ("item", pa.string()),
        ("domain", pa.string()),
        ("prompt", pa.string()),
        ("chosen", pa.string()),
        ("rejected", pa.string()),
        ("chosen_system", pa.string()),
        ("rejected_system", pa.string()),
        ("n_judgements", pa.int64()),
        ("n_agreeing", pa.int64()),
    ]
)


def item_schema(kind: str) -> pa.Schema:
    """The ``items`` table's columns for a study of this kind."""
    return pa.schema([*_COMMON, *(_PREFERENCE if kind == Study.Kind.PREFERENCE else _VERIFICATION), *_LABELS])


def reference_label(labels: Sequence[str]) -> str | None:
    """The label given by more than half of the item's labels; None when there is none (a tie, a split)."""
    if not labels:
        return None
    label, count = Counter(labels).most_common(1)[0]
    return label if 2 * count > len(labels) else None


def adjudicated_label(item: Item) -> str | None:
    """The seam for adjudication: a later feature returns the adjudicator's label here (and the card says so)."""
    return None


@dataclass
class PairCounts:
    """Items not made into preference pairs, by reason."""

    ties: int = 0
    both_bad: int = 0
    no_majority: int = 0
    unlabelled: int = 0
    missing_list: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Tables:
    annotations: pa.Table
    items: pa.Table
    pairs: pa.Table | None
    pair_counts: PairCounts | None
    n_annotators: int


def _annotation_rows(study: Study) -> list[dict[str, Any]]:
    rows = []
    for row in export_rows(study):
        row = {name: row.get(name) for name in ANNOTATION_SCHEMA.names}
        if row["evidence_judgements"] is not None and not isinstance(row["evidence_judgements"], str):
            row["evidence_judgements"] = json.dumps(row["evidence_judgements"], ensure_ascii=False)
        rows.append(row)
    return rows


def _direction(label: str) -> str:
    if label in (PREFERENCE_TIE, PREFERENCE_BOTH_BAD):
        return label
    index, _ = preference_parts(label)
    return "ab"[index] if index is not None else label


def pair_rows(items: Iterable[Mapping[str, Any]], counts: PairCounts) -> list[dict[str, Any]]:
    """TRL rows: per item, the majority *direction* of its judgements (more than half prefer one system,
    whatever the strength); ties, "both bad", items without such a majority and unlabelled items are
    left out and counted in ``counts``. ``chosen`` is the preferred system's claims, one per line."""
    out = []
    for item in items:
        labels = item["labels"]
        if not labels:
            counts.unlabelled += 1
            continue
        directions = [_direction(label) for label in labels]
        winner = reference_label(directions)
        if winner is None:
            counts.no_majority += 1
            continue
        if winner == PREFERENCE_TIE:
            counts.ties += 1
            continue
        if winner == PREFERENCE_BOTH_BAD:
            counts.both_bad += 1
            continue
        lists = {"a": item["claims_a"], "b": item["claims_b"]}
        if not lists["a"] or not lists["b"]:
            counts.missing_list += 1
            continue
        loser = "b" if winner == "a" else "a"
        prompt = "\n\n".join(part for part in (item["question"].strip(), item["source"].strip()) if part)
        out.append(
            {
                "item": item["item"],
                "domain": item["domain"],
                "prompt": prompt,
                "chosen": "\n".join(lists[winner]),
                "rejected": "\n".join(lists[loser]),
                "chosen_system": item[f"system_{winner}"],
                "rejected_system": item[f"system_{loser}"],
                "n_judgements": len(labels),
                "n_agreeing": directions.count(winner),
            }
        )
    return out


def _item_row(study: Study, item: Item, annotators: list[str], labels: list[str]) -> dict[str, Any]:
    payload = item.payload or {}
    row: dict[str, Any] = {
        "item": item.external_id,
        "domain": item.domain,
        "response_id": item.response_id,
        "system": item.system,
        "gold_label": item.gold_label or None,
        "annotators": annotators,
        "labels": labels,
        "n_labels": len(labels),
        "reference_label": reference_label(labels),
        "adjudicated_label": adjudicated_label(item),
    }
    if study.is_preference:
        systems = [*study.systems, "", ""]
        lists = payload.get("lists") or {}
        row.update(
            question=str(payload.get("question") or ""),
            source=str(payload.get("source") or ""),
            system_a=systems[0],
            system_b=systems[1],
            claims_a=[str(claim) for claim in lists.get(systems[0]) or []],
            claims_b=[str(claim) for claim in lists.get(systems[1]) or []],
        )
    else:
        row.update(
            claim=str(payload.get("claim") or ""),
            context=str(payload.get("context") or ""),
            evidence=json.dumps(payload.get("evidence") or [], ensure_ascii=False),
        )
    return row


def build_tables(study: Study) -> Tables:
    """The study's configs as Arrow tables with fixed schemas (an empty study gives empty tables)."""
    annotation_rows = _annotation_rows(study)
    given: dict[str, list[tuple[str, str]]] = {}
    for row in annotation_rows:
        if row["label"]:
            given.setdefault(row["item"], []).append((row["annotator"], row["label"]))
    item_rows = []
    for item in Item.objects.filter(study=study).order_by("position", "pk").iterator(chunk_size=2000):
        pairs = sorted(given.get(item.external_id, []))
        item_rows.append(_item_row(study, item, [name for name, _ in pairs], [label for _, label in pairs]))
    pairs_table, counts = None, None
    if study.is_preference:
        counts = PairCounts()
        pairs_table = pa.Table.from_pylist(pair_rows(item_rows, counts), schema=PAIR_SCHEMA)
    return Tables(
        annotations=pa.Table.from_pylist(annotation_rows, schema=ANNOTATION_SCHEMA),
        items=pa.Table.from_pylist(item_rows, schema=item_schema(study.kind)),
        pairs=pairs_table,
        pair_counts=counts,
        n_annotators=len({row["annotator"] for row in annotation_rows}),
    )
