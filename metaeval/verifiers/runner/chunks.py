"""Every write a running chunk makes: its start, its predictions, its counters and heartbeat, its end.

A run is processed in chunks (docs/architecture.md, Mechanisms: Background work): each chunk
takes the next items after the run's cursor, writes predictions as they
complete (each batch together with the run's counters and heartbeat, in one
transaction), then moves the cursor. A worker killed mid-chunk leaves a
stale heartbeat; the run services resume such a run under a new generation,
and every write here checks the generation, so a chunk of an old chain of
tasks stops at its next write. Both the runner and the run services import
this module; it imports neither.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import Item

from ...models import Prediction, Verifier, VerifierRun
from ..prediction_version import predictions_written

__all__ = [
    "Outcome",
    "begin_chunk",
    "count_cached",
    "estimate_cost",
    "fail_run",
    "finish_chunk",
    "finish_run",
    "record_predictions",
    "recount",
]

Status = VerifierRun.Status
logger = logging.getLogger(__name__)


@dataclass
class Outcome:
    """One item's result, ready to store as a Prediction."""

    item_id: int
    cache_key: str
    label: str | None = None
    raw_label: str = ""
    score: float | None = None
    rationale: str = ""
    raw_output: str = ""
    parse_status: str = ""
    latency_ms: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    error: str = ""
    order_labels: list[str | None] = field(default_factory=list)


def begin_chunk(run_id: int, generation: int) -> VerifierRun | None:
    """The run, marked running with a fresh heartbeat, if this chunk task should work on it; else None."""
    with transaction.atomic():
        run = VerifierRun.objects.select_for_update().select_related("verifier__study").filter(pk=run_id).first()
        if run is None or run.generation != generation or not run.is_active:
            return None
        if run.status == Status.STOPPING:
            finish_run(run, Status.STOPPED)
            return None
        now = timezone.now()
        run.status = Status.RUNNING
        run.started_at = run.started_at or now
        run.heartbeat_at = now
        run.save(update_fields=["status", "started_at", "heartbeat_at"])
        return run


def count_cached(run: VerifierRun, n_cached: int, upto: int) -> None:
    """Count items answered before this run, once: a redone chunk does not count them again."""
    with transaction.atomic():
        locked = VerifierRun.objects.select_for_update().get(pk=run.pk)
        if upto <= locked.counted_cursor:
            return
        locked.cached += n_cached
        locked.counted_cursor = upto
        recount(locked)
        locked.save(
            update_fields=[
                "cached",
                "counted_cursor",
                "done",
                "errors",
                "unparseable",
                "tokens_in",
                "tokens_out",
                "estimated_cost",
                "heartbeat_at",
            ]
        )


STORED_FIELDS = (
    "label",
    "raw_label",
    "score",
    "rationale",
    "raw_output",
    "parse_status",
    "latency_ms",
    "tokens_in",
    "tokens_out",
    "error",
    "order_labels",
)


RECOUNT_SECONDS = 1.0


def record_predictions(run_id: int, generation: int, outcomes: Sequence[Outcome]) -> bool:
    """Store finished predictions with the run's heartbeat; True while the chunk should go on.

    A new answer never replaces a stored answer for the same cache key (the
    unique constraint ignores it); it only replaces a stored *error*, so a
    rerun retries failed calls. The counters are recounted from the stored
    predictions at most once a second (and always at the end of a chunk):
    progress stays live without a count per batch. Returns False once the
    run is stopping, has ended, or belongs to a newer chain of chunk tasks.
    """
    with transaction.atomic():
        run = VerifierRun.objects.select_for_update().select_related("verifier").get(pk=run_id)
        if outcomes:
            _store(run, outcomes)
        now = timezone.now()
        if run.heartbeat_at is None or (now - run.heartbeat_at).total_seconds() >= RECOUNT_SECONDS:
            recount(run)
            run.save(
                update_fields=[
                    "done",
                    "errors",
                    "unparseable",
                    "tokens_in",
                    "tokens_out",
                    "estimated_cost",
                    "heartbeat_at",
                ]
            )
        return run.status == Status.RUNNING and run.generation == generation


