"""Annotation export as streamed CSV or JSON Lines text (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Iterator

from .formats import csv_chunks, jsonl_chunks
from .models import Study
from .selectors import EXPORT_COLUMNS, export_rows

CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}


def export_chunks(study: Study, fmt: str) -> Iterator[str]:
    """The study's annotations as text chunks in `fmt` ("csv" or "jsonl")."""
    if fmt not in CONTENT_TYPES:
        raise ValueError(f"unknown export format {fmt!r}; use csv or jsonl")
    rows = export_rows(study)
    return csv_chunks(EXPORT_COLUMNS, rows) if fmt == "csv" else jsonl_chunks(rows)


def export_filename(study: Study, fmt: str) -> str:
    return f"{study.slug}-annotations.{fmt}"
