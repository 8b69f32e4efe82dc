"""Running a verifier over a study's items: one chunk at a time, many requests in flight.

Per chunk (DESIGN §5): take the next items after the run's cursor, compute
each item's cache key (a hash of model, rendered messages, temperature,
max_tokens, preset and parser), skip the items that already have an answer
for that key, and send the rest to the endpoint with ``AsyncOpenAI`` under
an ``asyncio.Semaphore`` (the verifier's concurrency), using the client's own
retries and timeouts. Every call ends as a prediction: an answer with its
parse status, or the error that stopped it (timeout, 429 after retries, 5xx,
a malformed response); no call failure stops the run. Finished predictions
are written in small batches while the others are still in flight, each
batch with the run's counters and heartbeat, so a killed worker loses at
most the calls it had in flight, and the resumed run asks only for those.

The same ``run_chunk`` serves the background task (one chunk per task, the
next one queued at the end) and ``manage.py run_verifier`` (all chunks in
process). Baselines take the same path without any network.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from asgiref.sync import async_to_sync, sync_to_async
from openai.types.chat import ChatCompletion

from annotation.models import Item
from annotation.services.errors import ServiceError

from ...models import Prediction, Verifier, VerifierRun
from ..services.runs import (
    Outcome,
    begin_chunk,
    count_cached,
    fail_run,
    finish_chunk,
    record_predictions,
    run_params,
)
from ..presets.base import Message, Preset
from ..presets.baselines import DEFAULT_THRESHOLD, overlap_score
from .spec import ItemInput, LabelMapper, cache_key, item_input, key_variable_problem, preset_for, render_item

__all__ = [
    "ChunkResult",
    "MissingApiKey",
    "RunSpec",
    "api_key_for",
    "chunk_size",
    "dry_run_prompt",
    "run_chunk",
    "run_to_completion",
    "spec_for",
]

CHUNK_WAVES = 16  # a chunk holds this many rounds of the concurrency
MAX_CHUNK = 2000
FLUSH_SECONDS = 0.25  # finished predictions wait at most this long before they are written
HEARTBEAT_SECONDS = 5.0  # a chunk whose calls all hang still beats (and checks for a stop) this often
MAX_ERROR_CHARS = 1000
UNUSED_KEY = "unused"
CONNECTIONS_PER_CLIENT = 16

Progress = Callable[[int], None]


class MissingApiKey(Exception):
    """The verifier names an environment variable that is not set where the run happens."""


def api_key_for(env_name: str) -> str:
    """The API key from the named environment variable; "unused" when no variable is named (local endpoints)."""
    if not env_name:
        return UNUSED_KEY
    problem = key_variable_problem(env_name)
    if problem:  # checked when the verifier was saved; checked again here, where the secret is read
        raise MissingApiKey(f"the API-key variable {env_name!r} {problem}")
    value = os.environ.get(env_name, "").strip()
    if not value:
        raise MissingApiKey(
            f"the environment variable {env_name} is not set where the run happens, so there is no API key; "
            f"set {env_name} for the worker (or for manage.py run_verifier), or clear the verifier's API-key "
            "variable if the endpoint needs no key"
        )
    return value


def chunk_size(concurrency: int) -> int:
    """Items per chunk: a few rounds of the concurrency (CLAIMLAB_VERIFIER_CHUNK_SIZE overrides)."""
    configured = os.environ.get("CLAIMLAB_VERIFIER_CHUNK_SIZE", "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(16, min(MAX_CHUNK, concurrency * CHUNK_WAVES))


@dataclass(frozen=True)
class RunSpec:
    """Everything a chunk needs to know about its run's verifier, read once per chunk."""

    kind: str
    params: dict[str, Any]
    mapper: LabelMapper
    preset: Preset | None = None
    api_key: str = UNUSED_KEY
    count_irrelevant: bool = False
    parser_key: dict[str, Any] = field(default_factory=dict)

    @property
    def is_llm(self) -> bool:
        return self.kind == Verifier.Kind.LLM


def spec_for(run: VerifierRun, *, need_key: bool = True) -> RunSpec:
    """The run's configuration (fixed at its start) as a RunSpec; MissingApiKey when the key is not set."""
    study = run.verifier.study
    params = run.params or {}
    kind = params.get("kind", run.verifier.kind)
    mapper = LabelMapper(study.labels, study.label_aliases, params.get("label_map") or {})
    if kind != Verifier.Kind.LLM:
        return RunSpec(kind=kind, params=params, mapper=mapper)
    preset = preset_for(params["preset"], template=params.get("template", ""), labels=params.get("custom_labels", []),
                        system=params.get("system_prompt", ""))
    parser_key = {
        "labels": list(preset.prediction_labels), "label_map": params.get("label_map") or {},
        "study_labels": list(study.labels), "aliases": study.label_aliases,
    }
    if preset.evidence_level:
        parser_key["count_irrelevant"] = study.irrelevant_in_credibility
    return RunSpec(kind=kind, params=params, mapper=mapper, preset=preset,
                   api_key=api_key_for(params.get("api_key_env", "")) if need_key else UNUSED_KEY,
                   count_irrelevant=study.irrelevant_in_credibility, parser_key=parser_key)


