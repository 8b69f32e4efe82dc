"""Shared pieces of the CLI faces: study lookup and import error reporting."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from django.core.management.base import CommandError

from ..formats import detect_format
from ..models import Study



def study_by_slug(slug: str) -> Study:
    """The study an operator named on the command line, or a clear error."""
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        known = ", ".join(Study.objects.order_by("slug").values_list("slug", flat=True)[:20]) or "none yet"
        raise CommandError(f"no study {slug!r} (known studies: {known})")
    return study


@contextmanager
def input_file(path: str, explicit_format: str | None) -> Iterator[tuple[IO[bytes], str]]:
    """Open an import file (or '-' for standard input) with its format."""
    try:
        fmt = detect_format(path if path != "-" else "stdin.jsonl", explicit_format)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if path == "-":
        yield sys.stdin.buffer, fmt
        return
    file = Path(path)
    if not file.is_file():
        raise CommandError(f"no such file: {path}")
    with file.open("rb") as stream:
        yield stream, fmt


