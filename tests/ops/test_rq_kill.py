"""On the RQ backend too, a worker killed mid-job loses nothing and does nothing twice.

The database-backend kill tests (tests/annotation/transfer/test_job_kill.py) with the
tasks on Redis: two `manage.py worker` processes run RQ workers; the one that
took the big import (or export) gets SIGKILL mid-job. RQ itself never runs
that task again (no retry is set). The other worker, already running and idle,
sees within seconds that the job's worker is dead (no ``resume_stale_jobs``, and
its own stale-heartbeat limit is ten minutes), moves the RQ job to the failed
registry, queues the work again through the configured backend and finishes it:
every item imported once, the export whole. A verifier run killed mid-chunk is
resumed the same way (no ``resume_stale_runs``).
"""

from __future__ import annotations

import io
import json
import subprocess
import time
from pathlib import Path

import pytest
import redis
from django.db.models import Count
from rq import Queue
from rq.registry import FailedJobRegistry, StartedJobRegistry

from annotation.models import ExportJob, ImportJob
from annotation.tasks import run_export_job, run_import_job
from annotation.transfer.services.item_import import import_items
from metaeval.models import Prediction, VerifierRun
from metaeval.verifiers.services import create_verifier, start_run
from tests.conftest import verification_item
from tests.support.fake_openai import FakeOpenAI
from tests.support.job_kill import (
    JOB_STALE_SECONDS,
    assert_export_whole,
    assert_import_whole,
    assert_killed_export_left_a_partial_file,
    assert_killed_import_changed_nothing,
    big_import_job,
    export_ended,
    export_is_writing,
    import_ended,
    import_is_staging,
    labelled_export_job,
)
from tests.support.redis_server import redis_server, rq_backend
from tests.support.worker import is_held, kill, start_rq_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@pytest.fixture
def rq(settings, redis_url, tmp_path):
    """The RQ backend on an empty Redis for this process, and the var dir the workers share with it."""
    redis.Redis.from_url(redis_url).flushdb()
    rq_backend(settings, redis_url)
    settings.VAR_DIR = tmp_path / "var"
    return redis_url


#: A generous bound on "running again within the recovery window" (the goal is 10 s).
RECOVERY_DEADLINE = 30.0


def start_worker(
    log: Path, redis_url: str, stale_seconds: str = JOB_STALE_SECONDS, *, hold: str | None = None
) -> subprocess.Popen:
    env = {"CLAIMLAB_VAR_DIR": str(log.parent / "var"), "CLAIMLAB_JOB_STALE_SECONDS": stale_seconds}
    return start_rq_worker(log, redis_url, env, hold=hold)


def start_idle_worker(log: Path, redis_url: str) -> subprocess.Popen:
    """The other worker, with a ten-minute stale-heartbeat limit: only the dead-worker rule can recover."""
    return start_worker(log, redis_url, "600")


def running_again(model: type[ImportJob] | type[ExportJob], job_id: int) -> bool:
    job = model.objects.get(pk=job_id)
    return job.attempts >= 2 and job.status != model.Status.QUEUED


def wait_until_running_again(model, job_id: int, worker: subprocess.Popen, log: Path) -> None:
    killed_at = time.monotonic()
    wait_for(
        lambda: running_again(model, job_id), "the idle worker to run the job again", worker, log, RECOVERY_DEADLINE
    )
    print(f"{model.__name__} {job_id} running again {time.monotonic() - killed_at:.2f} s after the kill")


def assert_lost_rq_job_failed(redis_url: str) -> None:
    queue = Queue("default", connection=redis.Redis.from_url(redis_url))
    failed = FailedJobRegistry(queue=queue)
    assert failed.count == 1  # the killed task, failed at once (RQ alone would wait for its lease to run out)
    job_id = failed.get_job_ids()[0]
    assert job_id not in StartedJobRegistry(queue=queue).get_job_ids(cleanup=False)
    job = queue.fetch_job(job_id)
    result = job.latest_result() if job is not None else None
    assert result is not None and "WorkerLost" in (result.exc_string or "")


def wait_until_resumed(run: VerifierRun, worker: subprocess.Popen, log: Path, killed_at: float, after: str) -> None:
    """Until the idle worker resumed the run by itself (its first new generation), within the recovery window."""
    wait_for(
        lambda: VerifierRun.objects.get(pk=run.pk).generation == 1,
        "the idle worker to resume the run by itself",
        worker,
        log,
        RECOVERY_DEADLINE,
    )
    print(f"verifier run resumed {time.monotonic() - killed_at:.2f} s after {after}")


