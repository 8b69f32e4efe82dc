"""The dataset's tables (configs), built from the study's items and its annotation export rows.

- ``annotations``: one row per (item, annotator), the columns of the CSV/JSONL
  export (docs/formats.md) minus the study slug.
- ``items``: one row per item: its content, every label given (``labels``, in
  the order of ``annotators``), the reference label and where it came from (the
  study's reference rule: adjudicated, else the strict majority by default) and
  ``adjudicated_label`` (null where nobody adjudicated or the adjudicators differ).
- ``preference_pairs`` (preference studies): TRL-style ``prompt`` / ``chosen`` /
  ``rejected`` rows from each item's preferred system by the same rule (see ``pair_rows``).

Every label comes from the study frame (``metaeval.study_frame``), as the report's do: the
same participants (withdrawn and screened-out crowd participants left out), the same check
items rule and the same reference rule, so the dataset and the report count the same labels.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from annotation.models import Item, Study
from annotation.transfer.selectors import export_rows
from annotation.vocab import PREFERENCE_BOTH_BAD, PREFERENCE_TIE, preference_parts
from metaeval import study_frame as frames
from metaeval.stats import PREFERENCE_LABELS

from .predictions import WrittenConfig

__all__ = [
    "ANNOTATION_SCHEMA",
    "PAIR_SCHEMA",
    "PairCounts",
    "Tables",
    "build_tables",
    "item_schema",
    "pair_rows",
    "preferred_directions",
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
    ("reference_source", pa.string()),
    ("adjudicated_label", pa.string()),
    ("is_check", pa.bool_()),
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


#: A preference label's direction: the system it prefers ("a" / "b"), a tie or "both bad".
DIRECTIONS = ["a", PREFERENCE_TIE, "b", PREFERENCE_BOTH_BAD]


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
    items: pa.Table | WrittenConfig  # written to its file as built (``build_tables(items_to=...)``)
    pairs: pa.Table | None
    pair_counts: PairCounts | None
    n_annotators: int
    frame: frames.StudyFrame  # the labels every table came from (the card's agreement reads it too)


def annotation_schema(study: Study) -> pa.Schema:
    """ANNOTATION_SCHEMA, then the annotator's condition and one column per extra question (issue 32), as the
    export has them; a question's answer is JSON text (a number, a list, or per system for list and claim questions)."""
    extra = [("condition", pa.string())] if study.conditions else []
    extra += [(f"q_{question['key']}", pa.string()) for question in study.questions]
    return pa.schema([*ANNOTATION_SCHEMA, *(pa.field(name, kind) for name, kind in extra)])


def _json_text(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _annotation_rows(study: Study, counted: set[tuple[str, str]], schema: pa.Schema) -> list[dict[str, Any]]:
    """The export's rows of the labels the study frame counts (``counted``: its (item, annotator) pairs)."""
    rows = []
    for row in export_rows(study):
        if (row.get("item"), row.get("annotator")) not in counted:
            continue  # a participant left out of analysis, a check item's label, a skipped assignment
        row = {name: row.get(name) for name in schema.names}
        if row["evidence_judgements"] is not None and not isinstance(row["evidence_judgements"], str):
            row["evidence_judgements"] = json.dumps(row["evidence_judgements"], ensure_ascii=False)
        for name in schema.names:
            if name.startswith("q_"):
                row[name] = row[name] if isinstance(row[name], str) else _json_text(row[name])
        rows.append(row)
    return rows


def _direction(label: str) -> str:
    if label in (PREFERENCE_TIE, PREFERENCE_BOTH_BAD):
        return label
    index, _ = preference_parts(label)
    return "ab"[index] if index is not None else label


def preferred_directions(frame: frames.StudyFrame) -> dict[str, str]:
    """Each item's preferred direction (``DIRECTIONS``) by the study's reference rule on its labels' directions.

    Why directions: a pair needs the preferred *system*; with the default rule an adjudicated item
    takes its adjudicator's direction and any other the strict majority direction of its
    judgements (more than half prefer one system, whatever the strength).
    """
    labels = [*PREFERENCE_LABELS, PREFERENCE_BOTH_BAD]
    reference = frame.reference_in({label: _direction(label) for label in labels}, DIRECTIONS)
    return {str(item): str(direction) for item, direction in reference.labels.items()}


def pair_rows(
    items: Iterable[Mapping[str, Any]], counts: PairCounts, directions: Mapping[str, str]
) -> list[dict[str, Any]]:
    """TRL rows: per item, its preferred direction (``directions``: ``preferred_directions``); ties, "both
    bad", items without a direction and unlabelled items are left out and counted in ``counts``.
    ``chosen`` is the preferred system's claims, one per line."""
    out = []
    for item in items:
        labels = item["labels"]
        winner = directions.get(item["item"])
        if not labels and winner is None:
            counts.unlabelled += 1
            continue
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
                "n_agreeing": [_direction(label) for label in labels].count(winner),
            }
        )
    return out


