from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.management.base import study_by_slug
from metaeval.dataset_export import write_hf_dataset
from metaeval.dataset_export.card import UNKNOWN_LICENSE
from metaeval.dataset_export.licenses import LICENSES


class Command(BaseCommand):
    help = (
        "Export a study as a dataset folder: --format hf writes Hugging Face parquet configs under DIR/data/ "
        "(annotations, items and, for preference studies, TRL-style preference_pairs) and a dataset card."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("directory", metavar="DIR", help="a new or empty folder to write")
        parser.add_argument("--format", choices=["hf"], default="hf", help="hf: Hugging Face datasets layout")
        parser.add_argument(
            "--license",
            default=UNKNOWN_LICENSE,
            help=f"the dataset's licence, a Hub identifier or SPDX id ({', '.join(LICENSES)}); default {UNKNOWN_LICENSE!r}: unknown",
        )

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        try:
            result = write_hf_dataset(study, Path(options["directory"]), license=options["license"])
        except ServiceError as exc:
            raise CommandError(str(exc)) from None
        rows = ", ".join(f"{name}: {count:,} rows" for name, count in result.rows.items())
        self.stderr.write(f"Wrote {result.folder} ({rows})")
        if result.pairs_left_out is not None:
            left = result.pairs_left_out
            self.stderr.write(
                f"Preference pairs leave out {left.ties} ties, {left.both_bad} both bad, "
                f"{left.no_majority} items without a majority and {left.unlabelled} unlabelled items."
            )