def _store(run: VerifierRun, outcomes: Sequence[Outcome]) -> None:
    verifier_id = run.verifier_id
    keys = {(outcome.item_id, outcome.cache_key) for outcome in outcomes}
    failed = {
        (item_id, key): pk
        for pk, item_id, key in Prediction.objects.filter(
            verifier_id=verifier_id, item_id__in={item for item, _ in keys}, cache_key__in={key for _, key in keys}
        )
        .exclude(error="")
        .values_list("pk", "item_id", "cache_key")
    }
    now = timezone.now()
    new = []
    for outcome in outcomes:
        values = {name: getattr(outcome, name) for name in STORED_FIELDS}
        values["rationale"] = values["rationale"] or ""
        existing = failed.get((outcome.item_id, outcome.cache_key))
        if existing is not None:
            Prediction.objects.filter(pk=existing).update(run=run, updated_at=now, **values)
        else:
            new.append(
                Prediction(
                    verifier_id=verifier_id, run=run, item_id=outcome.item_id, cache_key=outcome.cache_key, **values
                )
            )
    Prediction.objects.bulk_create(new, ignore_conflicts=True, batch_size=500)
    predictions_written([verifier_id])


def recount(run: VerifierRun) -> None:
    """The run's counters from its stored predictions (never drifting increments), plus cost and heartbeat."""
    totals = Prediction.objects.filter(run=run).aggregate(
        items=Count("item_id", distinct=True),
        errors=Count("pk", filter=~Q(error="")),
        unparseable=Count("pk", filter=Q(error="", parse_status=Prediction.ParseStatus.UNPARSEABLE)),
        tokens_in=Coalesce(Sum("tokens_in"), 0),
        tokens_out=Coalesce(Sum("tokens_out"), 0),
    )
    run.done = min(totals["items"] + run.cached, run.total)
    run.errors, run.unparseable = totals["errors"], totals["unparseable"]
    run.tokens_in, run.tokens_out = totals["tokens_in"], totals["tokens_out"]
    run.estimated_cost = estimate_cost(run.verifier, run.tokens_in, run.tokens_out)
    run.heartbeat_at = timezone.now()


def estimate_cost(verifier: Verifier, tokens_in: int, tokens_out: int) -> Decimal | None:
    """Tokens times the verifier's prices per 1,000; None when it has no prices."""
    if verifier.price_input_per_1k is None and verifier.price_output_per_1k is None:
        return None
    cost = Decimal(tokens_in) * (verifier.price_input_per_1k or 0) / 1000
    cost += Decimal(tokens_out) * (verifier.price_output_per_1k or 0) / 1000
    return cost.quantize(Decimal("0.000001"))


def finish_chunk(run_id: int, generation: int, last_item: int) -> tuple[bool, str]:
    """Move the cursor past a finished chunk; (more chunks to do?, run status)."""
    with transaction.atomic():
        run = VerifierRun.objects.select_for_update().select_related("verifier").get(pk=run_id)
        if run.generation != generation or not run.is_active:
            return False, run.status
        if run.status == Status.STOPPING:
            finish_run(run, Status.STOPPED)
            return False, run.status
        run.cursor = max(run.cursor, last_item)
        recount(run)
        more = Item.objects.filter(study_id=run.verifier.study_id, pk__gt=run.cursor, pk__lte=run.upto_item).exists()
        if not more:
            finish_run(run, Status.SUCCEEDED)
        else:
            run.save(
                update_fields=[
                    "cursor",
                    "done",
                    "errors",
                    "unparseable",
                    "tokens_in",
                    "tokens_out",
                    "estimated_cost",
                    "heartbeat_at",
                ]
            )
        return more, run.status


def fail_run(run_id: int, message: str) -> None:
    """End a run that cannot go on (no API key, a bug), with the reason for the researcher."""
    with transaction.atomic():
        run = VerifierRun.objects.select_for_update().select_related("verifier").get(pk=run_id)
        if not run.is_active:
            return
        logger.warning("verifier run %s failed: %s", run_id, message)
        run.error_message = message[:5000]
        finish_run(run, Status.FAILED)


def finish_run(run: VerifierRun, status: str) -> None:
    """End a run (locked by the caller) with its final status and counters."""
    run.status = status
    run.finished_at = timezone.now()
    recount(run)
    run.save()
    logger.info(
        "verifier run %s %s: %d of %d items done (%d from earlier runs), %d errors, %d unparseable, "
        "%d tokens in, %d out",
        run.pk,
        status,
        run.done,
        run.total,
        run.cached,
        run.errors,
        run.unparseable,
        run.tokens_in,
        run.tokens_out,
    )
