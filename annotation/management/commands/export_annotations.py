from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.exports import export_chunks
from annotation.management.base import study_by_slug


class Command(BaseCommand):
    help = "Export a study's annotations, one row per annotation (long format)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("--format", choices=["csv", "jsonl"], default="csv")
        parser.add_argument("--output", metavar="FILE", help="write here instead of standard output")

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        chunks = export_chunks(study, options["format"])
        if options["output"]:
            path = Path(options["output"])
            if not path.parent.exists():
                raise CommandError(f"the folder {path.parent} does not exist")
            partial = path.with_name(path.name + ".partial")
            try:
                with partial.open("w", encoding="utf-8", newline="") as target:
                    for chunk in chunks:
                        target.write(chunk)
                partial.replace(path)
            finally:
                partial.unlink(missing_ok=True)
            self.stderr.write(f"Wrote {path}")
        else:
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
            self.stdout.flush()