@dataclass
class Job:
    """One item to answer: its requests (one, or one per passage) and its cache key."""

    item_id: int
    cache_key: str
    requests: list[list[Message]] = field(default_factory=list)
    outcome: Outcome | None = None  # baselines: computed without any call


def _job(spec: RunSpec, item_id: int, data: ItemInput) -> Job:
    params = spec.params
    if spec.kind == Verifier.Kind.BASELINE_MAJORITY:
        label = params["majority_label"]
        key = cache_key({"kind": spec.kind, "label": label})
        rationale = (f"always the most frequent of the study's {params.get('majority_source', 'labels')}: {label} "
                     f"({params.get('majority_count')} of {params.get('majority_total')})")
        return Job(item_id, key, outcome=Outcome(item_id, key, label=label, raw_label=label, rationale=rationale,
                                                 parse_status="ok", latency_ms=0))
    if spec.kind == Verifier.Kind.BASELINE_OVERLAP:
        options = params.get("options") or {}
        threshold = float(options.get("threshold", DEFAULT_THRESHOLD))
        positive, negative = options["positive_label"], options["negative_label"]
        texts = [str(passage.get("text") or "") for passage in data.evidence]
        key = cache_key({"kind": spec.kind, "threshold": threshold, "positive": positive, "negative": negative,
                         "claim": data.claim, "evidence": texts})
        score = overlap_score(data.claim, texts)
        label = positive if score > threshold else negative
        rationale = (f"{score:.0%} of the claim's content words occur in its evidence "
                     f"({'above' if score > threshold else 'not above'} the threshold of {threshold:.0%})")
        return Job(item_id, key, outcome=Outcome(item_id, key, label=label, raw_label=label, score=score,
                                                 rationale=rationale, parse_status="ok", latency_ms=0))
    if spec.preset is None:
        raise ValueError(f"a {spec.kind} verifier has nothing to run")
    requests = render_item(spec.preset, data)
    key = cache_key({"model": params["model"], "messages": requests, "temperature": params["temperature"],
                     "max_tokens": params["max_tokens"], "preset": spec.preset.id, "parser": spec.parser_key})
    return Job(item_id, key, requests=requests)


def _safe_job(spec: RunSpec, item_id: int, payload: dict[str, Any]) -> Job:
    """The item's job; a prompt that cannot be rendered for this item becomes an error on its prediction."""
    try:
        return _job(spec, item_id, item_input(payload))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        key = cache_key({"render_error": f"{type(exc).__name__}: {exc}", "item": item_id, "params": spec.params})
        return Job(item_id, key, outcome=Outcome(item_id, key, error=_short(f"could not build the prompt: {exc}")))


# --- calling the endpoint -----------------------------------------------------------------------


@dataclass
class Answer:
    """One chat completion: its text and usage, or the error that stopped it."""

    text: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    error: str = ""


