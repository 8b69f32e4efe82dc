"""Annotation export as streamed CSV or JSON Lines text (docs/formats.md)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from django.http import Http404
from django.http.response import HttpResponseBase

from annotation.lib.csvsafe import csv_chunks
from annotation.lib.export_formats import ExportFormat, export_format
from annotation.lib.formats import jsonl_chunks
from annotation.lib.storage import download_response, files
from annotation.models import ExportJob, Study
from annotation.transfer.selectors import export_columns, export_rows

CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}


def export_chunks(study: Study, fmt: str) -> Iterator[str]:
    """The study's annotations as text chunks in `fmt` ("csv" or "jsonl")."""
    return _chunks(export_rows(study), fmt, export_columns(study))


def _chunks(rows: Iterable[dict[str, Any]], fmt: str, columns: list[str]) -> Iterator[str]:
    if fmt not in CONTENT_TYPES:
        raise ValueError(f"unknown export format {fmt!r}; use csv or jsonl")
    return csv_chunks(columns, rows) if fmt == "csv" else jsonl_chunks(rows)


def write_export(study: Study, fmt: str, path: Path) -> int:
    """Write the export to `path`, whole or not at all (via `<path>.partial`); the number of rows."""
    written = 0

    def counted(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        nonlocal written
        for row in rows:
            written += 1
            yield row

    partial = path.with_name(path.name + ".partial")
    source = export_rows(study)
    try:
        with partial.open("w", encoding="utf-8", newline="") as target:
            for chunk in _chunks(counted(source), fmt, export_columns(study)):
                target.write(chunk)
        partial.replace(path)
    finally:
        # Close the database cursor now, inside the job's transaction: after a failed write the
        # traceback keeps the generator alive, and closing it later (on PostgreSQL, a named
        # cursor) would fail in whatever transaction the garbage collector happens to run in.
        source.close()
        partial.unlink(missing_ok=True)
    return written


def export_filename(study: Study, fmt: str) -> str:
    """What a download of the study's export in `fmt` is called: `<slug>-annotations.csv`, or for a
    format another app builds (annotation/lib/export_formats.py) `<slug>-<its suffix>`."""
    registered = _registered(fmt)
    return f"{study.slug}-{registered.suffix}" if registered else f"{study.slug}-annotations.{fmt}"


def export_content_type(fmt: str) -> str:
    registered = _registered(fmt)
    return registered.content_type if registered else CONTENT_TYPES.get(fmt, "application/octet-stream")


def _registered(fmt: str) -> ExportFormat | None:
    """The format another app registered, for a format that is not one of the annotations' own."""
    return export_format(fmt) if fmt not in CONTENT_TYPES else None


def export_file_response(job: ExportJob) -> HttpResponseBase:
    """A finished background export as a download (pages and API alike); 404 saying why when there is none.

    The file streamed from a local storage, or a redirect to a short-lived presigned URL of the
    shared bucket (annotation/lib/storage.py); the caller has checked who may have it.
    """
    if job.status != ExportJob.Status.SUCCEEDED:
        raise Http404(f"This export is {job.get_status_display().lower()}, not ready for download.")
    if not job.file_path or not files().exists(job.file_path):
        raise Http404("This export was replaced by a newer one of the same format; download that one.")
    return download_response(
        job.file_path,
        filename=export_filename(job.study, job.file_format),
        content_type=export_content_type(job.file_format),
    )
