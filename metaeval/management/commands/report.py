"""``manage.py report STUDY``: the meta-evaluation report as JSON, CSV, a standalone HTML file or LaTeX tables."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.management.base import study_by_slug
from metaeval.reporting import ReportOptions, cache
from metaeval.reporting.csv_format import report_csv
from metaeval.reporting.html_format import report_html
from metaeval.reporting.latex_format import report_tex


def _types(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


class Command(BaseCommand):
    help = "Print or write a study's meta-evaluation report (agreement, preferences, factuality scores)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("--format", choices=["json", "csv", "html", "tex"], default="json")
        parser.add_argument("--by-domain", action="store_true", help="add agreement per domain")
        parser.add_argument("--binary", action="store_true", help="add agreement on the binary collapse")
        parser.add_argument("--source-types", metavar="A,B", help="credibility: only these evidence source types")
        parser.add_argument("--exclude-source-types", metavar="A,B", help="credibility: leave out these types")
        parser.add_argument(
            "--k", type=int, metavar="K", help="VeriScore F1@K with this K (default: the median per domain)"
        )
        parser.add_argument(
            "--reference",
            default=None,
            help="reference labels for annotator quality and verifier agreement: gold, majority, dawid_skene, "
            "adjudicated, adjudicated_else_majority (default: the study's reference rule)",
        )
        parser.add_argument(
            "--include-screened-out",
            action="store_true",
            help="crowd studies: count screened-out participants' labels too (withdrawn ones never count)",
        )
        parser.add_argument(
            "--ppi-labelled-share",
            type=float,
            metavar="SHARE",
            help="PPI: use only this seeded random share of the human-labelled claims as labelled (0 < SHARE <= 1)",
        )
        parser.add_argument("--output", metavar="FILE", help="write here instead of standard output")

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        try:
            report_options = self._options(options)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["format"] == "json":  # streamed: the long lists never held whole (issue 35)
            try:
                self._write_pieces(cache.report_json_pieces(study, report_options), options)
            except cache.ReportReplaced as exc:  # a newer report replaced it while it was written: say so
                raise CommandError(str(exc)) from None
            return
        # exact (cached only when current); the per-response rows are in the JSON only
        report = cache.current_report(study, report_options, per_response=False).report
        self._write_pieces(iter([self._text(study, report, options["format"])]), options)

    def _options(self, options) -> ReportOptions:
        return ReportOptions(
            reference=options["reference"],
            include_screened_out=options["include_screened_out"],
            by_domain=options["by_domain"],
            binary=options["binary"],
            source_types=_types(options["source_types"]) or None,
            exclude_source_types=_types(options["exclude_source_types"]),
            k=options["k"],
            ppi_labelled_share=options["ppi_labelled_share"],
        )

    @staticmethod
    def _text(study, report: dict, fmt: str) -> str:
        if fmt == "csv":
            return report_csv(report)
        if fmt == "tex":
            return report_tex(report)
        return report_html(study, report)

    def _write_pieces(self, pieces: Iterator[str], options) -> None:
        """To standard output, or to a file that appears only whole (written beside it, then renamed)."""
        json_text = options["format"] == "json"
        if not options["output"]:
            for piece in pieces:
                self.stdout.write(piece, ending="")
            if json_text:
                self.stdout.write("")  # the final newline
            return
        path = Path(options["output"])
        if not path.parent.exists():
            raise CommandError(f"the folder {path.parent} does not exist")
        partial = path.with_name(path.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8", newline="") as out:
                for piece in pieces:
                    out.write(piece)
                if json_text:
                    out.write("\n")
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(path)
        self.stderr.write(f"Wrote {path}")
