"""Verifier runs log their start, chunks and end at info, failed calls at debug, and never an API key."""

from __future__ import annotations

import json
import logging

import httpx2
import pytest

from metaeval.models import VerifierRun
from metaeval.verifiers.runner import orchestration
from metaeval.verifiers.runner.orchestration import run_to_completion
from metaeval.verifiers.services import start_run
from tests.verifiers_run.conftest import llm_verifier

pytestmark = pytest.mark.django_db
URL = "http://llm.test/v1"
SECRET = "sk-live-do-not-log-0123456789"


def answer(request: httpx2.Request) -> httpx2.Response:
    prompt = json.loads(request.content)["messages"][-1]["content"]
    if "number 2" in prompt:
        return httpx2.Response(500, json={"error": {"message": "the model is overloaded"}})
    return httpx2.Response(
        200,
        json={
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "fake-model",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "Supported"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        },
    )


def test_a_run_logs_start_chunks_end_and_failed_calls_without_the_key(claims_study, monkeypatch, caplog):
    monkeypatch.setenv("FAKE_LLM_API_KEY", SECRET)
    verifier = llm_verifier(claims_study, URL, api_key_env="FAKE_LLM_API_KEY")
    with caplog.at_level(logging.DEBUG, logger="metaeval.verifiers"):
        run = run_to_completion(start_run(verifier=verifier, enqueue=False), transport=httpx2.MockTransport(answer))
    assert (run.status, run.errors) == ("succeeded", 1)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert f"verifier run {run.pk} of 'gpt' (study claims) started in process: 6 items" in info
    assert any(m.startswith(f"verifier run {run.pk}: chunk finished: 6 items, 0 cached, 6 asked") for m in info)
    assert any(m.startswith(f"verifier run {run.pk} succeeded: 6 of 6 items done") and "1 errors" in m for m in info)
    failed = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "failed" in r.getMessage()]
    assert len(failed) == 1 and "HTTP 500" in failed[0] and "the model is overloaded" in failed[0]
    assert SECRET not in caplog.text and all(SECRET not in str(r.args) for r in caplog.records)


def test_a_chunk_that_breaks_is_logged_with_its_traceback_and_fails_the_run(claims_study, monkeypatch, caplog):
    def broken(run, jobs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(orchestration, "split_cached", broken)
    verifier = llm_verifier(claims_study, URL)
    run = start_run(verifier=verifier, enqueue=False)
    with caplog.at_level(logging.INFO, logger="metaeval.verifiers"), pytest.raises(RuntimeError):
        run_to_completion(run, transport=httpx2.MockTransport(answer))
    [exception] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert exception.getMessage() == f"verifier run {run.pk}: chunk failed" and exception.exc_info is not None
    assert any(r.levelno == logging.WARNING and "the database went away" in r.getMessage() for r in caplog.records)
    assert VerifierRun.objects.get(pk=run.pk).status == "failed"
