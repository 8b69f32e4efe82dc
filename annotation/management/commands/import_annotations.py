from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.management.base import input_file, study_by_slug
from annotation.services import ServiceError, import_annotations


class Command(BaseCommand):
    help = "Import labels collected elsewhere; creates the study's annotator identities."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("file", help="a .jsonl or .csv file, or - for standard input (JSONL)")
        parser.add_argument("--format", choices=["jsonl", "csv"], help="override the format the extension implies")
        parser.add_argument("--update", action="store_true", help="replace an annotator's existing label on an item")

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        with input_file(options["file"], options["format"]) as (stream, fmt):
            try:
                result = import_annotations(study=study, stream=stream, fmt=fmt, update=options["update"])
            except ServiceError as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {result.created} new and {result.updated} changed annotation(s) into {study.slug!r}."
            )
        )
