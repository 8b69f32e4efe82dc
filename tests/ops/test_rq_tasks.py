"""Imports, exports and verifier runs go through the RQ backend and `manage.py worker` works them.

With the tasks on Redis (TASKS_BACKEND=django_tasks_rq.RQBackend), each kind is
queued by its own service as in production, and the one documented worker
command, given --batch, runs RQ's worker in burst mode: every task in a forked
work horse, the verifier run's chunk tasks queueing each other, until the
queue is empty. Nothing goes through the database backend's table.
"""

from __future__ import annotations

import io
import json
import os
import signal
import threading

import pytest
import redis
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django_tasks import default_task_backend
from django_tasks_db.models import DBTaskResult
from redis.client import PubSubWorkerThread
from rq import Queue
from rq.registry import FailedJobRegistry, FinishedJobRegistry

from annotation.lib.storage import files, stored_names
from annotation.models import ExportJob, ImportJob, Item
from annotation.tasks import run_export_job
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.export_jobs import request_export
from annotation.transfer.services.import_jobs import submit_import
from annotation.transfer.services.item_import import import_items
from metaeval.models import Prediction, VerifierRun
from metaeval.verifiers.services import create_verifier, start_run
from tests.conftest import verification_item
from tests.support.fake_openai import FakeOpenAI
from tests.support.redis_server import redis_server, rq_backend

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@pytest.fixture
def rq(settings, redis_url, tmp_path):
    """The RQ backend on an empty Redis; RQ's worker installs signal handlers, put back afterwards."""
    redis.Redis.from_url(redis_url).flushdb()
    rq_backend(settings, redis_url)
    settings.VAR_DIR = tmp_path / "var"
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield redis.Redis.from_url(redis_url)
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def work(connection: redis.Redis) -> tuple[int, int]:
    """Run `manage.py worker --batch` here; (tasks finished, tasks failed) on the default queue."""
    queue = Queue("default", connection=connection)
    assert queue.count > 0  # something is queued on Redis
    call_command("worker", "--batch", "--no-reload", "--no-startup-delay", verbosity=0)
    assert queue.count == 0
    failed = FailedJobRegistry(queue=queue)
    for job_id in failed.get_job_ids():  # say why, should a test fail on it
        job = queue.fetch_job(job_id)
        result = job.latest_result() if job is not None else None
        print(f"RQ job {job_id} failed: {result.exc_string if result is not None else '(no result)'}")
    return FinishedJobRegistry(queue=queue).count, failed.count


def test_a_big_import_runs_on_rq(verification_study, settings, rq):
    settings.IMPORT_INLINE_MAX_BYTES = 0  # every upload is a background job
    records = "".join(json.dumps(verification_item(f"rq-{n}")) + "\n" for n in range(50))
    job = submit_import(
        study=verification_study, what="items", upload=SimpleUploadedFile("items.jsonl", records.encode())
    )
    assert ImportJob.objects.get(pk=job.pk).status == ImportJob.Status.QUEUED
    assert work(rq) == (1, 0)
    job.refresh_from_db()
    assert (job.status, job.created, job.attempts, job.file_path) == (ImportJob.Status.SUCCEEDED, 50, 1, "")
    assert Item.objects.filter(study=verification_study).count() == 50
    assert not DBTaskResult.objects.exists()


def test_an_export_runs_on_rq_and_its_result_is_readable_through_the_backend(verification_study, rq):
    import_items(
        study=verification_study,
        stream=io.BytesIO("".join(json.dumps(verification_item(f"x-{n}")) + "\n" for n in range(5)).encode()),
        fmt="jsonl",
    )
    labels = [{"item": f"x-{n}", "annotator": "w1", "label": "supported"} for n in range(5)]
    import_annotations(
        study=verification_study, stream=io.BytesIO("\n".join(map(json.dumps, labels)).encode()), fmt="jsonl"
    )
    job = request_export(study=verification_study, file_format="jsonl")
    queued = run_export_job.enqueue(job.pk)  # a second task for the same job: it must not write twice
    assert work(rq) == (2, 0)
    job.refresh_from_db()
    assert (job.status, job.rows, job.attempts) == (ExportJob.Status.SUCCEEDED, 5, 1)
    with files().open(job.file_path, "rb") as exported:
        assert sorted(json.loads(line)["item"] for line in exported.read().decode().splitlines()) == [
            f"x-{n}" for n in range(5)
        ]
    assert stored_names("exports") == [job.file_path]  # written once
    result = default_task_backend.get_result(queued.id)  # the task's outcome as django-tasks reports it
    assert result.status == "SUCCESSFUL"
    assert result.return_value == {"status": ExportJob.Status.SUCCEEDED, "rows": 5}


def test_a_verifier_run_runs_on_rq_as_a_chain_of_chunk_tasks(verification_study, settings, rq):
    import_items(
        study=verification_study,
        stream=io.BytesIO("".join(json.dumps(verification_item(f"v-{n}")) + "\n" for n in range(6)).encode()),
        fmt="jsonl",
    )
    settings.VERIFIER_CHUNK_SIZE = 2  # six items: three chunk tasks, each queueing the next
    settings.VERIFIER_ENDPOINTS = {"test": {"base_url": "", "key_env": "", "models": [], "max_concurrency": None}}
    with FakeOpenAI() as server:
        settings.VERIFIER_ENDPOINTS["test"]["base_url"] = server.base_url.rstrip("/")
        verifier = create_verifier(
            study=verification_study,
            name="gpt",
            preset="veriscore_ternary",
            model="fake-model",
            endpoint="test",
            concurrency=2,
            timeout=5.0,
            retries=0,
        )
        run = start_run(verifier=verifier)
        assert work(rq) == (3, 0)
    run.refresh_from_db()
    assert (run.status, run.done, run.total, run.errors) == (VerifierRun.Status.SUCCEEDED, 6, 6, 0)
    assert Prediction.objects.filter(run=run).count() == 6
    assert server.requests == 6


#: Threads alive in this process each time it forked, while `_forks_watched` is on.
_threads_at_fork: list[set[threading.Thread]] = []
_forks_watched = False


def _note_threads_at_fork() -> None:
    if _forks_watched:
        _threads_at_fork.append(set(threading.enumerate()))


os.register_at_fork(before=_note_threads_at_fork)


def test_the_rq_worker_forks_its_work_horses_with_no_thread_of_its_own_running(verification_study, settings, rq):
    """A fork taken while another thread is inside the database driver hangs the horse on its first
    query (seen in CI: an import's horse stuck until RQ's timeout). The worker's registry beat and its
    recovery of lost work run in RQ's own loop: at each fork, the only new threads are RQ's pub/sub."""
    global _forks_watched
    settings.IMPORT_INLINE_MAX_BYTES = 0
    for n in range(3):
        records = json.dumps(verification_item(f"fork-{n}")) + "\n"
        submit_import(study=verification_study, what="items", upload=SimpleUploadedFile(f"{n}.jsonl", records.encode()))
    before = set(threading.enumerate())
    _threads_at_fork.clear()
    _forks_watched = True
    try:
        assert work(rq) == (3, 0)
    finally:
        _forks_watched = False
    assert len(_threads_at_fork) >= 3  # a work horse per task (and RQ's scheduler process)
    for alive in _threads_at_fork:
        started_by_the_worker = alive - before
        assert all(isinstance(thread, PubSubWorkerThread) for thread in started_by_the_worker), started_by_the_worker
    assert Item.objects.filter(study=verification_study).count() == 3
    assert ImportJob.objects.filter(status=ImportJob.Status.SUCCEEDED, attempts=1).count() == 3