def _short(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
        if message:
            return str(message)
    return str(exc.message or exc)


async def _complete(client: openai.AsyncOpenAI, spec: RunSpec, messages: list[Message]) -> Answer:
    """One request with the client's retries; every failure becomes an Answer with an error, never an exception."""
    params = spec.params
    retries = params.get("retries", 0)
    try:
        response = await client.chat.completions.create(
            model=params["model"], messages=messages, temperature=params["temperature"],
            max_tokens=params["max_tokens"],
        )
    except openai.APITimeoutError:
        return Answer(error=f"timed out: no answer within {params['timeout']:g} s "
                            f"({retries + 1} attempt{'s' if retries else ''})")
    except openai.APIStatusError as exc:
        retried = exc.status_code == 429 or exc.status_code >= 500 or exc.status_code in (408, 409)
        after = f" after {retries} retr{'ies' if retries != 1 else 'y'}" if retried and retries else ""
        what = "rate limited" if exc.status_code == 429 else "error"
        return Answer(error=_short(f"HTTP {exc.status_code} {what} from the endpoint{after}: {_status_message(exc)}"))
    except openai.APIConnectionError as exc:
        return Answer(error=_short(f"could not reach {params['base_url']}: {exc.__cause__ or exc}"))
    except (openai.OpenAIError, ValueError, TypeError, KeyError) as exc:
        return Answer(error=_short(f"malformed response from the endpoint: {exc}"))
    if not isinstance(response, ChatCompletion):
        return Answer(error=_short(f"malformed response from the endpoint: expected a chat completion, got "
                                   f"{type(response).__name__} {str(response)[:200]!r}"))
    choices = response.choices
    if not choices:
        return Answer(error="malformed response from the endpoint: the chat completion has no choices")
    message = getattr(choices[0], "message", None)
    text = getattr(message, "content", None)
    usage = getattr(response, "usage", None)
    return Answer(text=text if isinstance(text, str) else None,
                  tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
                  tokens_out=int(getattr(usage, "completion_tokens", 0) or 0))


def _claim_outcome(spec: RunSpec, job: Job, answer: Answer, latency_ms: int) -> Outcome:
    assert spec.preset is not None
    outcome = Outcome(job.item_id, job.cache_key, latency_ms=latency_ms, tokens_in=answer.tokens_in,
                      tokens_out=answer.tokens_out, raw_output=answer.text or "")
    if answer.error:
        outcome.error = answer.error
        return outcome
    parsed = spec.preset.parse(answer.text)
    outcome.raw_label = parsed.label or ""
    outcome.score = parsed.score
    outcome.rationale = parsed.rationale
    outcome.parse_status = parsed.status
    if parsed.label is not None:
        outcome.label = spec.mapper(parsed.label)
        if outcome.label is None:
            outcome.parse_status = Prediction.ParseStatus.UNPARSEABLE
            outcome.rationale = f"verdict {parsed.label!r} is not one of the study's labels. {parsed.rationale}".strip()
    return outcome


def _passages_outcome(spec: RunSpec, job: Job, answers: Sequence[Answer], latency_ms: int) -> Outcome:
    """Evidence-level presets: every passage's judgement, pooled into the claim's verdict."""
    assert spec.preset is not None and spec.preset.aggregate is not None
    outcome = Outcome(job.item_id, job.cache_key, latency_ms=latency_ms,
                      tokens_in=sum(answer.tokens_in for answer in answers),
                      tokens_out=sum(answer.tokens_out for answer in answers))
    outcome.raw_output = "\n\n".join(f"--- passage {number} ---\n{answer.text or ''}"
                                     for number, answer in enumerate(answers, start=1))
    failed = [f"passage {number}: {answer.error}" for number, answer in enumerate(answers, start=1) if answer.error]
    if failed:
        outcome.error = _short("; ".join(failed))
        return outcome
    if not answers:
        outcome.parse_status = Prediction.ParseStatus.UNPARSEABLE
        outcome.rationale = "the item has no evidence passages to judge"
        return outcome
    results = [spec.preset.parse(answer.text) for answer in answers]
    pooled = spec.preset.aggregate(results, count_irrelevant=spec.count_irrelevant)
    outcome.score = pooled["score"]
    outcome.rationale = "\n".join(f"[{number}] {result.label or 'unparseable'}: {result.rationale}"
                                  for number, result in enumerate(results, start=1))
    if pooled["label"] is None:
        outcome.parse_status = Prediction.ParseStatus.UNPARSEABLE
        return outcome
    outcome.raw_label = pooled["label"]
    outcome.label = spec.mapper(pooled["label"])
    loose = any(result.status != "ok" for result in results)
    outcome.parse_status = Prediction.ParseStatus.FALLBACK if loose else Prediction.ParseStatus.OK
    if outcome.label is None:
        outcome.parse_status = Prediction.ParseStatus.UNPARSEABLE
    return outcome


async def _predict(client: openai.AsyncOpenAI, semaphore: asyncio.Semaphore, spec: RunSpec, job: Job) -> Outcome:
    started = time.perf_counter()

    async def ask(messages: list[Message]) -> Answer:
        async with semaphore:
            return await _complete(client, spec, messages)

    assert spec.preset is not None
    if spec.preset.evidence_level:
        answers = list(await asyncio.gather(*(ask(messages) for messages in job.requests)))
        return _passages_outcome(spec, job, answers, int((time.perf_counter() - started) * 1000))
    answer = await ask(job.requests[0])
    return _claim_outcome(spec, job, answer, int((time.perf_counter() - started) * 1000))


def make_client(spec: RunSpec, transport: httpx2.AsyncBaseTransport | None = None) -> openai.AsyncOpenAI:
    """The OpenAI client of a run: its base URL, key, retries and timeout (a transport only in tests)."""
    params = spec.params
    http_client = openai.DefaultAsyncHttpx2Client(transport=transport) if transport is not None else None
    return openai.AsyncOpenAI(base_url=params["base_url"], api_key=spec.api_key, max_retries=params["retries"],
                              timeout=params["timeout"], http_client=http_client)


async def _ask_all(jobs: Sequence[Job], spec: RunSpec, *, concurrency: int,
                   sink: Callable[[list[Outcome]], Awaitable[bool]], progress: Progress | None,
                   transport: httpx2.AsyncBaseTransport | None) -> None:
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
        clients = [await stack.enter_async_context(make_client(spec, transport))
                   for _ in range(max(1, math.ceil(concurrency / CONNECTIONS_PER_CLIENT)))]

        async def one(index: int, job: Job) -> None:
            pending.append(await _predict(clients[index % len(clients)], semaphore, spec, job))

        tasks = [asyncio.ensure_future(one(index, job)) for index, job in enumerate(jobs)]

        async def ticker() -> None:
            while not finished.is_set():
                try:
                    await asyncio.wait_for(finished.wait(), FLUSH_SECONDS)
                except asyncio.TimeoutError:
                    pass
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


# --- chunks and whole runs ----------------------------------------------------------------------


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
        return {"ran": self.ran, "more": self.more, "status": self.status, "items": self.items,
                "cached": self.cached, "asked": self.asked}


def run_chunk(run_id: int, generation: int, *, transport: httpx2.AsyncBaseTransport | None = None,
              progress: Progress | None = None) -> ChunkResult:
    """Process the run's next chunk; a chunk task of an old generation, or of an ended run, does nothing."""
    run = begin_chunk(run_id, generation)
    if run is None:
        status = VerifierRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
        return ChunkResult(ran=False, more=False, status=status)
    try:
        return _run_chunk(run, generation, transport=transport, progress=progress)
    except Exception as exc:  # a bug or a lost database: end the run visibly instead of leaving it "running"
        fail_run(run_id, f"the run stopped on an internal error: {type(exc).__name__}: {exc}")
        raise


def _run_chunk(run: VerifierRun, generation: int, *, transport: httpx2.AsyncBaseTransport | None,
               progress: Progress | None) -> ChunkResult:
    try:
        spec = spec_for(run)
    except (MissingApiKey, KeyError, ValueError) as exc:
        fail_run(run.pk, str(exc).strip("'\""))
        return ChunkResult(ran=True, more=False, status=VerifierRun.Status.FAILED)
    size = chunk_size(run.effective_concurrency) if spec.is_llm else MAX_CHUNK  # baselines: no network to pace
    rows = list(
        Item.objects.filter(study_id=run.verifier.study_id, pk__gt=run.cursor, pk__lte=run.upto_item)
        .order_by("pk").values_list("pk", "payload")[:size]
    )
    if not rows:
        more, status = finish_chunk(run.pk, generation, run.cursor)
        return ChunkResult(ran=True, more=more, status=status)
    jobs = [_safe_job(spec, item_id, payload) for item_id, payload in rows]
    answered = {
        (item_id, key): owner
        for item_id, key, owner in Prediction.objects.filter(
            verifier_id=run.verifier_id, item_id__in=[job.item_id for job in jobs],
            cache_key__in={job.cache_key for job in jobs}, error="",
        ).values_list("item_id", "cache_key", "run_id")
    }
    to_do: list[Job] = []
    n_cached = 0
    broken = [job.outcome for job in jobs if spec.is_llm and job.outcome is not None]
    if broken:
        record_predictions(run.pk, generation, broken)
        jobs = [job for job in jobs if job.outcome is None]
        if progress is not None:
            progress(len(broken))
    for job in jobs:
        if (job.item_id, job.cache_key) not in answered:
            to_do.append(job)
        elif answered[(job.item_id, job.cache_key)] != run.pk and job.item_id > run.counted_cursor:
            n_cached += 1
    last_item = rows[-1][0]
    count_cached(run, n_cached, last_item)
    if progress is not None and len(jobs) > len(to_do):
        progress(len(jobs) - len(to_do))
    if to_do:
        if spec.is_llm:
            sink = sync_to_async(lambda batch: record_predictions(run.pk, generation, batch), thread_sensitive=True)
            async_to_sync(_ask_all)(to_do, spec, concurrency=run.effective_concurrency, sink=sink,
                                    progress=progress, transport=transport)
        else:
            record_predictions(run.pk, generation, [job.outcome for job in to_do if job.outcome is not None])
            if progress is not None:
                progress(len(to_do))
    more, status = finish_chunk(run.pk, generation, last_item)
    return ChunkResult(ran=True, more=more, status=status, items=len(rows), cached=len(jobs) - len(to_do),
                       asked=len(to_do) if spec.is_llm else 0)


def run_to_completion(run: VerifierRun, *, transport: httpx2.AsyncBaseTransport | None = None,
                      progress: Progress | None = None) -> VerifierRun:
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
    job = _job(spec, item.pk, item_input(item.payload))
    return item, job.requests, job.cache_key

