from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.management.base import study_by_slug
from annotation.members.services import add_members


class Command(BaseCommand):
    help = "Add users to a study; missing users are created and their passwords printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("users", nargs="+", metavar="USER")
        parser.add_argument("--role", required=True, choices=["annotator", "researcher"])

    def handle(self, *args, **options) -> None:
        study = study_by_slug(options["study"])
        try:
            outcomes = add_members(study=study, usernames=options["users"], role=options["role"])
        except ServiceError as exc:
            raise CommandError(str(exc)) from None
        for outcome in outcomes:
            if outcome.reactivated:
                line = (
                    f"{outcome.username}: back in {study.slug} as {outcome.role} ({outcome.pseudonym}); was deactivated"
                )
            elif outcome.already_member:
                line = f"{outcome.username}: already in {study.slug} as {outcome.role} ({outcome.pseudonym}); unchanged"
            else:
                line = f"{outcome.username}: added as {outcome.role} ({outcome.pseudonym})"
            if outcome.password:
                line += f"; new account, password: {outcome.password}  (shown once; it is not stored)"
            self.stdout.write(line)
