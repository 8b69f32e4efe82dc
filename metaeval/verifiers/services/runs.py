"""Verifier runs: starting, stopping and resuming them, and every write a running chunk makes.

A run is processed in chunks (DESIGN §5, Background work): each chunk task
takes the next items after the run's cursor, skips those that already have a
prediction for their cache key, asks for the rest, writes predictions as
they complete (each batch together with the run's counters and heartbeat, in
one transaction), then moves the cursor and queues the next chunk. A worker
killed mid-chunk leaves a stale heartbeat; resuming bumps the run's
generation and queues the chunk after the cursor again, and the unique
(verifier, item, cache key) constraint makes a duplicate impossible even if
the "dead" worker was only slow.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import Annotation, Item
from annotation.services.errors import ServiceError

from ...models import ACTIVE_RUN_STATUSES, Prediction, Verifier, VerifierRun
from ..presets.baselines import majority_label

__all__ = [
    "Outcome",
    "begin_chunk",
    "count_cached",
    "fail_run",
    "interrupt_run",
    "finish_chunk",
    "record_predictions",
    "resume_stale_runs",
    "run_params",
    "stale_after",
    "start_run",
    "stop_run",
]

DEFAULT_STALE_SECONDS = 120.0
Status = VerifierRun.Status


def stale_after() -> timedelta:
    """How long a heartbeat may be silent before the run counts as orphaned (CLAIMLAB_VERIFIER_STALE_SECONDS)."""
    try:
        seconds = float(os.environ.get("CLAIMLAB_VERIFIER_STALE_SECONDS", DEFAULT_STALE_SECONDS))
    except ValueError:
        seconds = DEFAULT_STALE_SECONDS
    return timedelta(seconds=max(seconds, 0.0))


def _is_stale(run: VerifierRun, threshold: timedelta, now=None) -> bool:
    now = now or timezone.now()
    last = run.heartbeat_at or run.created_at
    return last is not None and now - last >= threshold


def _enqueue(run: VerifierRun) -> None:
    """Queue the run's next chunk once the surrounding transaction has committed."""
    from ..tasks import run_verifier_chunk

    run_id, generation = run.pk, run.generation
    transaction.on_commit(lambda: run_verifier_chunk.enqueue(run_id, generation))


def run_params(verifier: Verifier) -> dict[str, Any]:
    """The configuration a run works with, fixed at its start (a later edit does not change a running run)."""
    params: dict[str, Any] = {
        "kind": verifier.kind, "preset": verifier.preset, "model": verifier.model, "base_url": verifier.base_url,
        "api_key_env": verifier.api_key_env, "temperature": verifier.temperature, "max_tokens": verifier.max_tokens,
        "timeout": verifier.timeout, "retries": verifier.retries, "template": verifier.template,
        "system_prompt": verifier.system_prompt, "custom_labels": list(verifier.custom_labels),
        "label_map": dict(verifier.label_map), "options": dict(verifier.options),
    }
    if verifier.kind == Verifier.Kind.BASELINE_MAJORITY:
        params.update(_majority(verifier))
    return params


def _majority(verifier: Verifier) -> dict[str, Any]:
    """The study's most frequent human label, or gold label when nobody has labelled anything.

    The same labels the report compares verifiers with: answers on gold
    (quality-control) items and skipped assignments are left out.
    """
    study = verifier.study
    labels = list(
        Annotation.objects.filter(assignment__study=study, assignment__item__gold_label="")
        .exclude(assignment__status="skipped").values_list("label", flat=True)
    )
    source = "human labels"
    if not labels:
        labels = list(Item.objects.filter(study=study).exclude(gold_label="").values_list("gold_label", flat=True))
        source = "gold labels"
    found = majority_label(labels, study.labels)
    if found is None:
        raise ServiceError("the majority baseline needs labels: the study has no human labels and no gold labels yet")
    label, count, total = found
    return {"majority_label": label, "majority_count": count, "majority_total": total, "majority_source": source}


