from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.management.base import study_by_slug
from annotation.transfer.adapters.labelstudio_export import labelstudio_chunks
from annotation.transfer.exports import export_chunks, write_export


class Command(BaseCommand):
    help = "Export a study's annotations, one row per annotation (long format)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument(
            "--format",
            choices=["csv", "jsonl", "labelstudio"],
            default="csv",
            help="labelstudio: a Label Studio JSON export (tasks with choices annotations; docs/importing.md)",
        )
        parser.add_argument("--output", metavar="FILE", help="write here instead of standard output")

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        if options["format"] == "labelstudio":
            self._labelstudio(study, options["output"])
            return
        if options["output"]:
            path = Path(options["output"])
            if not path.parent.exists():
                raise CommandError(f"the folder {path.parent} does not exist")
            rows = write_export(study, options["format"], path)
            self.stderr.write(f"Wrote {path} ({rows:,} annotations)")
        else:
            for chunk in export_chunks(study, options["format"]):
                self.stdout.write(chunk, ending="")
            self.stdout.flush()

    def _labelstudio(self, study, output: str | None) -> None:
        if not output:
            for chunk in labelstudio_chunks(study):
                self.stdout.write(chunk, ending="")
            self.stdout.flush()
            return
        path = Path(output)
        if not path.parent.exists():
            raise CommandError(f"the folder {path.parent} does not exist")
        partial = path.with_name(path.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8") as target:
                for chunk in labelstudio_chunks(study):
                    target.write(chunk)
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)
        self.stderr.write(f"Wrote {path} (Label Studio tasks)")
