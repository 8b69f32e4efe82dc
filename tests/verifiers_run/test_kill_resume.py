"""Killing the worker mid-run loses nothing and duplicates nothing.

A real ``manage.py db_worker`` runs the run's chunk tasks against this test's
database (a file: the SQLite test database, or PostgreSQL when DATABASE_URL
points at one). The loopback server answers the first requests and then
holds the rest; once those answers are stored, the worker gets SIGKILL with
requests in flight. A second worker, started afterwards, sees at its start that
the chunk's worker is dead and resumes the run by itself (no ``resume_stale_runs``,
no wait for the 120 s stale heartbeat), marks the dead worker's task row failed,
and must finish the run with exactly one prediction per item for its cache key,
without asking again for anything that was already stored.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db.models import Count
from django_tasks.base import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from annotation.models import Item
from metaeval.models import Prediction, VerifierRun
from metaeval.verifiers.runner.spec import item_input, preset_for, render_item
from metaeval.verifiers.services import start_run
from tests.support.fake_openai import FakeOpenAI
from tests.support.worker import start_db_worker, stop, wait_for
from tests.verifiers_run.conftest import add_items, claim_item, llm_verifier

N_ITEMS = 40
ANSWERED_BEFORE_KILL = 14
CHUNK = 10
CONCURRENCY = 4
#: A generous bound on "resumed within the recovery window" (the goal is 10 s; a slow machine must not fail it).
RECOVERY_DEADLINE = 30.0

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def start_worker(log: Path) -> subprocess.Popen:
    return start_db_worker(
        log,
        {
            "CLAIMLAB_VERIFIER_CHUNK_SIZE": str(CHUNK),
            "CLAIMLAB_ENDPOINTS": json.dumps(django_settings.VERIFIER_ENDPOINTS),  # the fake server, for the worker
            "CLAIMLAB_VAR_DIR": str(log.parent),
        },
    )


def test_a_killed_worker_is_resumed_without_losing_or_repeating_a_prediction(claims_study, tmp_path):
    add_items(claims_study, [claim_item(f"k{n:02d}", f"Resumable claim {n:02d} is true.") for n in range(N_ITEMS - 6)])
    items = list(Item.objects.filter(study=claims_study).order_by("pk"))
    assert len(items) == N_ITEMS
    with FakeOpenAI(latency=0.02) as server:
        server.hold_after(ANSWERED_BEFORE_KILL)
        verifier = llm_verifier(claims_study, server.base_url, concurrency=CONCURRENCY, timeout=30, retries=0)
        run = start_run(verifier=verifier)  # queued: a task row for the worker
        first = start_worker(tmp_path / "worker1.log")
        try:
            wait_for(
                lambda: Prediction.objects.filter(verifier=verifier).count() >= ANSWERED_BEFORE_KILL,
                "the first answers to be stored",
                first,
                tmp_path / "worker1.log",
            )
            wait_for(
                lambda: server.requests > ANSWERED_BEFORE_KILL,
                "requests to be held in flight",
                first,
                tmp_path / "worker1.log",
            )
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(15)
        finally:
            stop(first)
        stored_before = set(Prediction.objects.filter(verifier=verifier).values_list("item_id", flat=True))
        run.refresh_from_db()
        assert run.status == VerifierRun.Status.RUNNING  # killed: nothing could mark it otherwise
        assert len(stored_before) == ANSWERED_BEFORE_KILL  # held requests were never answered
        assert run.done < N_ITEMS

        # the chunk task in flight at the kill: nothing could mark it
        lost_task = DBTaskResult.objects.get(task_path__endswith="run_verifier_chunk", status=TaskResultStatus.RUNNING)

        server.release()
        started = time.monotonic()
        second = start_worker(tmp_path / "worker2.log")
        try:
            wait_for(
                lambda: VerifierRun.objects.get(pk=run.pk).generation == 1,
                "a new worker to resume the run by itself",
                second,
                tmp_path / "worker2.log",
                RECOVERY_DEADLINE,
            )
            print(f"verifier run resumed {time.monotonic() - started:.2f} s after the new worker started")
            lost_task.refresh_from_db()
            assert lost_task.status == TaskResultStatus.FAILED and lost_task.exception_class_path.endswith("WorkerLost")
            wait_for(
                lambda: not VerifierRun.objects.get(pk=run.pk).is_active,
                "the resumed run to end",
                second,
                tmp_path / "worker2.log",
            )
        finally:
            stop(second)

        run.refresh_from_db()
        assert run.status == VerifierRun.Status.SUCCEEDED, run.error_message
        assert (run.done, run.total, run.errors, run.generation) == (N_ITEMS, N_ITEMS, 0, 1)
        predictions = Prediction.objects.filter(verifier=verifier)
        assert predictions.count() == N_ITEMS
        assert not predictions.values("item_id", "cache_key").annotate(n=Count("pk")).filter(n__gt=1).exists()
        assert set(predictions.values_list("item_id", flat=True)) == {item.pk for item in items}
        assert not predictions.filter(label__isnull=True).exists()
        assert predictions.values("cache_key").distinct().count() == N_ITEMS  # one key per item's prompt

        preset = preset_for("veriscore_ternary")
        asked = {
            item.pk: server.prompts[server.prompt_key(render_item(preset, item_input(item.payload))[0][-1]["content"])]
            for item in items
        }
        assert all(asked[item_id] == 1 for item_id in stored_before), "a stored answer was asked for again"
        repeated = [item_id for item_id, n in asked.items() if n > 1]
        assert 0 < len(repeated) <= CONCURRENCY  # only the calls in flight at the kill were asked again
        assert server.requests == N_ITEMS + len(repeated)
