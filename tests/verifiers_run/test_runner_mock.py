"""The runner against ``httpx2.MockTransport`` (openai 3.x uses httpx2): every failure ends up on a prediction."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest

from annotation.models import Item
from metaeval.models import Prediction, VerifierRun
from metaeval.verifiers.runner import jobs, orchestration
from metaeval.verifiers.runner.orchestration import run_to_completion
from metaeval.verifiers.services import start_run, stop_run, update_verifier
from tests.verifiers_run.conftest import add_items, claim_item, llm_verifier

pytestmark = pytest.mark.django_db
URL = "http://llm.test/v1"


def completion(text: str | None, *, prompt_tokens: int = 11, completion_tokens: int = 3, **extra) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        **extra,
    }


class Endpoint:
    """A MockTransport handler that records requests and answers by claim."""

    def __init__(self, answer=None):
        self.requests: list[httpx2.Request] = []
        self.answer = answer or (lambda claim, body: httpx2.Response(200, json=completion("Reasoning.\nSupported")))

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        body = json.loads(request.content)
        prompt = body["messages"][-1]["content"]
        return self.answer(prompt, body)

    @property
    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self)


def run(verifier, endpoint, **kwargs) -> VerifierRun:
    return run_to_completion(start_run(verifier=verifier, enqueue=False, **kwargs), transport=endpoint.transport)


def by_item(verifier) -> dict[str, Prediction]:
    return {p.item.external_id: p for p in Prediction.objects.filter(verifier=verifier).select_related("item")}


def test_answers_are_parsed_mapped_and_stored_with_usage_and_latency(claims_study, monkeypatch):
    monkeypatch.setenv("FAKE_LLM_API_KEY", "sk-test-123")
    endpoint = Endpoint(
        lambda claim, body: httpx2.Response(
            200,
            json=completion(
                "The results contradict it.\nContradicted" if "number 2" in claim else "Looks right.\n**Supported**"
            ),
        )
    )
    verifier = llm_verifier(claims_study, URL, api_key_env="FAKE_LLM_API_KEY", temperature=0.3, max_tokens=77)
    done = run(verifier, endpoint)
    assert (done.status, done.done, done.total, done.errors, done.unparseable) == ("succeeded", 6, 6, 0, 0)
    assert (done.tokens_in, done.tokens_out) == (66, 18)
    found = by_item(verifier)
    assert found["c2"].label == "contradicted" and found["c2"].raw_label == "contradicted"
    assert found["c1"].label == "supported" and found["c1"].parse_status == "ok"
    assert found["c1"].rationale == "Looks right." and "**Supported**" in found["c1"].raw_output
    assert all(p.latency_ms is not None and p.tokens_in == 11 and p.error == "" for p in found.values())
    request = endpoint.requests[0]
    body = json.loads(request.content)
    assert request.url.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test-123"
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("fake-model", 0.3, 77)
    assert body["messages"][0]["role"] == "system"


def test_a_local_endpoint_without_a_key_variable_gets_a_placeholder_key(claims_study):
    endpoint = Endpoint()
    run(llm_verifier(claims_study, URL, api_key_env=""), endpoint, limit=1)
    assert endpoint.requests[0].headers["authorization"] == "Bearer unused"


def test_a_missing_key_variable_fails_the_run_with_its_name_and_sends_nothing(claims_study, monkeypatch):
    monkeypatch.delenv("NOT_SET_ANYWHERE_API_KEY", raising=False)
    endpoint = Endpoint()
    done = run(llm_verifier(claims_study, URL, api_key_env="NOT_SET_ANYWHERE_API_KEY"), endpoint)
    assert done.status == "failed"
    assert "NOT_SET_ANYWHERE_API_KEY is not set" in done.error_message
    assert endpoint.requests == [] and not Prediction.objects.exists()


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (
            lambda: httpx2.Response(429, headers={"retry-after-ms": "1"}, json={"error": {"message": "Slow down"}}),
            "HTTP 429 rate limited from the endpoint after 1 retry: Slow down",
        ),
        (
            lambda: httpx2.Response(500, json={"error": {"message": "boom"}}),
            "HTTP 500 error from the endpoint after 1 retry: boom",
        ),
        (
            lambda: httpx2.Response(400, json={"error": {"message": "context too long"}}),
            "HTTP 400 error from the endpoint: context too long",
        ),
        (lambda: httpx2.Response(200, text="<html>bad gateway</html>"), "malformed response from the endpoint"),
        (
            lambda: httpx2.Response(200, json={**completion("x"), "choices": []}),
            "malformed response from the endpoint: the chat completion has no choices",
        ),
    ],
)
def test_a_failed_call_is_recorded_on_its_prediction_and_the_run_goes_on(claims_study, response, error):
    def answer(claim, body):
        return response() if "number 3" in claim else httpx2.Response(200, json=completion("Supported"))

    endpoint = Endpoint(answer)
    verifier = llm_verifier(claims_study, URL, retries=1)
    done = run(verifier, endpoint)
    found = by_item(verifier)
    assert (done.status, done.done, done.errors) == ("succeeded", 6, 1)
    assert found["c3"].label is None and found["c3"].parse_status == "" and found["c3"].error.startswith(error)
    assert all(found[f"c{n}"].label == "supported" for n in (1, 2, 4, 5, 6))
    retried = "429" in error or "500" in error
    assert len(endpoint.requests) == 5 + (2 if retried else 1)


def test_a_timeout_is_an_error_on_the_prediction(claims_study):
    def answer(claim, body):
        if "number 1" in claim:
            raise httpx2.ReadTimeout("read timed out")
        return httpx2.Response(200, json=completion("Supported"))

    verifier = llm_verifier(claims_study, URL, timeout=0.5, retries=0)
    done = run(verifier, Endpoint(answer))
    assert done.errors == 1 and by_item(verifier)["c1"].error == "timed out: no answer within 0.5 s (1 attempt)"


def test_an_endpoint_the_operator_removed_is_never_called(claims_study):
    endpoint = Endpoint()
    verifier = llm_verifier(claims_study, URL)
    type(verifier).objects.filter(pk=verifier.pk).update(endpoint="gone")  # e.g. removed from CLAIMLAB_ENDPOINTS
    done = run(verifier, endpoint)
    assert done.status == "failed" and "the endpoint 'gone' is no longer defined" in done.error_message
    assert endpoint.requests == []


def test_an_unreadable_answer_is_kept_but_never_counted_as_a_label(claims_study):
    verifier = llm_verifier(claims_study, URL)
    done = run(
        verifier,
        Endpoint(
            lambda claim, body: httpx2.Response(
                200,
                json=completion(
                    "It is hard to say." if "number 4" in claim else None if "number 5" in claim else "Inconclusive"
                ),
            )
        ),
    )
    found = by_item(verifier)
    assert (done.unparseable, done.errors) == (2, 0)
    assert (found["c4"].label, found["c4"].parse_status, found["c4"].raw_output) == (
        None,
        "unparseable",
        "It is hard to say.",
    )
    assert (found["c5"].label, found["c5"].parse_status) == (None, "unparseable")
    assert found["c1"].label == "inconclusive"


def test_a_rerun_sends_nothing_already_answered_and_retries_failures(claims_study):
    fail = {"on": True}

    def answer(claim, body):
        if fail["on"] and "number 6" in claim:
            return httpx2.Response(503, json={"error": {"message": "overloaded"}})
        return httpx2.Response(200, json=completion("Supported"))

    endpoint = Endpoint(answer)
    verifier = llm_verifier(claims_study, URL, retries=0)
    first = run(verifier, endpoint)
    assert (first.errors, len(endpoint.requests)) == (1, 6)
    fail["on"] = False
    second = run(verifier, endpoint)
    assert len(endpoint.requests) == 7  # only the failed item was asked again
    assert (second.status, second.cached, second.done, second.errors) == ("succeeded", 5, 6, 0)
    assert Prediction.objects.filter(verifier=verifier).count() == 6  # the error was replaced, not duplicated
    assert by_item(verifier)["c6"].run_id == second.pk and by_item(verifier)["c6"].error == ""
    third = run(verifier, endpoint)
    assert len(endpoint.requests) == 7 and third.cached == 6
    update_verifier(verifier=verifier, temperature=0.5)  # another parameter: another cache key
    run(verifier, endpoint, limit=2)
    assert len(endpoint.requests) == 9
    assert Prediction.objects.filter(verifier=verifier).count() == 8


def test_concurrency_bounds_the_requests_in_flight(claims_study):
    add_items(claims_study, [claim_item(f"x{n}", f"Extra claim {n}.") for n in range(14)])
    state = {"now": 0, "max": 0}

    async def answer(request: httpx2.Request) -> httpx2.Response:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.02)
        state["now"] -= 1
        return httpx2.Response(200, json=completion("Supported"))

    verifier = llm_verifier(claims_study, URL, concurrency=3)
    done = run_to_completion(start_run(verifier=verifier, enqueue=False), transport=httpx2.MockTransport(answer))
    assert done.done == 20 and state["max"] == 3


def test_evidence_level_presets_ask_once_per_passage_and_pool_the_verdicts(claims_study):
    add_items(
        claims_study,
        [
            {
                "id": "ev",
                "claim": "Paris is in France.",
                "evidence": [
                    {"text": "Paris is the capital of France."},
                    {"text": "France is in Europe."},
                    {"text": "Bananas are yellow."},
                ],
            }
        ],
    )
    answers = {
        "capital": "Rationale: says so.\nAnswer: Yes",
        "Europe": "Rationale: other topic.\nAnswer: No",
        "Bananas": "Rationale: off topic.\nAnswer: Irrelevant",
    }

    def answer(prompt, body):
        found = [text for key, text in answers.items() if key in prompt]
        return httpx2.Response(200, json=completion(found[0] if found else "Rationale: fine.\nAnswer: Yes"))

    endpoint = Endpoint(answer)
    verifier = llm_verifier(
        claims_study, URL, preset="facts_evidence", label_map={"supported": "supported", "unsupported": "contradicted"}
    )
    run(verifier, endpoint, limit=None)
    found = by_item(verifier)["ev"]
    assert len([r for r in endpoint.requests if b"Paris is in France" in r.content]) == 3
    assert (found.raw_label, found.label, found.score, found.parse_status) == ("unsupported", "contradicted", 0.5, "ok")
    assert found.rationale.startswith("[1] support: says so.")
    assert found.tokens_in == 33 and "--- passage 3 ---" in found.raw_output


def test_a_stop_cancels_the_calls_still_waiting(claims_study, monkeypatch):
    add_items(claims_study, [claim_item(f"s{n}", f"Stoppable claim {n}.") for n in range(40)])
    record = orchestration.record_predictions
    calls = {"n": 0}

    def record_then_stop(run_id, generation, outcomes):
        calls["n"] += 1
        if outcomes:
            stop_run(run=VerifierRun.objects.get(pk=run_id))
        return record(run_id, generation, outcomes)

    monkeypatch.setattr(orchestration, "record_predictions", record_then_stop)

    async def slow(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(0.05)
        return httpx2.Response(200, json=completion("Supported"))

    verifier = llm_verifier(claims_study, URL, concurrency=2)
    done = run_to_completion(start_run(verifier=verifier, enqueue=False), transport=httpx2.MockTransport(slow))
    stored = Prediction.objects.filter(verifier=verifier).count()
    assert done.status == "stopped" and done.finished_at is not None
    assert 0 < stored < 20 and done.done == stored  # stopped long before the 46 items were done
    assert Item.objects.filter(study=claims_study).count() == 46


def test_a_queued_run_that_is_stopped_never_starts(claims_study):
    endpoint = Endpoint()
    verifier = llm_verifier(claims_study, URL)
    queued = start_run(verifier=verifier, enqueue=False)
    stop_run(run=queued)
    done = run_to_completion(queued, transport=endpoint.transport)
    assert done.status == "stopped" and endpoint.requests == []


def test_an_item_whose_prompt_cannot_be_built_gets_an_error_and_the_others_go_on(claims_study, monkeypatch):
    build = jobs.build_job

    def fragile(spec, item_id, data):
        if "number 2" in data.claim:
            raise ValueError("evidence passage 3 is not text")
        return build(spec, item_id, data)

    monkeypatch.setattr(jobs, "build_job", fragile)
    endpoint = Endpoint()
    verifier = llm_verifier(claims_study, URL)
    done = run(verifier, endpoint)
    found = by_item(verifier)
    assert (done.status, done.done, done.errors, len(endpoint.requests)) == ("succeeded", 6, 1, 5)
    assert found["c2"].error == "could not build the prompt: evidence passage 3 is not text"