def _item_row(
    study: Study, item: Item, annotators: list[str], labels: list[str], frame: frames.StudyFrame
) -> dict[str, Any]:
    payload = item.payload or {}
    reference = frame.reference
    row: dict[str, Any] = {
        "item": item.external_id,
        "domain": item.domain,
        "response_id": item.response_id,
        "system": item.system,
        "gold_label": item.gold_label or None,
        "annotators": annotators,
        "labels": labels,
        "n_labels": len(labels),
        "reference_label": reference.labels.get(item.external_id),
        "reference_source": reference.source.get(item.external_id),
        "adjudicated_label": frame.adjudicated.labels.get(item.external_id),
        "is_check": item.is_check,
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


#: Items per batch of the ``items`` config (a parquet row group each when written as built): bounds the
#: memory of a verifier-scale study's export (a million items as one list of rows held 2.2 GB).
ITEM_BATCH_ROWS = 20_000


def _item_batches(
    study: Study, frame: frames.StudyFrame, given: Mapping[str, list[tuple[str, str]]]
) -> Iterator[list[dict[str, Any]]]:
    """The ``items`` rows in the study's order, ``ITEM_BATCH_ROWS`` at a time."""
    batch: list[dict[str, Any]] = []
    for item in Item.objects.filter(study=study).order_by("position", "pk").iterator(chunk_size=2000):
        pairs = sorted(given.get(item.external_id, []))
        batch.append(_item_row(study, item, [name for name, _ in pairs], [label for _, label in pairs], frame))
        if len(batch) == ITEM_BATCH_ROWS:
            yield batch
            batch = []
    if batch:
        yield batch


def build_tables(study: Study, frame: frames.StudyFrame | None = None, *, items_to: Path | None = None) -> Tables:
    """The study's configs as Arrow tables with fixed schemas (an empty study gives empty tables).

    ``frame``: the study frame to read (None: the study's, with its default options). ``items_to``: write the
    ``items`` config to this parquet file a batch at a time (``Tables.items`` then says what was written)
    instead of holding it; the other configs are as long as the labels, which a human study has few of.
    """
    frame = frame or frames.study_frame(study)
    labels = frame.labels
    given: dict[str, list[tuple[str, str]]] = {}
    for item_id, annotator, label in zip(labels["item"], labels["annotator"], labels["label"], strict=True):
        given.setdefault(str(item_id), []).append((str(annotator), str(label)))
    counted = {(item_id, annotator) for item_id, pairs in given.items() for annotator, _ in pairs}
    schema = annotation_schema(study)
    annotation_rows = _annotation_rows(study, counted, schema)
    items_schema = item_schema(study.kind)
    counts = PairCounts() if study.is_preference else None
    directions = preferred_directions(frame) if study.is_preference else {}
    pairs: list[dict[str, Any]] = []
    items: pa.Table | WrittenConfig
    if items_to is None:
        item_rows = [row for batch in _item_batches(study, frame, given) for row in batch]
        if counts is not None:
            pairs = pair_rows(item_rows, counts, directions)
        items = pa.Table.from_pylist(item_rows, schema=items_schema)
    else:
        written = 0
        with pq.ParquetWriter(items_to, items_schema) as writer:
            for batch in _item_batches(study, frame, given):
                if counts is not None:
                    pairs += pair_rows(batch, counts, directions)
                writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=items_schema))
                written += len(batch)
        items = WrittenConfig(schema=items_schema, num_rows=written)
    return Tables(
        annotations=pa.Table.from_pylist(annotation_rows, schema=schema),
        items=items,
        pairs=pa.Table.from_pylist(pairs, schema=PAIR_SCHEMA) if counts is not None else None,
        pair_counts=counts,
        n_annotators=len({row["annotator"] for row in annotation_rows}),
        frame=frame,
    )