def wait_until_ended(run: VerifierRun, worker: subprocess.Popen, log: Path) -> None:
    wait_for(lambda: not VerifierRun.objects.get(pk=run.pk).is_active, "the resumed run to end", worker, log)


def queued_tasks(redis_url: str) -> int:
    return Queue("default", connection=redis.Redis.from_url(redis_url)).count


def test_an_rq_worker_killed_mid_import_is_run_again_by_the_idle_worker_by_itself_exactly_once(
    verification_study, rq, tmp_path
):
    job, upload = big_import_job(verification_study)
    run_import_job.enqueue(job.pk)
    assert queued_tasks(rq) == 1  # on Redis, not in the database table

    first = start_worker(tmp_path / "worker1.log", rq, hold="import")
    second = None
    try:
        log = tmp_path / "worker1.log"
        wait_for(lambda: import_is_staging(job.pk, log), "the import to be staging", first, log)
        second = start_idle_worker(tmp_path / "worker2.log", rq)  # idle: the only task is the first worker's
        kill(first)
        assert_killed_import_changed_nothing(job, upload)

        wait_until_running_again(ImportJob, job.pk, second, tmp_path / "worker2.log")
        assert_lost_rq_job_failed(rq)
        wait_for(lambda: import_ended(job.pk), "the re-queued import to end", second, tmp_path / "worker2.log", 300)
    finally:
        stop(first)
        if second is not None:
            stop(second)
    assert_import_whole(job, upload)
    assert queued_tasks(rq) == 0


def test_an_rq_worker_killed_mid_export_is_run_again_by_the_idle_worker_by_itself_with_the_export_whole(
    verification_study, rq, tmp_path
):
    job = labelled_export_job(verification_study)
    run_export_job.enqueue(job.pk)

    first = start_worker(tmp_path / "worker1.log", rq, hold="export")
    second = None
    try:
        log = tmp_path / "worker1.log"
        wait_for(lambda: export_is_writing(job.pk, log), "the export to be writing", first, log)
        second = start_idle_worker(tmp_path / "worker2.log", rq)
        kill(first)
        assert_killed_export_left_a_partial_file(job)

        wait_until_running_again(ExportJob, job.pk, second, tmp_path / "worker2.log")
        assert_lost_rq_job_failed(rq)
        wait_for(lambda: export_ended(job.pk), "the re-queued export to end", second, tmp_path / "worker2.log", 300)
    finally:
        stop(first)
        if second is not None:
            stop(second)
    assert_export_whole(job)


N_ITEMS = 40
ANSWERED_BEFORE_KILL = 14
CHUNK = 10
CONCURRENCY = 4


def test_an_rq_worker_killed_mid_verifier_run_is_resumed_by_the_idle_worker_by_itself_without_paying_twice(
    verification_study, settings, rq, tmp_path
):
    """The verifier-run kill test (tests/verifiers_run/test_kill_resume.py) on RQ, with the endpoint capped
    through the shared limiter: the dead worker's slots come back when their leases run out."""
    import_items(
        study=verification_study,
        stream=io.BytesIO("".join(json.dumps(verification_item(f"v-{n:02d}")) + "\n" for n in range(N_ITEMS)).encode()),
        fmt="jsonl",
    )
    with FakeOpenAI(latency=0.02) as server:
        server.hold_after(ANSWERED_BEFORE_KILL)
        endpoint = {
            "base_url": server.base_url.rstrip("/"),
            "key_env": "",
            "models": [],
            "max_concurrency": CONCURRENCY,
        }
        settings.VERIFIER_ENDPOINTS = {"test": endpoint}
        verifier = create_verifier(
            study=verification_study,
            name="gpt",
            preset="veriscore_ternary",
            model="fake-model",
            endpoint="test",
            concurrency=CONCURRENCY,
            timeout=30.0,
            retries=0,
        )
        run = start_run(verifier=verifier)  # queued on Redis
        env = {
            "CLAIMLAB_VERIFIER_CHUNK_SIZE": str(CHUNK),
            "CLAIMLAB_ENDPOINTS": json.dumps({"test": endpoint}),
            "CLAIMLAB_VERIFIER_SLOT_LEASE_SECONDS": "2",
            "CLAIMLAB_VAR_DIR": str(tmp_path / "var"),
        }
        first = start_rq_worker(tmp_path / "worker1.log", rq, env)
        second = None
        try:
            wait_for(
                lambda: Prediction.objects.filter(verifier=verifier).count() >= ANSWERED_BEFORE_KILL,
                "the first answers to be stored",
                first,
                tmp_path / "worker1.log",
            )
            wait_for(lambda: server.requests > ANSWERED_BEFORE_KILL, "requests held", first, tmp_path / "worker1.log")
            second = start_rq_worker(tmp_path / "worker2.log", rq, env)
            kill(first)
            stored_before = set(Prediction.objects.filter(verifier=verifier).values_list("item_id", flat=True))
            assert len(stored_before) == ANSWERED_BEFORE_KILL
            assert VerifierRun.objects.get(pk=run.pk).status == VerifierRun.Status.RUNNING

            server.release()
            killed_at = time.monotonic()
            wait_until_resumed(run, second, tmp_path / "worker2.log", killed_at, "the kill")
            assert_lost_rq_job_failed(rq)
            wait_until_ended(run, second, tmp_path / "worker2.log")
        finally:
            stop(first)
            if second is not None:
                stop(second)

    run.refresh_from_db()
    assert run.status == VerifierRun.Status.SUCCEEDED, run.error_message
    assert (run.done, run.total, run.errors, run.generation) == (N_ITEMS, N_ITEMS, 0, 1)
    predictions = Prediction.objects.filter(verifier=verifier)
    assert predictions.count() == N_ITEMS
    assert not predictions.values("item_id", "cache_key").annotate(n=Count("pk")).filter(n__gt=1).exists()
    repeated = server.requests - N_ITEMS  # only the calls in flight at the kill were asked again
    assert 0 < repeated <= CONCURRENCY
    assert server.max_in_flight <= CONCURRENCY


