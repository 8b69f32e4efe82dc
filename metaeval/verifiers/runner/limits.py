"""How much a chunk asks at once: chunk size, requests in flight, clients, and how often it writes and beats.

At most the verifier's concurrency of requests is in flight (an
``asyncio.Semaphore``), and with Redis configured every request also holds
one of its endpoint's slots shared by all workers (``limiter.py``); retries and timeouts are the client's own
(``client.make_client``). Finished outcomes go to a sink every
``FLUSH_SECONDS``, and a chunk whose calls all hang still reaches the sink
(heartbeat, stop check) every ``HEARTBEAT_SECONDS``; when the sink says
stop, the calls still waiting are cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Sequence

import httpx2
import openai
from django.conf import settings

from ..limiter import SharedSlots, shared_slots_for
from ..presets.base import Message
from .chunks import Outcome
from .client import Answer, complete, make_client
from .jobs import Job
from .outcomes import claim_outcome, pairwise_outcome, passages_outcome
from .spec import RunSpec

__all__ = ["MAX_CHUNK", "Progress", "ask_all", "chunk_size", "predict"]

CHUNK_WAVES = 16  # a chunk holds this many rounds of the concurrency
MAX_CHUNK = 2000
FLUSH_SECONDS = 0.25  # finished predictions wait at most this long before they are written
HEARTBEAT_SECONDS = 5.0  # a chunk whose calls all hang still beats (and checks for a stop) this often
CONNECTIONS_PER_CLIENT = 16

Progress = Callable[[int], None]


def chunk_size(concurrency: int) -> int:
    """Items per chunk: a few rounds of the concurrency (settings.VERIFIER_CHUNK_SIZE overrides)."""
    if settings.VERIFIER_CHUNK_SIZE:
        return int(settings.VERIFIER_CHUNK_SIZE)
    return max(16, min(MAX_CHUNK, concurrency * CHUNK_WAVES))


async def predict(
    client: openai.AsyncOpenAI,
    semaphore: asyncio.Semaphore,
    spec: RunSpec,
    job: Job,
    shared: SharedSlots | None = None,
) -> Outcome:
    """The job's outcome, each of its requests taking a place under the semaphore (and a shared slot)."""
    started = time.perf_counter()

    async def ask(messages: list[Message]) -> Answer:
        async with semaphore:
            if shared is None:
                return await complete(client, spec, messages)
            async with shared.slot():
                return await complete(client, spec, messages)

    assert spec.preset is not None
    if spec.preset.pairwise:
        answers = list(await asyncio.gather(*(ask(messages) for messages in job.requests)))
        return pairwise_outcome(spec, job, answers, int((time.perf_counter() - started) * 1000))
    if spec.preset.evidence_level:
        answers = list(await asyncio.gather(*(ask(messages) for messages in job.requests)))
        return passages_outcome(spec, job, answers, int((time.perf_counter() - started) * 1000))
    answer = await ask(job.requests[0])
    return claim_outcome(spec, job, answer, int((time.perf_counter() - started) * 1000))


async def ask_all(
    jobs: Sequence[Job],
    spec: RunSpec,
    *,
    concurrency: int,
    sink: Callable[[list[Outcome]], Awaitable[bool]],
    progress: Progress | None,
    transport: httpx2.AsyncBaseTransport | None,
) -> None:
    """Answer the jobs with at most ``concurrency`` requests in flight, handing finished ones to ``sink`` often.

    ``sink`` stores a batch and says whether to go on; when it says stop
    (a researcher stopped the run), the calls still waiting are cancelled.
    """
    loop = asyncio.get_running_loop()
    semaphore = asyncio.Semaphore(concurrency)
    pending: list[Outcome] = []
    state = {"go_on": True, "touched": loop.time()}
    finished = asyncio.Event()

    async def flush() -> None:
        batch = pending[:]
        pending.clear()
        state["go_on"] = await sink(batch) and state["go_on"]
        state["touched"] = loop.time()
        if progress is not None and batch:
            progress(len(batch))

    # Several clients with small connection pools rather than one with a big pool: httpcore scans its whole
    # pool on every request, and with 64 connections that scan was a fifth of the runner's CPU (profiled).
    async with contextlib.AsyncExitStack() as stack:
        shared = shared_slots_for(
            spec.params.get("endpoint") or "", spec.target.max_concurrency if spec.target else None
        )
        if shared is not None:
            await stack.enter_async_context(shared)
        clients = [
            await stack.enter_async_context(make_client(spec, transport))
            for _ in range(max(1, math.ceil(concurrency / CONNECTIONS_PER_CLIENT)))
        ]

        async def one(index: int, job: Job) -> None:
            pending.append(await predict(clients[index % len(clients)], semaphore, spec, job, shared))

        tasks = [asyncio.ensure_future(one(index, job)) for index, job in enumerate(jobs)]

        async def ticker() -> None:
            while not finished.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(finished.wait(), FLUSH_SECONDS)
                if pending or loop.time() - state["touched"] >= HEARTBEAT_SECONDS:
                    await flush()
                if not state["go_on"]:
                    for task in tasks:
                        task.cancel()

        tick = asyncio.ensure_future(ticker())
        results = await asyncio.gather(*tasks, return_exceptions=True)
        finished.set()
        await tick
        await flush()
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
            raise result
