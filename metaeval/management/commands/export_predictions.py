from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.management.base import study_by_slug
from metaeval.verifiers.prediction_export import FORMATS, write_predictions


class Command(BaseCommand):
    help = (
        "Write a study's verifier predictions to FILE, one row each (docs/formats.md), streamed: "
        "a million predictions take seconds and little memory. The format follows FILE's suffix unless --format."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("file", metavar="FILE", help="the file to write (replaced whole, or left as it was)")
        parser.add_argument("--format", choices=FORMATS, default=None, help="csv or jsonl; default: FILE's suffix")

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        path = Path(options["file"])
        fmt = options["format"] or path.suffix.lstrip(".").lower()
        if fmt not in FORMATS:
            raise CommandError(f"cannot tell the format from {path.name!r}: give --format csv or --format jsonl")
        if not path.parent.is_dir():
            raise CommandError(f"the folder {path.parent} does not exist")
        rows = write_predictions(study, fmt, path)
        self.stderr.write(f"Wrote {rows:,} prediction(s) of {study.slug} to {path}")
