"""CLI face of a verifier run: runs in this process (no worker needed), with a progress bar."""

from __future__ import annotations

import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from annotation.errors import ServiceError
from annotation.management.base import study_by_slug
from metaeval.models import Verifier
from metaeval.verifiers.endpoints import EndpointUnavailable
from metaeval.verifiers.presets.pairwise import PAIRWISE_JUDGE
from metaeval.verifiers.runner.keys import target_for
from metaeval.verifiers.runner.orchestration import dry_run_prompt, run_to_completion
from metaeval.verifiers.runner.params import run_params
from metaeval.verifiers.services import start_run
from metaeval.verifiers.services.runs import interrupt_run


def verifier_by_name(study, name: str) -> Verifier:
    """The study's verifier by name (or id), or a clear error listing the names there are."""
    verifier = Verifier.objects.filter(study=study, name=name).first()
    if verifier is None and name.isdigit():
        verifier = Verifier.objects.filter(study=study, pk=int(name)).first()
    if verifier is None:
        known = (
            ", ".join(Verifier.objects.filter(study=study).order_by("name").values_list("name", flat=True))
            or "none yet"
        )
        raise CommandError(f"study {study.slug!r} has no verifier {name!r} (its verifiers: {known})")
    return verifier


class Command(BaseCommand):
    help = (
        "Run a verifier over a study's items here and now, with a progress bar; a rerun asks only for what "
        "has no answer yet for the same model, prompt and parameters."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("verifier", help="verifier name (or id)")
        parser.add_argument("--limit", type=int, help="only the first N items")
        parser.add_argument("--concurrency", type=int, help="requests in flight at once (default: the verifier's)")
        parser.add_argument("--dry-run", action="store_true", help="print the first item's prompt; send nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_by_slug(options["study"])
        verifier = verifier_by_name(study, options["verifier"])
        if options["dry_run"]:
            self._dry_run(verifier)
            return
        if options["verbosity"] < 2:
            logging.getLogger("httpx2").setLevel(logging.WARNING)  # one INFO line per request otherwise
        if verifier.kind == Verifier.Kind.LLM:
            try:
                target_for(run_params(verifier), verifier.api_key_encrypted)
            except EndpointUnavailable as exc:
                raise CommandError(str(exc)) from None
        try:
            run = start_run(
                verifier=verifier, limit=options["limit"], concurrency=options["concurrency"], enqueue=False
            )
        except ServiceError as exc:
            raise CommandError(str(exc)) from None
        bar = tqdm(
            total=run.total,
            initial=run.done,
            unit="claim",
            desc=verifier.name,
            disable=options["verbosity"] == 0,
            file=self.stderr._out,
        )
        try:
            run = run_to_completion(run, progress=bar.update)
        except KeyboardInterrupt:
            interrupt_run(run.pk, "interrupted from the keyboard (manage.py run_verifier)")
            raise CommandError(
                f"interrupted; run {run.pk} is stopped, and a rerun asks only for what is missing"
            ) from None
        finally:
            bar.close()
        summary = (
            f"run {run.pk} {run.status}: {run.done} of {run.total} items, {run.cached} from earlier runs, "
            f"{run.errors} errors, {run.unparseable} unparseable, {run.tokens_in:,} tokens in, "
            f"{run.tokens_out:,} out" + (f", about {run.estimated_cost} spent" if run.estimated_cost else "")
        )
        if run.status != run.Status.SUCCEEDED:
            raise CommandError(f"{summary}. {run.error_message}".strip())
        self.stdout.write(self.style.SUCCESS(summary))

    def _dry_run(self, verifier: Verifier) -> None:
        try:
            item, requests, key = dry_run_prompt(verifier)
        except (ServiceError, KeyError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if item is None:
            raise CommandError(f"study {verifier.study.slug!r} has no items")
        self.stdout.write(f"# {verifier.name} on item {item.external_id} (cache key {key[:16]}…); nothing is sent")
        if not requests:
            self.stdout.write(f"# a {verifier.get_kind_display().lower()} verifier sends no prompt")
        pairwise = verifier.preset == PAIRWISE_JUDGE.id  # both orders matter; passages look alike, one is enough
        for number, messages in enumerate(requests if pairwise else requests[:1], start=1):
            if len(requests) > 1:
                why = "one per order of the two lists" if pairwise else "one per evidence passage"
                self.stdout.write(f"## request {number} of {len(requests)} ({why})")
            for message in messages:
                self.stdout.write(f"--- {message['role']} ---")
                self.stdout.write(message["content"])
