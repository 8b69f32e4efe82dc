from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.questions.definitions import read_questions_file
from annotation.studies.services import create_study


def _pairs(text: str | None, flag: str) -> dict[str, str]:
    """Parse 'a=b,c=d' into a dict, with an error that names the flag."""
    if not text:
        return {}
    pairs = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise CommandError(f"{flag} takes name=value pairs separated by commas; got {part!r}")
        pairs[key.strip()] = value.strip()
    return pairs


class Command(BaseCommand):
    help = "Create an annotation study (preference or verification)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--kind", required=True, choices=["preference", "verification"])
        parser.add_argument("--annotators-per-item", type=int, default=3, metavar="N")
        parser.add_argument("--labels", help="comma-separated, in order (default: the kind's vocabulary)")
        parser.add_argument("--label-aliases", help="raw=canonical pairs, e.g. yes=factual,no=not_factual")
        parser.add_argument("--binary-map", help="label=positive|negative pairs (default for the ternary labels)")
        parser.add_argument("--systems", help="preference: the two systems A,B in order (default: from the first item)")
        parser.add_argument("--seed", type=int)
        parser.add_argument("--instructions", metavar="FILE.md", help="Markdown instructions for annotators")
        parser.add_argument(
            "--evidence-judgements", action="store_true", help="verification: judge each evidence passage"
        )
        parser.add_argument("--justification-required", action="store_true")
        parser.add_argument("--no-tie", action="store_true", help="preference: do not offer a tie")
        parser.add_argument("--both-bad", action="store_true", help="preference: offer 'both bad'")
        parser.add_argument("--irrelevant-in-credibility", action="store_true")
        parser.add_argument(
            "--questions",
            metavar="FILE",
            help="extra questions asked with each answer, a JSON or YAML list (docs/guide: extra questions)",
        )
        parser.add_argument(
            "--questionnaires",
            metavar="FILE",
            help="pre-study and post-study questionnaires and the comprehension quiz, JSON or YAML "
            "{pre: [...], quiz: {attempts, questions}, post: [...]} (docs/designs.md)",
        )
        parser.add_argument(
            "--conditions",
            help="between-subject conditions, comma-separated: key or key:<verifier name>, "
            "e.g. no_suggestion,verifier_suggestion:gpt4-judge",
        )
        parser.add_argument(
            "--exact-n-per",
            choices=["item", "condition"],
            default="item",
            help="with conditions: N annotators per item across conditions (item), or N in each condition",
        )
        parser.add_argument(
            "--adaptive",
            metavar="N_MIN:K",
            help="adaptive overlap: every item gets N_MIN annotators, more (up to --annotators-per-item) only "
            "while fewer than K answers agree, e.g. 2:2",
        )
        parser.add_argument("--status", choices=["draft", "open", "closed"], default="open")

    def handle(self, *args, **options) -> None:
        instructions = ""
        if options["instructions"]:
            path = Path(options["instructions"])
            if not path.is_file():
                raise CommandError(f"no such instructions file: {path}")
            instructions = path.read_text(encoding="utf-8-sig")
        try:
            questions = read_questions_file(options["questions"]) if options["questions"] else None
            questionnaires = read_questions_file(options["questionnaires"]) if options["questionnaires"] else None
            adaptive = _adaptive(options["adaptive"])
            study = create_study(
                slug=options["slug"],
                name=options["name"],
                kind=options["kind"],
                annotators_per_item=options["annotators_per_item"],
                labels=options["labels"].split(",") if options["labels"] else None,
                label_aliases=_pairs(options["label_aliases"], "--label-aliases"),
                binary_map=_pairs(options["binary_map"], "--binary-map"),
                systems=options["systems"].split(",") if options["systems"] else None,
                seed=options["seed"],
                instructions=instructions,
                evidence_judgements=options["evidence_judgements"],
                justification_required=options["justification_required"],
                tie_allowed=not options["no_tie"],
                both_bad_allowed=options["both_bad"],
                irrelevant_in_credibility=options["irrelevant_in_credibility"],
                questions=questions,
                questionnaires=questionnaires,
                conditions=options["conditions"],
                exact_n_per=options["exact_n_per"],
                adaptive_min_n=adaptive[0],
                adaptive_agreement=adaptive[1],
                status=options["status"],
            )
        except ServiceError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Created {study.kind} study {study.slug!r} with labels {', '.join(study.labels)}, "
                f"{study.annotators_per_item} annotators per item, seed {study.seed}"
                + (f", {len(study.questions)} extra question(s)" if study.questions else "")
                + (
                    f", conditions {', '.join(c['key'] for c in study.conditions)} "
                    f"({study.slots_per_item} labels per item)"
                    if study.conditions
                    else ""
                )
                + "."
            )
        )


def _adaptive(value: str | None) -> tuple[int | None, int | None]:
    """--adaptive N_MIN:K as create_study's two settings (n_min, k); (None, None) without it."""
    if not value:
        return None, None
    parts = value.split(":")
    if len(parts) != 2 or not all(part.strip().isdigit() for part in parts):
        raise CommandError(f"--adaptive takes N_MIN:K, two whole numbers such as 2:2, got {value!r}")
    return int(parts[0]), int(parts[1])