@transaction.atomic
def start_run(
    *,
    verifier: Verifier,
    limit: int | None = None,
    concurrency: int | None = None,
    created_by: AbstractBaseUser | None = None,
    enqueue: bool = True,
) -> VerifierRun:
    """A new run of the verifier over the study's items (the first `limit`), queued for the worker.

    An orphaned run of the same verifier (stale heartbeat: its worker died)
    is resumed and returned instead; a live one is an error. ``enqueue=False``
    leaves the chunks to the caller (the CLI runs them in-process).
    """
    if not verifier.is_runnable:
        raise ServiceError(f"{verifier.name!r} holds imported predictions; there is nothing to run")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ServiceError(f"limit must be a whole number of items, at least 1, got {limit!r}")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or not 1 <= concurrency <= 512):
        raise ServiceError(f"concurrency must be a whole number from 1 to 512, got {concurrency!r}")
    verifier = Verifier.objects.select_for_update().select_related("study").get(pk=verifier.pk)
    active = VerifierRun.objects.filter(verifier=verifier, status__in=ACTIVE_RUN_STATUSES).first()
    if active is not None:
        if not _is_stale(active, stale_after()):
            raise ServiceError(f"{verifier.name!r} already has a run in progress (run {active.pk}, {active.status}); "
                               "stop it first or wait for it to finish")
        if _resume(active, enqueue=enqueue):
            return active
    items = Item.objects.filter(study=verifier.study).order_by("pk").values_list("pk", flat=True)
    ids = list(items[:limit] if limit else items)
    if not ids:
        raise ServiceError(f"study {verifier.study.slug!r} has no items to verify; import some first")
    try:
        run = VerifierRun.objects.create(
            verifier=verifier, status=Status.QUEUED, total=len(ids), limit=limit, concurrency=concurrency,
            upto_item=ids[-1], params=run_params(verifier), created_by=created_by,
        )
    except IntegrityError:  # another request started a run between our check and our insert
        raise ServiceError(f"{verifier.name!r} already has a run in progress") from None
    if enqueue:
        _enqueue(run)
    return run


@transaction.atomic
def stop_run(*, run: VerifierRun) -> VerifierRun:
    """Ask a run to stop: at once when no live worker holds it, else after the calls in flight."""
    run = VerifierRun.objects.select_for_update().get(pk=run.pk)
    if not run.is_active:
        raise ServiceError(f"run {run.pk} has already {run.status}; there is nothing to stop")
    if run.status == Status.QUEUED or _is_stale(run, stale_after()):
        _finish(run, Status.STOPPED)
    elif run.status == Status.RUNNING:
        run.status = Status.STOPPING
        run.save(update_fields=["status"])
    return run


def _resume(run: VerifierRun, *, enqueue: bool = True) -> bool:
    """Hand an orphaned run to a new chain of chunk tasks (the old chain, if alive, stops at its next chunk).

    An orphan that was stopping is simply stopped; returns whether the run goes on.
    """
    if run.status == Status.STOPPING:
        _finish(run, Status.STOPPED)
        return False
    run.generation += 1
    run.heartbeat_at = timezone.now()
    run.save(update_fields=["generation", "heartbeat_at"])
    if enqueue:
        _enqueue(run)
    return True


def resume_stale_runs(*, older_than: timedelta | None = None) -> list[VerifierRun]:
    """Resume every active run whose heartbeat is older than ``older_than`` (default: stale_after())."""
    threshold = stale_after() if older_than is None else older_than
    cutoff = timezone.now() - threshold
    candidates = VerifierRun.objects.filter(status__in=ACTIVE_RUN_STATUSES).filter(
        Q(heartbeat_at__lte=cutoff) | Q(heartbeat_at__isnull=True, created_at__lte=cutoff)
    ).values_list("pk", flat=True)
    resumed = []
    for run_id in list(candidates):
        with transaction.atomic():
            run = VerifierRun.objects.select_for_update().get(pk=run_id)
            if run.is_active and _is_stale(run, threshold) and _resume(run):
                resumed.append(run)
    return resumed


