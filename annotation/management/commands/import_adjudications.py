"""The command-line face of importing past adjudications (adjudication/services.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.adjudication.services import import_adjudications
from annotation.errors import ServiceError
from annotation.management.base import input_file, study_by_slug


class Command(BaseCommand):
    help = (
        "Import past adjudications (item, adjudicator, label or preferred + strength, note, guidelines_unclear) "
        "from JSON Lines or CSV; all or nothing, problems named by line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="the study's slug")
        parser.add_argument("file", help="a .jsonl or .csv file, or - for standard input (JSON Lines)")
        parser.add_argument("--format", choices=["jsonl", "csv"], help="when the file name does not say")

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_by_slug(options["study"])
        with input_file(options["file"], options["format"]) as (stream, fmt):
            try:
                result = import_adjudications(study=study, stream=stream, fmt=fmt)
            except ServiceError as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {result.created} new and {result.updated} revised adjudication(s) into {study.slug!r}."
            )
        )
