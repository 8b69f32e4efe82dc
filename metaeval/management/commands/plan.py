"""``manage.py plan preference|verification``: items a study needs, before it runs (same numbers as /plan/)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from metaeval.planning import PLAN_KINDS, make_plan, plan_from_query
from metaeval.reporting.options import InvalidOption


class Command(BaseCommand):
    help = "How many items a preference or verification study needs (sign-test power, CI widths, kappa)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", choices=PLAN_KINDS)
        parser.add_argument("--p", help="preference: expected share preferring one system (default 0.65)")
        parser.add_argument("--power", help="target power (default 0.8)")
        parser.add_argument("--alpha", help="significance level, two-sided (default 0.05)")
        parser.add_argument("--width", help="target 95%% CI width (default 0.1)")
        parser.add_argument("--kappa", help="verification: expected kappa (default 0.6)")
        parser.add_argument("--kappa-b", help="verification: a second verifier's kappa, to tell the two apart")
        parser.add_argument("--distribution", metavar="P1,P2,...", help="verification: expected label shares")
        parser.add_argument("--share", help="PPI plan: expected share of claims supported (default 0.5)")
        parser.add_argument("--sensitivity", help="PPI plan: the verifier's recall of supported claims (a pilot's)")
        parser.add_argument("--specificity", help="PPI plan: the verifier's recall of unsupported claims")
        parser.add_argument("--unlabelled", help="PPI plan: claims the verifier labels without humans (10,000)")

    def handle(self, *args, **options) -> None:
        names = ("kind", "p", "power", "alpha", "width", "kappa", "distribution", "share", "sensitivity", "specificity")
        query = {key: options[key] for key in (*names, "unlabelled")}
        query["kappa_b"] = options["kappa_b"]
        try:
            plan = make_plan(plan_from_query({k: v for k, v in query.items() if v is not None}))
        except InvalidOption as exc:
            raise CommandError(f"--{exc.name.replace('_', '-')}: {exc}") from None
        self.stdout.write(json.dumps(plan, indent=2, allow_nan=False))
