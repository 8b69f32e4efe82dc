from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from metaeval.verifiers.services.demo import load_demo_verifiers


class Command(BaseCommand):
    help = (
        "Load the demo's verifiers after load_demo: WiCE's GPT-4 and GPT-3.5 predictions as imported "
        "verifiers, and the two baselines run on every demo verification study. Safe to run again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--fixtures", type=Path, help="folder with studies.json (default: fixtures/)")

    def handle(self, *args: Any, **options: Any) -> None:
        for line in load_demo_verifiers(directory=options["fixtures"]):
            self.stdout.write(line)
