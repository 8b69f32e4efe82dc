"""Shared pieces of the CLI faces: study lookup and import error reporting."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ..formats import detect_format
from ..models import Study
from ..services.errors import ImportResult, ServiceError


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


class ImportCommand(BaseCommand):
    """A CLI face of one import service: study, file, --format, --update."""

    noun = "record"
    update_help = "replace entries whose id already exists"

    importer: Callable[..., ImportResult]  # each subclass names its service

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("file", help="a .jsonl or .csv file, or - for standard input (JSONL)")
        parser.add_argument("--format", choices=["jsonl", "csv"], help="override the format the extension implies")
        parser.add_argument("--update", action="store_true", help=self.update_help)

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_by_slug(options["study"])
        with input_file(options["file"], options["format"]) as (stream, fmt):
            try:
                result = self.importer(study=study, stream=stream, fmt=fmt, update=options["update"])
            except ServiceError as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {result.created} new and {result.updated} updated {self.noun}(s) into {study.slug!r}."
            )
        )