def test_an_rq_worker_killed_between_two_chunks_of_a_run_leaves_it_held_by_a_gone_worker_resumed_at_once(
    verification_study, settings, rq, tmp_path
):
    """Killed after a chunk ended and before the next was queued, the run stays held by the dead worker
    (each chunk's worker holds the run until the next chunk's takes it over), so the idle worker, whose
    stale-heartbeat limit is ten minutes, resumes it within seconds; it was held by nobody before, and
    waited for its heartbeat to go stale (2 minutes by default: the fault matrix's 135 s recovery)."""
    import_items(
        study=verification_study,
        stream=io.BytesIO("".join(json.dumps(verification_item(f"v-{n:02d}")) + "\n" for n in range(N_ITEMS)).encode()),
        fmt="jsonl",
    )
    with FakeOpenAI(latency=0.01) as server:
        endpoint = {"base_url": server.base_url.rstrip("/"), "key_env": "", "models": [], "max_concurrency": 4}
        settings.VERIFIER_ENDPOINTS = {"test": endpoint}
        verifier = create_verifier(
            study=verification_study,
            name="gpt",
            preset="veriscore_ternary",
            model="fake-model",
            endpoint="test",
            concurrency=CONCURRENCY,
            timeout=30.0,
            retries=0,
        )
        run = start_run(verifier=verifier)
        env = {
            "CLAIMLAB_VERIFIER_CHUNK_SIZE": str(CHUNK),
            "CLAIMLAB_ENDPOINTS": json.dumps({"test": endpoint}),
            "CLAIMLAB_VERIFIER_SLOT_LEASE_SECONDS": "2",
            "CLAIMLAB_VAR_DIR": str(tmp_path / "var"),
        }
        first = start_rq_worker(tmp_path / "worker1.log", rq, env, hold="verifier-between-chunks")
        second = None
        try:
            wait_for(
                lambda: is_held(tmp_path / "worker1.log"), "the first chunk to end", first, tmp_path / "worker1.log"
            )
            held = VerifierRun.objects.get(pk=run.pk)
            assert held.done == CHUNK and held.worker  # still the first chunk's worker's, not nobody's
            second = start_rq_worker(tmp_path / "worker2.log", rq, {**env, "CLAIMLAB_JOB_STALE_SECONDS": "600"})
            kill(first)
            killed_at = time.monotonic()
            wait_until_resumed(run, second, tmp_path / "worker2.log", killed_at, "the kill between chunks")
            wait_until_ended(run, second, tmp_path / "worker2.log")
        finally:
            stop(first)
            if second is not None:
                stop(second)
    run.refresh_from_db()
    assert run.status == VerifierRun.Status.SUCCEEDED, run.error_message
    assert (run.done, run.total, run.errors) == (N_ITEMS, N_ITEMS, 0)
    assert Prediction.objects.filter(verifier=verifier).count() == N_ITEMS
    assert server.requests == N_ITEMS  # nothing asked twice: the first chunk was whole when killed