# --- writes made by the runner ------------------------------------------------------------------


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


def begin_chunk(run_id: int, generation: int) -> VerifierRun | None:
    """The run, marked running with a fresh heartbeat, if this chunk task should work on it; else None."""
    with transaction.atomic():
        run = VerifierRun.objects.select_for_update().select_related("verifier__study").filter(pk=run_id).first()
        if run is None or run.generation != generation or not run.is_active:
            return None
        if run.status == Status.STOPPING:
            _finish(run, Status.STOPPED)
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
        _recount(locked)
        locked.save(update_fields=["cached", "counted_cursor", "done", "errors", "unparseable", "tokens_in",
                                   "tokens_out", "estimated_cost", "heartbeat_at"])


PREDICTION_FIELDS = ("label", "raw_label", "score", "rationale", "raw_output", "parse_status", "latency_ms",
                     "tokens_in", "tokens_out", "error")


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
            _recount(run)
            run.save(update_fields=["done", "errors", "unparseable", "tokens_in", "tokens_out", "estimated_cost",
                                    "heartbeat_at"])
        return run.status == Status.RUNNING and run.generation == generation


def _store(run: VerifierRun, outcomes: Sequence[Outcome]) -> None:
    verifier_id = run.verifier_id
    keys = {(outcome.item_id, outcome.cache_key) for outcome in outcomes}
    failed = {
        (item_id, key): pk
        for pk, item_id, key in Prediction.objects.filter(
            verifier_id=verifier_id, item_id__in={item for item, _ in keys}, cache_key__in={key for _, key in keys}
        ).exclude(error="").values_list("pk", "item_id", "cache_key")
    }
    now = timezone.now()
    new = []
    for outcome in outcomes:
        values = {field: getattr(outcome, field) for field in PREDICTION_FIELDS}
        values["rationale"] = values["rationale"] or ""
        existing = failed.get((outcome.item_id, outcome.cache_key))
        if existing is not None:
            Prediction.objects.filter(pk=existing).update(run=run, updated_at=now, **values)
        else:
            new.append(Prediction(verifier_id=verifier_id, run=run, item_id=outcome.item_id,
                                  cache_key=outcome.cache_key, **values))
    Prediction.objects.bulk_create(new, ignore_conflicts=True, batch_size=500)


def _recount(run: VerifierRun) -> None:
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
            _finish(run, Status.STOPPED)
            return False, run.status
        run.cursor = max(run.cursor, last_item)
        _recount(run)
        more = Item.objects.filter(study_id=run.verifier.study_id, pk__gt=run.cursor, pk__lte=run.upto_item).exists()
        if not more:
            _finish(run, Status.SUCCEEDED)
        else:
            run.save(update_fields=["cursor", "done", "errors", "unparseable", "tokens_in", "tokens_out",
                                    "estimated_cost", "heartbeat_at"])
        return more, run.status


def interrupt_run(run_id: int, message: str) -> None:
    """End a run whose in-process runner was interrupted (Ctrl-C on run_verifier): stopped, with why."""
    with transaction.atomic():
        run = VerifierRun.objects.select_for_update().select_related("verifier").get(pk=run_id)
        if run.is_active:
            run.error_message = message
            _finish(run, Status.STOPPED)


def fail_run(run_id: int, message: str) -> None:
    """End a run that cannot go on (no API key, a bug), with the reason for the researcher."""
    with transaction.atomic():
        run = VerifierRun.objects.select_for_update().select_related("verifier").get(pk=run_id)
        if not run.is_active:
            return
        run.error_message = message[:5000]
        _finish(run, Status.FAILED)


def _finish(run: VerifierRun, status: str) -> None:
    run.status = status
    run.finished_at = timezone.now()
    _recount(run)
    run.save()
