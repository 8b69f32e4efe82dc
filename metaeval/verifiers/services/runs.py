"""Verifier runs: starting, stopping and resuming them.

A run is processed in chunks (docs/architecture.md, Mechanisms: Background work): each chunk task
takes the next items after the run's cursor, skips those that already have a
prediction for their cache key, asks for the rest, writes predictions as
they complete (``runner.chunks``), then moves the cursor and queues the next
chunk. A chunk records the worker running it; when that worker is gone (killed: its process
dead on this host, or its registry row silent elsewhere) any worker, within seconds, resumes
the run (``recover_lost_runs``, also for a stale heartbeat); resuming bumps the run's generation and queues the chunk after the cursor again, and the unique
(verifier, item, cache key) constraint makes a duplicate impossible even if
the "dead" worker was only slow.

Imports run one way: this module queues chunks through ``tasks``, the task
runs the ``runner``, and the runner writes through ``runner.chunks``, which
this module shares; nothing below imports these services back.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.lib.job_runs import lost_workers
from annotation.models import Item, WorkerHeartbeat
from config.request_id import enqueue

from ...models import ACTIVE_RUN_STATUSES, Verifier, VerifierRun
from ..endpoints import operator_limit
from ..runner.chunks import finish_run
from ..runner.params import run_params
from ..tasks import run_verifier_chunk

__all__ = [
    "interrupt_run",
    "recover_lost_runs",
    "resume_stale_runs",
    "stale_after",
    "start_run",
    "stop_run",
]

Status = VerifierRun.Status
logger = logging.getLogger(__name__)


def stale_after() -> timedelta:
    """How long a heartbeat may be silent before the run counts as orphaned (settings.VERIFIER_STALE_SECONDS)."""
    return timedelta(seconds=settings.VERIFIER_STALE_SECONDS)


def _is_stale(run: VerifierRun, threshold: timedelta, now=None) -> bool:
    now = now or timezone.now()
    last = run.heartbeat_at or run.created_at
    return last is not None and now - last >= threshold


def _enqueue(run: VerifierRun) -> None:
    """Queue the run's next chunk once the surrounding transaction has committed."""
    run_id, generation = run.pk, run.generation
    transaction.on_commit(lambda: enqueue(run_verifier_chunk, run_id, generation))


