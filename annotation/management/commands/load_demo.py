from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from annotation.studies.demo import DEMO_ANNOTATORS, DEMO_RESEARCHER, load_demo


class Command(BaseCommand):
    help = "Load the demo studies (real published data) and demo accounts; safe to run again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--fixtures", type=Path, help="folder with studies.json (default: fixtures/)")
        parser.add_argument("--reset-passwords", action="store_true", help="give the demo accounts new passwords")

    def handle(self, *args, **options) -> None:
        outcome = load_demo(directory=options["fixtures"], reset_passwords=options["reset_passwords"])
        for line in outcome.lines:
            self.stdout.write(line)
        if outcome.passwords:
            self.stdout.write(self.style.SUCCESS("\nDemo accounts (passwords are shown once and not stored):"))
            for username, password in outcome.passwords.items():
                role = "researcher" if username == DEMO_RESEARCHER else "annotator"
                self.stdout.write(f"  {username:<12} {password}   ({role})")
        else:
            names = ", ".join((DEMO_RESEARCHER, *DEMO_ANNOTATORS))
            self.stdout.write(
                f"\nDemo accounts ({names}) already exist; their passwords were printed when they were created.\n"
                "Forgot them? Run: make demo-passwords"
            )
