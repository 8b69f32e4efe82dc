"""One chunk of a run, a whole run, and a dry run: the runner's parts put together.

``run_chunk`` is what the background task does (one chunk per task, the
next one queued by the task), ``run_to_completion`` what ``manage.py
run_verifier`` does (all chunks in process), ``dry_run_prompt`` what
``run_verifier --dry-run`` shows. Baselines take the same path without any
network.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx2
from asgiref.sync import async_to_sync, sync_to_async

from annotation.errors import ServiceError
from annotation.lib.job_runs import current_worker
from annotation.models import Item

from ...models import Verifier, VerifierRun
from ..endpoints import EndpointUnavailable
from ..presets.base import Message
from .cache import split_cached
from .chunks import begin_chunk, count_cached, fail_run, finish_chunk, record_predictions
from .jobs import Job, build_job, safe_job
from .limits import MAX_CHUNK, Progress, ask_all, chunk_size
from .params import run_params
from .spec import item_input, spec_for

__all__ = ["ChunkResult", "dry_run_prompt", "run_chunk", "run_to_completion"]

logger = logging.getLogger(__name__)


@dataclass
class ChunkResult:
    """What one chunk did, and whether another chunk should follow."""

    ran: bool
    more: bool
    status: str
    items: int = 0
    cached: int = 0
    asked: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "ran": self.ran,
            "more": self.more,
            "status": self.status,
            "items": self.items,
            "cached": self.cached,
            "asked": self.asked,
        }


def run_chunk(
    run_id: int,
    generation: int,
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
    progress: Progress | None = None,
) -> ChunkResult:
    """Process the run's next chunk; a chunk task of an old generation, or of an ended run, does nothing."""
    run = begin_chunk(run_id, generation)
    if run is None:
        status = VerifierRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
        logger.info("verifier run %s: chunk task of generation %d skipped (run %s)", run_id, generation, status)
        return ChunkResult(ran=False, more=False, status=status)
    logger.info(
        "verifier run %s: chunk after item %d started (generation %d, %d of %d done)",
        run_id,
        run.cursor,
        generation,
        run.done,
        run.total,
    )
    # Which worker runs this chunk: when it is gone, any worker resumes the run (services.runs.recover_lost_runs).
    # It stays the run's worker after the chunk, until the next chunk's worker takes the run over: a
    # worker killed after this chunk but before the next one started (queuing it, say) leaves the
    # run held by a gone worker, resumed within seconds, not held by nobody until its heartbeat is stale.
    VerifierRun.objects.filter(pk=run_id, generation=generation).update(worker=current_worker())
    try:
        result = _run_chunk(run, generation, transport=transport, progress=progress)
    except Exception as exc:  # a bug or a lost database: end the run visibly instead of leaving it "running"
        logger.exception("verifier run %s: chunk failed", run_id)
        fail_run(run_id, f"the run stopped on an internal error: {type(exc).__name__}: {exc}")
        raise
    VerifierRun.objects.filter(pk=run_id, generation=generation).update(recoveries=0)  # this chunk got through
    logger.info(
        "verifier run %s: chunk finished: %d items, %d cached, %d asked; %s%s",
        run_id,
        result.items,
        result.cached,
        result.asked,
        result.status,
        ", more to do" if result.more else "",
    )
    return result


def _run_chunk(
    run: VerifierRun, generation: int, *, transport: httpx2.AsyncBaseTransport | None, progress: Progress | None
) -> ChunkResult:
    try:
        spec = spec_for(run)
    except (EndpointUnavailable, KeyError, ValueError) as exc:
        fail_run(run.pk, str(exc).strip("'\""))
        return ChunkResult(ran=True, more=False, status=VerifierRun.Status.FAILED)
    concurrency = run.effective_concurrency
    if spec.target is not None and spec.target.max_concurrency:  # the operator's cap on this endpoint
        concurrency = min(concurrency, spec.target.max_concurrency)
    size = chunk_size(concurrency) if spec.is_llm else MAX_CHUNK  # baselines: no network to pace
    rows = list(
        Item.objects.filter(study_id=run.verifier.study_id, pk__gt=run.cursor, pk__lte=run.upto_item)
        .order_by("pk")
        .values_list("pk", "payload")[:size]
    )
    if not rows:
        more, status = finish_chunk(run.pk, generation, run.cursor)
        return ChunkResult(ran=True, more=more, status=status)
    jobs: list[Job] = [safe_job(spec, item_id, payload) for item_id, payload in rows]
    broken = [job.outcome for job in jobs if spec.is_llm and job.outcome is not None]
    if broken:
        record_predictions(run.pk, generation, broken)
        jobs = [job for job in jobs if job.outcome is None]
        if progress is not None:
            progress(len(broken))
    to_do, n_cached = split_cached(run, jobs)
    last_item = rows[-1][0]
    count_cached(run, n_cached, last_item)
    if progress is not None and len(jobs) > len(to_do):
        progress(len(jobs) - len(to_do))
    if to_do:
        if spec.is_llm:
            sink = sync_to_async(lambda batch: record_predictions(run.pk, generation, batch), thread_sensitive=True)
            async_to_sync(ask_all)(
                to_do, spec, concurrency=concurrency, sink=sink, progress=progress, transport=transport
            )
        else:
            record_predictions(run.pk, generation, [job.outcome for job in to_do if job.outcome is not None])
            if progress is not None:
                progress(len(to_do))
    more, status = finish_chunk(run.pk, generation, last_item)
    return ChunkResult(
        ran=True,
        more=more,
        status=status,
        items=len(rows),
        cached=len(jobs) - len(to_do),
        asked=len(to_do) if spec.is_llm else 0,
    )


def run_to_completion(
    run: VerifierRun, *, transport: httpx2.AsyncBaseTransport | None = None, progress: Progress | None = None
) -> VerifierRun:
    """Every chunk of a run, here and now (the CLI's way; the worker does one chunk per task)."""
    while True:
        generation = VerifierRun.objects.filter(pk=run.pk).values_list("generation", flat=True).get()
        result = run_chunk(run.pk, generation, transport=transport, progress=progress)
        if not result.more:
            break
    run.refresh_from_db()
    return run


def dry_run_prompt(verifier: Verifier) -> tuple[Item | None, list[list[Message]], str]:
    """The first item, its rendered request(s) and cache key, without sending anything (no key needed)."""
    if not verifier.is_runnable:
        raise ServiceError(f"{verifier.name!r} holds imported predictions; it has no prompt")
    item = Item.objects.filter(study=verifier.study).order_by("pk").first()
    if item is None:
        return None, [], ""
    probe = VerifierRun(verifier=verifier, params=run_params(verifier))
    spec = spec_for(probe, need_key=False)
    job = build_job(spec, item.pk, item_input(item.payload, spec.systems))
    return item, job.requests, job.cache_key
