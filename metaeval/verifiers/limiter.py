"""An endpoint's concurrency cap shared by every worker: leased slots in Redis.

An operator endpoint may carry a concurrency cap (``max_concurrency`` in
CLAIMLAB_ENDPOINTS). Inside one chunk the runner's ``asyncio.Semaphore`` keeps
to it, but four workers running four runs against the same endpoint would
send four times the cap. With ``REDIS_URL`` set, every verifier call also
takes one of the endpoint's slots here, whatever process it runs in.

A slot is a member of a sorted set scored by its lease's expiry (Redis's own
clock, so the hosts' clocks do not matter). Taking one first drops expired
leases, then adds a lease if fewer than the cap are held, in one script, so
two workers never both take the last slot. A holder renews its leases every
third of the lease time; a worker killed mid-call stops renewing, and its
slots come back once their leases run out (``VERIFIER_SLOT_LEASE_SECONDS``), or sooner:
a slot's token starts with the registered worker that holds it, and the worker that
finds it gone (annotation.lib.job_runs.recover_lost_work) gives its slots back at once
(`release_slots_of`), so the resumed run need not wait out the lease.
Without Redis there is nothing to share: the in-process semaphore is the limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import redis
import redis.asyncio
import redis.exceptions
from django.conf import settings

from annotation.lib.job_runs import current_worker

__all__ = ["SharedSlots", "redis_client", "release_slots_of", "shared_slots_for", "slots_key"]

logger = logging.getLogger(__name__)

#: Wait between tries for a slot: from the first value, doubling, up to the second (with jitter).
POLL_SECONDS = (0.005, 0.1)

_TAKE = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
local lease = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], t + lease, ARGV[3])
redis.call('EXPIRE', KEYS[1], math.ceil(lease * 2))
return 1
"""

_RENEW = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
local lease = tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', t + lease, ARGV[i])
end
redis.call('EXPIRE', KEYS[1], math.ceil(lease * 2))
return renewed
"""


def slots_key(endpoint: str) -> str:
    """The Redis key holding an endpoint's leased slots."""
    return f"{SLOTS_KEY_PREFIX}{endpoint}"


SLOTS_KEY_PREFIX = "claimlab:verifier-slots:"
#: Between the holding worker's id and the random part of a slot's token.
TOKEN_SEPARATOR = "|"


def new_token() -> str:
    """A slot's token: the registered worker holding it ("" outside a worker), then a random part."""
    return f"{current_worker()}{TOKEN_SEPARATOR}{uuid.uuid4().hex}"


def holder_of(token: bytes | str) -> str:
    """The worker id a slot's token names."""
    text = token.decode() if isinstance(token, bytes) else token
    return text.rpartition(TOKEN_SEPARATOR)[0]


