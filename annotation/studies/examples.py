"""Example import files, per study kind, made from a study's own settings (docs/formats.md).

The format help page offers them for download; tests import them back, so an
example that stops importing cleanly fails the suite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from annotation.lib.csvsafe import csv_chunks
from annotation.lib.formats import jsonl_chunks
from annotation.models import Study
from annotation.vocab import PREFERENCE_TIE, VERIFICATION_LABELS

#: What the example files hold.
WHATS = ("items", "annotations")
FORMATS = ("jsonl", "csv")
#: Systems of a preference study that has not declared its own yet (the guide's examples, docs/formats.md).
EXAMPLE_SYSTEMS = ("veriscore", "safe")
EXAMPLE_ANNOTATORS = ("w1", "w2")


def example_systems(study: Study | None) -> list[str]:
    return list(study.systems) if study is not None and len(study.systems) == 2 else list(EXAMPLE_SYSTEMS)


def example_items(kind: str, study: Study | None = None) -> list[dict[str, Any]]:
    """Two items of the kind, with every field the format knows."""
    if kind == Study.Kind.PREFERENCE:
        a, b = example_systems(study)
        return [
            {
                "id": "bio-001",
                "domain": "biography",
                "question": "Tell me a bio of Ada Lovelace.",
                "source": "Ada Lovelace (1815-1852) was an English mathematician who wrote the first computer program.",
                "lists": {
                    a: ["Ada Lovelace was English.", "Ada Lovelace was a mathematician.", "She wrote a program."],
                    b: [
                        "Ada Lovelace was born in 1815.",
                        "Ada Lovelace died in 1852.",
                        "Ada Lovelace was an English mathematician.",
                        "Ada Lovelace wrote the first computer program.",
                    ],
                },
            },
            {
                "id": "bio-002",
                "domain": "biography",
                "source": "Alan Turing formalised computation with the Turing machine in 1936.",
                "lists": {
                    a: ["Alan Turing formalised computation.", "He used the Turing machine in 1936."],
                    b: ["Alan Turing formalised computation.", "Alan Turing described the Turing machine in 1936."],
                },
            },
        ]
    gold = (study.labels if study is not None and study.labels else list(VERIFICATION_LABELS))[0]
    return [
        {
            "id": "c-0001",
            "domain": "longfact",
            "claim": "The Eiffel Tower was completed in 1889.",
            "context": "Paris is known for the Eiffel Tower, which was completed in 1889 for the World's Fair.",
            "response_id": "r-01",
            "system": "gpt-4o",
            "gold": gold,
            "evidence": [
                {
                    "text": "The tower was completed on 31 March 1889, in time for the Exposition Universelle.",
                    "title": "Eiffel Tower",
                    "url": "https://en.wikipedia.org/wiki/Eiffel_Tower",
                    "source_type": "wikipedia",
                },
                {
                    "text": "Visitors can reach the top floor by lift.",
                    "title": "Visiting the tower",
                    "url": "https://www.toureiffel.paris/en",
                    "source_type": "web",
                },
            ],
        },
        {
            "id": "c-0002",
            "domain": "longfact",
            "claim": "The Eiffel Tower is 500 metres tall.",
            "evidence": [
                {
                    "text": "The tower is 330 metres tall, about the same height as an 81-storey building.",
                    "title": "Eiffel Tower",
                    "url": "https://en.wikipedia.org/wiki/Eiffel_Tower",
                    "source_type": "wikipedia",
                }
            ],
        },
    ]


def example_annotations(kind: str, study: Study | None = None) -> list[dict[str, Any]]:
    """Labels made elsewhere for the example items: one per annotator slot the study has, up to two."""
    per_item = min(len(EXAMPLE_ANNOTATORS), study.annotators_per_item if study is not None else 2)
    annotators = EXAMPLE_ANNOTATORS[:per_item]
    if kind == Study.Kind.PREFERENCE:
        a, b = example_systems(study)
        tie = study is None or study.tie_allowed
        answers: list[dict[str, Any]] = [
            {"preferred": b, "strength": "strong", "justification": "List 2 keeps the dates.", "left_system": a},
            {"preferred": b, "strength": "slight", "active_ms": 41000},
            {"preferred": a, "strength": "slight"},
            {"preferred": PREFERENCE_TIE} if tie else {"preferred": b, "strength": "slight"},
        ]
        ids = ["bio-001", "bio-001", "bio-002", "bio-002"]
        return [
            {"item": item, "annotator": annotators[n % per_item], **answer}
            for n, (item, answer) in enumerate(zip(ids, answers, strict=True))
            if n % 2 < per_item
        ]
    labels = study.labels if study is not None and study.labels else list(VERIFICATION_LABELS)
    judged = study is not None and study.evidence_judgements
    rows = []
    for n, (item, passages) in enumerate((("c-0001", 2), ("c-0002", 1))):
        for m, annotator in enumerate(annotators):
            row: dict[str, Any] = {
                "item": item,
                "annotator": annotator,
                "label": labels[min(n + m, len(labels) - 1)],
            }
            if judged or m == 0:
                row["evidence_judgements"] = [
                    {"index": index, "judgement": "support" if index == 0 and n == 0 else "not_support", "useful": True}
                    for index in range(passages)
                ]
            if m == 0:
                row["justification"] = "The first passage gives the date."
            rows.append(row)
    return rows


ITEM_COLUMNS: dict[str, list[str]] = {
    Study.Kind.PREFERENCE: ["id", "domain", "question", "source", "lists"],
    Study.Kind.VERIFICATION: ["id", "domain", "claim", "context", "response_id", "system", "gold", "evidence"],
}
ANNOTATION_COLUMNS: dict[str, list[str]] = {
    Study.Kind.PREFERENCE: ["item", "annotator", "preferred", "strength", "justification", "left_system", "active_ms"],
    Study.Kind.VERIFICATION: ["item", "annotator", "label", "justification", "evidence_judgements"],
}


def example_file(kind: str, what: str, fmt: str, study: Study | None = None) -> str:
    """An example file's text: `what` is items or annotations, `fmt` jsonl or csv."""
    if kind not in Study.Kind.values or what not in WHATS or fmt not in FORMATS:
        raise ValueError(f"no example for {kind!r} {what!r} as {fmt!r}")
    rows = example_items(kind, study) if what == "items" else example_annotations(kind, study)
    if fmt == "jsonl":
        return "".join(jsonl_chunks(rows))
    columns: Sequence[str] = (ITEM_COLUMNS if what == "items" else ANNOTATION_COLUMNS)[kind]
    return "".join(csv_chunks(list(columns), rows))


def example_filename(kind: str, what: str, fmt: str, study: Study | None = None) -> str:
    prefix = study.slug if study is not None else kind
    return f"{prefix}-example-{what}.{fmt}"
