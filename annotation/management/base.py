"""Shared pieces of the CLI faces: study lookup and import error reporting."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ImportResult, ServiceError
from annotation.lib.background_priority import lower_priority
from annotation.lib.formats import detect_format
from annotation.models import Study
from annotation.transfer.adapters import SOURCES, import_from
from annotation.transfer.adapters.base import ITEMS
from annotation.transfer.adapters.source_labels import CHOICES, DEFAULT, DESCRIPTIONS
from annotation.transfer.adapters.uploads import system_names as parse_system_names


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


def system_names(value: str | None) -> tuple[str, str] | None:
    """--systems A,B (or one name, for the system that wrote a single file's responses)."""
    try:
        return parse_system_names(value or "")
    except ServiceError as exc:
        raise CommandError(f"--{exc}") from None


class ImportCommand(BaseCommand):
    """A CLI face of one import service: study, file, --format, --update, and --from a pipeline's file."""

    noun = "record"
    update_help = "replace entries whose id already exists"
    target = "items"  # what --from imports into (annotation/adapters)

    importer: Callable[..., ImportResult]  # each subclass names its service

    def extra_importers(self) -> dict[str, Callable[..., ImportResult]]:
        """Import services of other apps that --from may feed (the predictions command adds its own)."""
        return {}

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("file", help="a .jsonl or .csv file, or - for standard input (JSONL)")
        parser.add_argument("--format", choices=["jsonl", "csv"], help="override the format the extension implies")
        parser.add_argument("--update", action="store_true", help=self.update_help)
        parser.add_argument(
            "--from",
            dest="source",
            choices=SOURCES,
            help="the file is a pipeline's own output (see docs/importing.md), not Claimlab's format",
        )
        parser.add_argument(
            "--pair",
            metavar="FILE",
            help="--from veriscore into a preference study: the second extractor's claims file",
        )
        parser.add_argument(
            "--systems",
            metavar="A[,B]",
            help="--from: the system names (two extractors, or the model that wrote the responses)",
        )
        parser.add_argument("--verifier", help="--from: the name the imported predictions' verifier gets")
        if self.target == ITEMS:
            parser.add_argument(
                "--source-labels",
                choices=CHOICES,
                default=None,
                help="--from a file that holds the source's own labels beside the items: "
                + "; ".join(f"{name}: {text}" for name, text in DESCRIPTIONS.items())
                + f" (default: {DEFAULT})",
            )

    def handle(self, *args: Any, **options: Any) -> None:
        lower_priority(settings.BACKGROUND_NICE)  # a big file's parsing yields the CPU to annotators' pages
        study = study_by_slug(options["study"])
        if options["source"]:
            result = self._import_from(study, options)
            self._report(study, result)
            return
        if options["pair"] or options["systems"] or options["verifier"] or options.get("source_labels"):
            raise CommandError("--pair, --systems, --verifier and --source-labels go with --from")
        with input_file(options["file"], options["format"]) as (stream, fmt):
            try:
                result = self.importer(study=study, stream=stream, fmt=fmt, update=options["update"])
            except ServiceError as exc:
                raise CommandError(str(exc)) from None
        self._report(study, result)

    def _import_from(self, study: Study, options: dict[str, Any]) -> ImportResult:
        paths = [options["file"], *([options["pair"]] if options["pair"] else [])]
        for path in paths:
            if not Path(path).is_file():
                raise CommandError(f"no such file: {path}")
        with Path(options["file"]).open("rb") as stream, ExitStack() as pair_files:
            pair = pair_files.enter_context(Path(options["pair"]).open("rb")) if options["pair"] else None
            try:
                return import_from(
                    source=options["source"],
                    target=self.target,
                    study=study,
                    stream=stream,
                    file_name=Path(options["file"]).name,
                    pair=pair,
                    pair_name=Path(options["pair"]).name if options["pair"] else "",
                    systems=system_names(options["systems"]),
                    verifier=options["verifier"] or "",
                    update=options["update"],
                    importers=self.extra_importers(),
                    source_labels=options.get("source_labels"),
                )
            except ServiceError as exc:
                raise CommandError(str(exc)) from None

    def _report(self, study: Study, result: ImportResult) -> None:
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {result.created} new and {result.updated} updated {self.noun}(s) into {study.slug!r}."
            )
        )
        for note in result.notes:
            self.stdout.write(f"  {note}")