@transaction.atomic
def start_run(
    *,
    verifier: Verifier,
    limit: int | None = None,
    concurrency: int | None = None,
    created_by: User | None = None,
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
    if concurrency is not None and (
        isinstance(concurrency, bool)
        or not isinstance(concurrency, int)
        or not 1 <= concurrency <= operator_limit("concurrency")
    ):
        raise ServiceError(
            f"concurrency must be a whole number from 1 to {operator_limit('concurrency'):g}, got {concurrency!r}"
        )
    verifier = Verifier.objects.select_for_update().select_related("study").get(pk=verifier.pk)
    active = VerifierRun.objects.filter(verifier=verifier, status__in=ACTIVE_RUN_STATUSES).first()
    if active is not None:
        if not _is_stale(active, stale_after()):
            raise ServiceError(
                f"{verifier.name!r} already has a run in progress (run {active.pk}, {active.status}); "
                "stop it first or wait for it to finish"
            )
        if _resume(active, enqueue=enqueue):
            return active
    items = Item.objects.filter(study=verifier.study).order_by("pk").values_list("pk", flat=True)
    ids = list(items[:limit] if limit else items)
    if not ids:
        raise ServiceError(f"study {verifier.study.slug!r} has no items to verify; import some first")
    try:
        run = VerifierRun.objects.create(
            verifier=verifier,
            status=Status.QUEUED,
            total=len(ids),
            limit=limit,
            concurrency=concurrency,
            upto_item=ids[-1],
            params=run_params(verifier),
            created_by=created_by,
        )
    except IntegrityError:  # another request started a run between our check and our insert
        raise ServiceError(f"{verifier.name!r} already has a run in progress") from None
    if enqueue:
        _enqueue(run)
    logger.info(
        "verifier run %s of %r (study %s) %s: %d items",
        run.pk,
        verifier.name,
        verifier.study.slug,
        "queued" if enqueue else "started in process",
        run.total,
    )
    return run


@transaction.atomic
def stop_run(*, run: VerifierRun) -> VerifierRun:
    """Ask a run to stop: at once when no live worker holds it, else after the calls in flight."""
    run = VerifierRun.objects.select_for_update().get(pk=run.pk)
    if not run.is_active:
        raise ServiceError(f"run {run.pk} has already {run.status}; there is nothing to stop")
    if run.status == Status.QUEUED or _is_stale(run, stale_after()):
        finish_run(run, Status.STOPPED)
    elif run.status == Status.RUNNING:
        run.status = Status.STOPPING
        run.save(update_fields=["status"])
    logger.info("verifier run %s: stop asked, now %s", run.pk, run.status)
    return run


def _resume(run: VerifierRun, *, enqueue: bool = True) -> bool:
    """Hand an orphaned run to a new chain of chunk tasks (the old chain, if alive, stops at its next chunk).

    An orphan that was stopping is simply stopped; returns whether the run goes on.
    """
    if run.status == Status.STOPPING:
        finish_run(run, Status.STOPPED)
        return False
    run.generation += 1
    run.heartbeat_at = timezone.now()
    run.save(update_fields=["generation", "heartbeat_at"])
    if enqueue:
        _enqueue(run)
    logger.info(
        "verifier run %s: orphaned (stale heartbeat), resumed as generation %d after item %d (%d of %d done)",
        run.pk,
        run.generation,
        run.cursor,
        run.done,
        run.total,
    )
    return True


def resume_stale_runs(*, older_than: timedelta | None = None) -> list[VerifierRun]:
    """Resume every active run whose heartbeat is older than ``older_than`` (default: stale_after()),
    and every run whose worker is gone (what the workers themselves do: ``recover_lost_runs``)."""
    return recover_lost_runs(lost_workers(), older_than=older_than)


def _held_by_lost_workers(lost: set[str]) -> list[int]:
    """Active runs whose chunk's worker is gone: in ``lost``, or missing from the registry (read after the runs)."""
    held = list(
        VerifierRun.objects.filter(status__in=ACTIVE_RUN_STATUSES).exclude(worker="").values_list("pk", "worker")
    )
    if not held:
        return []
    registered = set(WorkerHeartbeat.objects.filter(pk__in={w for _, w in held}).values_list("pk", flat=True))
    return [pk for pk, worker in held if worker in lost or worker not in registered]


def recover_lost_runs(lost: set[str], *, older_than: timedelta | None = None) -> list[VerifierRun]:
    """Resume active runs whose chunk's worker is gone (``lost``, or no longer registered) or whose heartbeat
    is older than ``older_than``. A chunk resumed JOB_MAX_ATTEMPTS times after its worker died (a chunk
    that kills its worker, say) fails the run with the reason. Run by every worker at start and every
    few seconds while idle (annotation.lib.job_runs.recover_lost_work)."""
    threshold = stale_after() if older_than is None else older_than
    cutoff = timezone.now() - threshold
    stale = (
        VerifierRun.objects.filter(status__in=ACTIVE_RUN_STATUSES)
        .filter(Q(heartbeat_at__lte=cutoff) | Q(heartbeat_at__isnull=True, created_at__lte=cutoff))
        .values_list("pk", flat=True)
    )
    orphaned = set(_held_by_lost_workers(lost))
    resumed = []
    for run_id in sorted(set(stale) | orphaned):
        with transaction.atomic():
            run = VerifierRun.objects.select_for_update().get(pk=run_id)
            worker_gone = bool(run.worker) and (
                run.worker in lost or not WorkerHeartbeat.objects.filter(pk=run.worker).exists()
            )
            if not run.is_active or not (worker_gone or _is_stale(run, threshold)):
                continue
            if run.recoveries >= settings.JOB_MAX_ATTEMPTS and run.status != Status.STOPPING:
                run.error_message = (
                    f"the worker running this run stopped {run.recoveries} time(s) on the same chunk "
                    f"(after item {run.cursor}); the predictions made so far are kept. Start the run again"
                )
                finish_run(run, Status.FAILED)
                logger.warning("verifier run %s failed: %s", run.pk, run.error_message)
                continue
            run.worker = ""
            run.recoveries += 1
            run.save(update_fields=["worker", "recoveries"])
            if _resume(run):
                resumed.append(run)
    return resumed


def interrupt_run(run_id: int, message: str) -> None:
    """End a run whose in-process runner was interrupted (Ctrl-C on run_verifier): stopped, with why."""
    with transaction.atomic():
        run = VerifierRun.objects.select_for_update().select_related("verifier").get(pk=run_id)
        if run.is_active:
            logger.warning("verifier run %s interrupted: %s", run_id, message)
            run.error_message = message
            finish_run(run, Status.STOPPED)