class SharedSlots:
    """At most ``limit`` calls in flight to one endpoint across all processes; ``async with slots.slot(): ...``.

    Use it as an async context manager around the calls (it renews the
    leases it holds and closes its connection on the way out).
    """

    def __init__(self, redis: Any, endpoint: str, limit: int, *, lease_seconds: float) -> None:
        self.redis = redis
        self.key = slots_key(endpoint)
        self.limit = limit
        self.lease_seconds = lease_seconds
        self.held: set[str] = set()
        self._take = redis.register_script(_TAKE)
        self._renew = redis.register_script(_RENEW)
        self._renewer: asyncio.Task[None] | None = None

    async def __aenter__(self) -> SharedSlots:
        self._renewer = asyncio.ensure_future(self._renew_forever())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
        try:
            if self.held:  # calls cancelled mid-wait: give their slots back now, not at lease expiry
                await self.redis.zrem(self.key, *self.held)
        except REDIS_OUTAGES as exc:
            logger.warning("giving back the slots of %s failed (%s); their leases run out instead", self.key, exc)
        finally:
            self.held.clear()
            await self.redis.aclose()

    async def try_take(self) -> str | None:
        """A slot's token if one is free now, else None."""
        token = new_token()
        if await self._take(keys=[self.key], args=[self.limit, self.lease_seconds, token]):
            self.held.add(token)
            return token
        return None

    async def take(self) -> str:
        """Wait for a free slot and return its token.

        Redis unreachable (restarted, failed over) is waited out for up to REDIS_OUTAGE_SECONDS,
        trying every second: a run then goes on where it was instead of failing for a
        passing outage; past that, the Redis error is raised and the run says it.
        """
        pause = POLL_SECONDS[0]
        outage_began: float | None = None
        loop = asyncio.get_running_loop()
        while True:
            try:
                token = await self.try_take()
            except REDIS_OUTAGES as exc:
                if outage_began is None:
                    outage_began = loop.time()
                    logger.warning("the limiter's Redis is unreachable (%s); waiting for it", exc)
                elif loop.time() - outage_began > REDIS_OUTAGE_SECONDS:
                    raise
                await asyncio.sleep(random.uniform(0.5, 1.5))
                continue
            if outage_began is not None:
                logger.warning("the limiter's Redis answers again after %.0f s", loop.time() - outage_began)
                outage_began = None
            if token is not None:
                return token
            await asyncio.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(pause * 2, POLL_SECONDS[1])

    async def give_back(self, token: str) -> None:
        """Free a slot taken by this holder (Redis unreachable: its lease runs out instead)."""
        self.held.discard(token)
        try:
            await self.redis.zrem(self.key, token)
        except REDIS_OUTAGES as exc:
            logger.warning("giving back a slot of %s failed (%s); its lease runs out instead", self.key, exc)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot while the body runs."""
        token = await self.take()
        try:
            yield
        finally:
            await asyncio.shield(self.give_back(token))

    async def renew(self) -> int:
        """Extend every held lease by the lease time from now; how many were still there to extend."""
        tokens = list(self.held)
        if not tokens:
            return 0
        renewed = int(await self._renew(keys=[self.key], args=[self.lease_seconds, *tokens]))
        if renewed < len(tokens):  # this process stalled past a lease: the slot may already be someone else's
            logger.warning(
                "%d of %d slots of %s had expired before renewal", len(tokens) - renewed, len(tokens), self.key
            )
        return renewed

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                await self.renew()
            except Exception as exc:  # Redis unreachable for a moment: the next turn tries again
                logger.warning("renewing the slots of %s failed: %s", self.key, exc)


#: Redis errors of a passing outage (refused, reset, timed out, restarting), waited out by `take`.
REDIS_OUTAGES = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, redis.exceptions.BusyLoadingError)
#: How long `take` waits for an unreachable Redis before the call fails with Redis's error.
REDIS_OUTAGE_SECONDS = 120.0

#: Seconds a call to the limiter's Redis may take before it fails (connecting or waiting for an answer):
#: a Redis that stops answering makes a verifier call fail with an error instead of waiting forever.
REDIS_TIMEOUT_SECONDS = 10.0


def redis_client(url: str) -> Any:
    """An asyncio Redis client for the limiter, with bounded waits (REDIS_TIMEOUT_SECONDS)."""
    return redis.asyncio.from_url(
        url, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS
    )


def release_slots_of(lost_workers: set[str]) -> list[Any]:
    """Give back every slot held by a gone worker, on every endpoint (a recovery, job_runs.register_recovery).

    Why not wait for the leases: a killed worker's slots would keep the run it held, resumed
    by another worker, waiting VERIFIER_SLOT_LEASE_SECONDS (30 s) for its own endpoint. A worker
    taken for gone while alive (silent past WorkerHeartbeat.LOST_AFTER) loses its slots as it
    would by its leases running out. Returns no handled jobs (slots are not jobs); Redis away:
    the leases run out instead.
    """
    if not lost_workers or not settings.REDIS_URL:
        return []
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS
    )
    try:
        for key in client.scan_iter(match=f"{SLOTS_KEY_PREFIX}*"):
            tokens: list[bytes] = client.zrange(key, 0, -1)  # type: ignore[assignment]  # no scores asked
            gone = [token for token in tokens if holder_of(token) in lost_workers]
            if gone:
                client.zrem(key, *gone)
                logger.warning("gave back %d slot(s) of %s held by gone workers", len(gone), key.decode())
    except REDIS_OUTAGES as exc:
        logger.info("slots of gone workers not given back (%s); their leases run out instead", exc)
    finally:
        client.close()
    return []


def shared_slots_for(endpoint: str, limit: int | None) -> SharedSlots | None:
    """The shared slots of an operator endpoint with a cap, when Redis is configured; else None."""
    if not endpoint or not limit or not settings.REDIS_URL:
        return None
    client = redis_client(settings.REDIS_URL)
    return SharedSlots(client, endpoint, int(limit), lease_seconds=float(settings.VERIFIER_SLOT_LEASE_SECONDS))
