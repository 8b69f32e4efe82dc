"""``manage.py invite_researcher EMAIL``: the first researcher of a fresh install, without createsuperuser."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.researchers import ResearcherInviteError, invite_researcher


def _default_base_url() -> str | None:
    """Where the site answers: 127.0.0.1:8000 in debug, else the first trusted origin or allowed host."""
    if settings.DEBUG:
        return "http://127.0.0.1:8000"
    if settings.CSRF_TRUSTED_ORIGINS:
        return settings.CSRF_TRUSTED_ORIGINS[0]
    hosts = [host.lstrip(".") for host in settings.ALLOWED_HOSTS if host not in ("*", "")]
    return f"https://{hosts[0]}" if hosts else None


class Command(BaseCommand):
    help = (
        "Create (or reuse) the account of EMAIL, let it create studies, and print a one-time link "
        "to set its password (valid for PASSWORD_RESET_TIMEOUT, usable once)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")
        parser.add_argument(
            "--base-url",
            help="the site's address, e.g. https://claimlab.example.org "
            "(default: the first CSRF_TRUSTED_ORIGINS or ALLOWED_HOSTS entry; http://127.0.0.1:8000 in debug)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        base_url = (options["base_url"] or _default_base_url() or "").rstrip("/")
        if not base_url:
            raise CommandError("Give the site's address with --base-url (no ALLOWED_HOSTS to build it from).")
        try:
            invite = invite_researcher(email=options["email"])
        except ResearcherInviteError as exc:
            raise CommandError(f"No invite: {exc}.") from None
        hours = round(settings.PASSWORD_RESET_TIMEOUT / 3600)
        what = "Created" if invite.created else "Reused"
        self.stdout.write(f"{what} the account {invite.user.get_username()}; it may create studies.")
        self.stdout.write(f"Send this link to its owner: it sets the password, works once and for {hours} hours:")
        self.stdout.write(base_url + invite.path)
