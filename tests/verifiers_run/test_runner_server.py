"""The runner against a real OpenAI-compatible server on 127.0.0.1 (tests/support/fake_openai.py)."""

from __future__ import annotations

import pytest
from django_tasks_db.models import DBTaskResult

from metaeval.models import Prediction, VerifierRun
from metaeval.verifiers.runner.orchestration import run_to_completion
from metaeval.verifiers.services import start_run
from metaeval.verifiers.tasks import run_verifier_chunk
from tests.verifiers_run.conftest import add_items, claim_item, llm_verifier

pytestmark = pytest.mark.django_db


def outcomes(verifier) -> dict[str, Prediction]:
    return {p.item.external_id: p for p in Prediction.objects.filter(verifier=verifier).select_related("item")}


def test_a_bad_day_at_the_endpoint_never_stops_the_run(claims_study, fake_server):
    fake_server.slow_seconds = 2.0
    add_items(
        claims_study,
        [
            claim_item("limited", "Always rate limited [[429]]."),
            claim_item("flaky", "Rate limited once [[429-once]]."),
            claim_item("broken", "Server error [[500]]."),
            claim_item("slow", "Slower than the timeout [[slow]]."),
            claim_item("garbage", "An answer without a verdict [[garbage]]."),
            claim_item("proxy", "Not JSON at all [[not-json]]."),
            claim_item("empty", "No choices [[no-choices]]."),
            claim_item("no", "A contradiction [[answer:Contradicted]]."),
        ],
    )
    verifier = llm_verifier(claims_study, fake_server.base_url, timeout=0.5, retries=1, concurrency=4)
    run = run_to_completion(start_run(verifier=verifier, enqueue=False))
    found = outcomes(verifier)
    assert (run.status, run.done, run.total) == ("succeeded", 14, 14)
    assert found["limited"].error.startswith("HTTP 429 rate limited from the endpoint after 1 retry")
    assert found["flaky"].label == "supported" and found["flaky"].error == ""
    assert found["broken"].error.startswith("HTTP 500 error from the endpoint after 1 retry")
    assert found["slow"].error == "timed out: no answer within 0.5 s (2 attempts)"
    assert (found["garbage"].label, found["garbage"].parse_status) == (None, "unparseable")
    assert "look into this further" in found["garbage"].raw_output
    assert found["proxy"].error.startswith("malformed response")
    assert found["empty"].error.endswith("has no choices")
    assert found["no"].label == "contradicted"
    assert all(found[f"c{n}"].label == "supported" for n in range(1, 7))
    assert (run.errors, run.unparseable) == (5, 1)
    assert found["c1"].tokens_in > 100 and found["c1"].tokens_out == 1  # the server's usage, stored
    assert run.tokens_in == sum(p.tokens_in for p in found.values())
    assert fake_server.statuses[429] == 3 and fake_server.statuses[500] == 2  # retries happened, inside the client


def test_concurrency_is_reached_and_never_exceeded(claims_study, fake_server):
    fake_server.latency = 0.05
    add_items(claims_study, [claim_item(f"p{n}", f"Parallel claim {n}.") for n in range(30)])
    verifier = llm_verifier(claims_study, fake_server.base_url, concurrency=5)
    run = run_to_completion(start_run(verifier=verifier, enqueue=False))
    assert run.done == 36 and fake_server.max_in_flight == 5


def test_a_rerun_sends_zero_requests(claims_study, fake_server):
    verifier = llm_verifier(claims_study, fake_server.base_url)
    run_to_completion(start_run(verifier=verifier, enqueue=False))
    seen = fake_server.requests
    again = run_to_completion(start_run(verifier=verifier, enqueue=False))
    assert seen == 6 and fake_server.requests == 6
    assert (again.status, again.cached, again.done) == ("succeeded", 6, 6)


def test_a_run_is_a_chain_of_chunk_tasks(claims_study, fake_server, settings, django_capture_on_commit_callbacks):
    settings.VERIFIER_CHUNK_SIZE = 4
    verifier = llm_verifier(claims_study, fake_server.base_url)
    with django_capture_on_commit_callbacks(execute=True):
        run = start_run(verifier=verifier)

    def queued():
        return DBTaskResult.objects.filter(task_path="metaeval.verifiers.tasks.run_verifier_chunk")

    assert [task.args_kwargs["args"] for task in queued()] == [[run.pk, 0]]
    first = run_verifier_chunk.call(run.pk, 0)  # what the worker does with that row
    assert first == {"ran": True, "more": True, "status": "running", "items": 4, "cached": 0, "asked": 4}
    assert queued().count() == 2  # the chunk queued its successor
    run.refresh_from_db()
    assert (run.done, run.status) == (4, "running") and run.heartbeat_at is not None
    last = run_verifier_chunk.call(run.pk, 0)
    assert (last["more"], last["status"], last["items"]) == (False, "succeeded", 2)
    assert queued().count() == 2
    stale = run_verifier_chunk.call(run.pk, 0)  # a duplicate or late task does nothing
    assert stale["ran"] is False and VerifierRun.objects.get(pk=run.pk).done == 6
    assert fake_server.requests == 6
