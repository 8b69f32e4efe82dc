from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.management.base import study_by_slug
from annotation.models import Study
from annotation.progress.counters import recount_study
from annotation.progress.tally import counted


class Command(BaseCommand):
    help = (
        "Recompute the counters behind the home page and the study overview from the items and annotations "
        "(progress/counters.py), and say whether they had drifted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", nargs="?", help="study slug")
        parser.add_argument("--all", action="store_true", help="every study")

    def handle(self, *args, **options) -> None:
        if options["all"] == bool(options["study"]):
            raise CommandError("name one study, or give --all (not both)")
        studies = Study.objects.order_by("slug") if options["all"] else [study_by_slug(options["study"])]
        for study in studies:
            before = counted(study)
            recount_study(study)
            after = counted(study)
            verdict = "unchanged" if after == before else "corrected (the counters had drifted)"
            items = sum(n for n, _, _ in after.domains.values())
            labels = sum(after.annotators.values())
            self.stdout.write(
                f"{study.slug}: {items} items, {labels} annotations, {after.complete} items complete; {verdict}"
            )
