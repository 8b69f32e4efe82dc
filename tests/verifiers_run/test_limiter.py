"""An endpoint's concurrency cap holds across workers (the Redis limiter), and a dead worker's slots come back.

Four runs on four threads stand for four workers: each chunk keeps to the
endpoint's cap on its own, so together they would send four times the cap;
with REDIS_URL set they share the endpoint's slots and the server never sees
more than the cap. A slot is a lease: a holder that dies stops renewing it and
it comes back; a live holder's renewals keep it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
import redis
import redis.asyncio
from django.conf import settings as django_settings

from annotation.lib import job_runs
from annotation.models import WorkerHeartbeat
from metaeval.models import Prediction, VerifierRun
from metaeval.verifiers.limiter import SharedSlots, holder_of, redis_client, slots_key
from metaeval.verifiers.runner.orchestration import run_to_completion
from metaeval.verifiers.services import start_run
from tests.support.fake_openai import FakeOpenAI
from tests.support.redis_server import redis_server
from tests.support.threads import run_in_threads
from tests.support.worker import REPO, dead_pid, registered
from tests.verifiers_run.conftest import llm_verifier

CAP = 2
RUNS = 4
ITEMS = 6  # the claims study's

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@pytest.fixture
def empty_redis(redis_url):
    redis.Redis.from_url(redis_url).flushdb()
    return redis_url


def four_runs(study, server: FakeOpenAI) -> list[VerifierRun]:
    """Four runs of four verifiers on one operator endpoint capped at CAP (each asks for 4 at once)."""
    runs = []
    for n in range(RUNS):
        verifier = llm_verifier(study, server.base_url, name=f"v{n}", concurrency=4, timeout=30)
        runs.append(start_run(verifier=verifier, enqueue=False))
    django_settings.VERIFIER_ENDPOINTS["test"]["max_concurrency"] = CAP
    return runs


def completing(run: VerifierRun) -> Callable[[], object]:
    return lambda: run_to_completion(run)


def run_all(runs: list[VerifierRun]) -> None:
    run_in_threads([completing(run) for run in runs])
    for run in runs:
        run.refresh_from_db()
        assert (run.status, run.done, run.errors) == (VerifierRun.Status.SUCCEEDED, ITEMS, 0), run.error_message


def test_four_runs_on_one_capped_endpoint_never_exceed_the_cap_together(claims_study, settings, empty_redis):
    settings.REDIS_URL = empty_redis
    with FakeOpenAI(latency=0.05) as server:
        runs = four_runs(claims_study, server)
        run_all(runs)
    assert server.requests == RUNS * ITEMS
    assert server.max_in_flight == CAP  # reached, never exceeded
    assert Prediction.objects.filter(run__in=runs).count() == RUNS * ITEMS
    assert redis.Redis.from_url(empty_redis).zcard(slots_key("test")) == 0  # every slot given back


def test_without_redis_each_run_keeps_only_to_its_own_cap(claims_study, settings):
    """The baseline the limiter fixes: held requests pile up to the cap times the runs."""
    settings.REDIS_URL = ""
    with FakeOpenAI() as server:
        server.hold_after(0)
        runs = four_runs(claims_study, server)
        deadline = time.monotonic() + 60

        def release_when_all_are_waiting() -> None:
            while server.requests < RUNS * CAP and time.monotonic() < deadline:
                time.sleep(0.02)
            server.release()

        run_in_threads([*(completing(run) for run in runs), release_when_all_are_waiting])
    assert server.max_in_flight == RUNS * CAP


def slots(url: str, limit: int, lease: float) -> SharedSlots:
    return SharedSlots(redis_client(url), "test", limit, lease_seconds=lease)


def test_a_killed_holders_slots_come_back_when_their_leases_run_out(empty_redis):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import asyncio, sys, django\n"
            "django.setup()\n"
            "from metaeval.verifiers.limiter import SharedSlots, redis_client\n"
            "async def main():\n"
            f"    async with SharedSlots(redis_client({empty_redis!r}), 'test', 2, lease_seconds=1.0) as s:\n"
            "        await s.take(); await s.take(); print('held', flush=True); await asyncio.sleep(3600)\n"
            "asyncio.run(main())\n",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"

        async def after_the_kill() -> tuple[str | None, str]:
            async with slots(empty_redis, 2, 1.0) as mine:
                while_held = await mine.try_take()
                holder.kill()
                await asyncio.to_thread(holder.wait, 15)  # not blocking the loop (and its lease renewals)
                return while_held, await asyncio.wait_for(mine.take(), 30)

        # every Redis call is bounded (redis_client), and so is the whole: a hang fails here, with its cause
        while_held, after = asyncio.run(asyncio.wait_for(after_the_kill(), 90))
    finally:
        holder.kill()
        holder.wait(15)
    assert while_held is None  # both slots were the holder's
    assert after  # its leases ran out without renewal: a slot came back


def test_a_live_holder_keeps_its_slot_past_the_lease_by_renewing_it(empty_redis):
    async def scenario() -> tuple[list[str | None], str | None]:
        async with slots(empty_redis, 1, 1.0) as holder, slots(empty_redis, 1, 1.0) as other:
            tries = []
            async with holder.slot():
                for _ in range(3):
                    await asyncio.sleep(0.9)  # 2.7 s in all: past the lease, kept by renewals
                    tries.append(await other.try_take())
            return tries, await other.try_take()

    tries, after_release = asyncio.run(scenario())
    assert tries == [None, None, None]
    assert after_release is not None


def test_expired_leases_are_dropped_and_live_ones_count(empty_redis):
    client = redis.Redis.from_url(empty_redis)
    now = float(client.time()[0])
    client.zadd(slots_key("test"), {"dead-1": now - 5, "dead-2": now - 1, "live": now + 600})

    async def take_two() -> tuple[str | None, str | None]:
        async with slots(empty_redis, 2, 30.0) as mine:
            return await mine.try_take(), await mine.try_take()

    first, second = asyncio.run(take_two())
    assert first is not None and second is None  # the two dead leases are gone, the live one still counts
    assert client.zrange(slots_key("test"), 0, -1) == [b"live"]  # the taken slot was given back on exit


class _FlakyRedis:
    """A Redis client whose first `down` calls fail as a stopped server does (connection refused)."""

    def __init__(self, down: int) -> None:
        self.down, self.calls = down, 0

    def register_script(self, _source: str):
        async def script(keys, args):
            self.calls += 1
            if self.calls <= self.down:
                raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
            return 1

        return script

    async def zrem(self, _key, *tokens):
        raise redis.exceptions.ConnectionError("Connection refused.")


def test_a_redis_outage_is_waited_out_and_a_long_one_fails_with_its_error(monkeypatch):
    """Redis restarted mid-run (fault matrix, issue 31): the run waits for it instead of failing."""
    from metaeval.verifiers import limiter

    pauses: list[float] = []

    async def no_sleep(seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr(limiter.asyncio, "sleep", no_sleep)
    flaky = _FlakyRedis(down=3)
    slots = SharedSlots(flaky, "local", 2, lease_seconds=5.0)
    token = asyncio.run(slots.take())
    assert flaky.calls == 4 and len(pauses) == 3 and token in slots.held
    asyncio.run(slots.give_back(token))  # Redis away again: the lease runs out instead of an error
    assert token not in slots.held

    monkeypatch.setattr(limiter, "REDIS_OUTAGE_SECONDS", -1.0)  # an outage longer than the wait
    with pytest.raises(redis.exceptions.ConnectionError, match="Connection refused"):
        asyncio.run(SharedSlots(_FlakyRedis(down=10), "local", 2, lease_seconds=5.0).take())


def test_the_slots_of_a_gone_worker_are_given_back_by_the_recovery_not_when_their_leases_run_out(
    empty_redis, settings, monkeypatch
):
    """A worker killed mid-run held its endpoint's slots for a 10-minute lease here: the worker that finds
    it gone frees them at once, so the resumed run need not wait; a live worker's slot stays taken."""
    settings.REDIS_URL = empty_redis
    registered("killed", pid=dead_pid())
    registered("alive")

    async def take_as(worker_id: str, count: int) -> list[str]:
        monkeypatch.setattr(job_runs, "_current_worker", worker_id)
        holder = slots(empty_redis, 3, 600.0)
        try:
            return [await holder.take() for _ in range(count)]
        finally:
            holder.held.clear()  # as if killed: nothing given back on the way out
            await holder.redis.aclose()

    killed = asyncio.run(take_as("killed", 2))
    alive = asyncio.run(take_as("alive", 1))
    assert all(holder_of(token) == "killed" for token in killed) and holder_of(alive[0]) == "alive"

    async def try_take() -> str | None:
        async with slots(empty_redis, 3, 600.0) as other:
            return await other.try_take()

    assert asyncio.run(try_take()) is None  # all three taken
    job_runs.recover_lost_work()
    held = {token.decode() for token in redis.Redis.from_url(empty_redis).zrange(slots_key("test"), 0, -1)}
    assert held == set(alive)  # the gone worker's two given back, the live one's kept
    assert not WorkerHeartbeat.objects.filter(pk="killed").exists()
