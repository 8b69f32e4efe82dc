"""Starting, stopping and resuming runs: one live run per verifier, orphans resumed, counts never doubled."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from annotation.errors import ServiceError
from annotation.studies.services import create_study
from metaeval.models import VerifierRun
from metaeval.verifiers.runner.chunks import count_cached
from metaeval.verifiers.services import create_verifier, import_predictions, resume_stale_runs, start_run, stop_run
from tests.conftest import jsonl
from tests.verifiers_run.conftest import llm_verifier

pytestmark = pytest.mark.django_db
URL = "http://127.0.0.1:9/v1"


def age(run: VerifierRun, seconds: float) -> None:
    VerifierRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))
    run.refresh_from_db()


def chunk_tasks() -> list[list[int]]:
    return [
        task.args_kwargs["args"]
        for task in DBTaskResult.objects.filter(task_path="metaeval.verifiers.tasks.run_verifier_chunk")
    ]


def test_start_queues_one_chunk_task_after_commit(claims_study, django_capture_on_commit_callbacks):
    verifier = llm_verifier(claims_study, URL)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        run = start_run(verifier=verifier, limit=4, concurrency=2)
    assert len(callbacks) == 1 and chunk_tasks() == [[run.pk, 0]]
    assert (run.status, run.total, run.limit, run.effective_concurrency) == ("queued", 4, 4, 2)
    assert run.params["model"] == "fake-model" and "api_key" not in str(run.params).replace("api_key_env", "")


def test_a_live_run_blocks_a_second_one(claims_study):
    verifier = llm_verifier(claims_study, URL)
    start_run(verifier=verifier, enqueue=False)
    with pytest.raises(ServiceError, match="already has a run in progress"):
        start_run(verifier=verifier, enqueue=False)


@pytest.mark.parametrize("limit", [0, -3, 2.5, True])
def test_a_bad_limit_is_refused(claims_study, limit):
    with pytest.raises(ServiceError, match="limit must be a whole number"):
        start_run(verifier=llm_verifier(claims_study, URL), limit=limit, enqueue=False)
    assert not VerifierRun.objects.exists()


def test_nothing_to_run(claims_study, db):
    empty = create_study(slug="empty", name="Empty", kind="verification")
    with pytest.raises(ServiceError, match="has no items"):
        start_run(verifier=create_verifier(study=empty, name="b", kind="baseline_overlap"), enqueue=False)
    import_predictions(
        study=claims_study, stream=jsonl({"item": "c1", "verifier": "elsewhere", "label": "supported"}), fmt="jsonl"
    )
    imported = claims_study.verifiers.get(name="elsewhere")
    with pytest.raises(ServiceError, match="imported predictions; there is nothing to run"):
        start_run(verifier=imported, enqueue=False)


def test_starting_a_verifier_whose_run_is_orphaned_resumes_that_run(
    claims_study, settings, django_capture_on_commit_callbacks
):
    settings.VERIFIER_STALE_SECONDS = 60.0
    verifier = llm_verifier(claims_study, URL)
    run = start_run(verifier=verifier, enqueue=False)
    VerifierRun.objects.filter(pk=run.pk).update(status="running")
    age(run, 61)
    with django_capture_on_commit_callbacks(execute=True):
        again = start_run(verifier=verifier)
    assert again.pk == run.pk and again.generation == 1
    assert chunk_tasks() == [[run.pk, 1]]
    assert VerifierRun.objects.count() == 1


def test_stop(claims_study, settings):
    settings.VERIFIER_STALE_SECONDS = 60.0
    verifier = llm_verifier(claims_study, URL)
    queued = start_run(verifier=verifier, enqueue=False)
    assert stop_run(run=queued).status == "stopped"  # no worker has it: stopped at once
    with pytest.raises(ServiceError, match="has already stopped"):
        stop_run(run=queued)
    running = start_run(verifier=verifier, enqueue=False)
    VerifierRun.objects.filter(pk=running.pk).update(status="running", heartbeat_at=timezone.now())
    assert stop_run(run=running).status == "stopping"  # its worker stops after the calls in flight
    assert stop_run(run=running).status == "stopping"
    age(running, 120)
    assert stop_run(run=running).status == "stopped"  # its worker is dead: nobody else would


def test_resume_stale_runs_only_touches_orphans(claims_study, django_capture_on_commit_callbacks):
    fresh = start_run(verifier=llm_verifier(claims_study, URL, name="fresh"), enqueue=False)
    orphan = start_run(verifier=llm_verifier(claims_study, URL, name="orphan"), enqueue=False)
    stopping = start_run(verifier=llm_verifier(claims_study, URL, name="stopping"), enqueue=False)
    VerifierRun.objects.filter(pk=fresh.pk).update(status="running", heartbeat_at=timezone.now())
    VerifierRun.objects.filter(pk__in=[orphan.pk, stopping.pk]).update(status="running")
    VerifierRun.objects.filter(pk=stopping.pk).update(status="stopping")
    age(orphan, 600)
    age(stopping, 600)
    with django_capture_on_commit_callbacks(execute=True):
        resumed = resume_stale_runs(older_than=timedelta(seconds=300))
    assert [run.pk for run in resumed] == [orphan.pk]
    assert chunk_tasks() == [[orphan.pk, 1]]
    states = dict(VerifierRun.objects.values_list("pk", "status"))
    assert states == {fresh.pk: "running", orphan.pk: "running", stopping.pk: "stopped"}


def test_items_answered_before_a_run_are_counted_once_even_when_a_chunk_is_redone(claims_study):
    run = start_run(verifier=llm_verifier(claims_study, URL), enqueue=False)
    count_cached(run, 3, upto=100)
    count_cached(run, 3, upto=100)  # the same chunk, redone after a crash
    count_cached(run, 2, upto=200)
    run.refresh_from_db()
    assert (run.cached, run.done, run.counted_cursor) == (5, 5, 200)
