"""Verifiers cannot be turned against the server (issue 10 §1).

A server key goes only to its own operator endpoint; a researcher endpoint
(only where the operator allows them) must pass the address policy when it is
saved and again when the runner connects (DNS rebinding); its key is stored
encrypted and appears nowhere: not in the database in clear, the API, the
admin, the pages, the report exports or the logs.
"""

from __future__ import annotations

import asyncio
import json
import logging

import httpcore2
import httpx2
import pytest
from django.db import connection
from django.urls import reverse

from metaeval.models import Prediction, VerifierRun
from metaeval.verifiers import addresses
from metaeval.verifiers.runner.guard import GuardedBackend
from metaeval.verifiers.runner.orchestration import run_to_completion
from metaeval.verifiers.services import create_verifier, start_run, update_verifier
from metaeval.verifiers.services.verifiers import VerifierInvalid
from tests.support.fake_openai import FakeOpenAI
from tests.support.settings_env import settings_under
from tests.support.streamed import streamed_body
from tests.verifiers_run.conftest import llm_verifier, operator_endpoint

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.verifiers_run.urls")]
SERVER_KEY = "sk-operator-server-key-0123456789"
OWN_KEY = "sk-researcher-own-key-9876543210"
FORBIDDEN = [
    "http://127.0.0.1:6379/v1",
    "http://[::1]:5432/v1",
    "http://169.254.169.254/latest",
    "http://metadata.google.internal/v1",
    "http://0x7f000001/v1",
    "http://2130706433/v1",
    "http://127.1/v1",
    "http://017700000001/v1",
    "http://10.1.2.3/v1",
    "http://172.16.0.1/v1",
    "http://192.168.1.10/v1",
    "http://100.64.0.1/v1",
    "http://0.0.0.0/v1",
    "http://224.0.0.1/v1",
    "http://240.0.0.1/v1",
    "http://[::ffff:127.0.0.1]/v1",
    "http://[fd00:ec2::254]/v1",
    "http://[fe80::1]/v1",
]
PUBLIC = "93.184.216.34"


def own_verifier(study, base_url: str, **overrides):
    fields = {
        "name": "own",
        "preset": "veriscore_ternary",
        "model": "fake-model",
        "base_url": base_url,
        "api_key": OWN_KEY,
        "concurrency": 2,
        "timeout": 5.0,
        "retries": 0,
    }
    return create_verifier(study=study, **{**fields, **overrides})


@pytest.fixture
def researcher_endpoints(endpoint_settings):
    endpoint_settings.VERIFIER_RESEARCHER_ENDPOINTS = True
    return endpoint_settings


# --- a server key goes only to its own endpoint ------------------------------------------------------


def test_the_server_key_goes_only_to_its_own_endpoint(claims_study, monkeypatch):
    monkeypatch.setenv("TEST_OPERATOR_API_KEY", SERVER_KEY)
    with FakeOpenAI() as own, FakeOpenAI() as other:
        verifier = llm_verifier(claims_study, own.base_url, api_key_env="TEST_OPERATOR_API_KEY")
        # Whatever else the row says (edited in the database), the URL comes from the operator's settings.
        type(verifier).objects.filter(pk=verifier.pk).update(base_url=other.base_url)
        run = run_to_completion(start_run(verifier=verifier, enqueue=False))
        assert run.status == "succeeded" and run.errors == 0
        assert own.authorizations == [f"Bearer {SERVER_KEY}"] * 6
        assert other.authorizations == []


def test_a_verifier_cannot_name_a_url_or_key_besides_an_operator_endpoint(claims_study, researcher_endpoints):
    operator_endpoint("https://api.openai.com/v1", name="openai", key_env="OPENAI_API_KEY")
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(
            study=claims_study,
            name="mix",
            preset="veriscore_ternary",
            model="m",
            endpoint="openai",
            base_url="https://evil.example/v1",
            api_key="x",
        )
    assert set(refused.value.errors) == {"base_url", "api_key"}
    with pytest.raises(VerifierInvalid, match="not an endpoint of this server; choose one of: openai"):
        create_verifier(study=claims_study, name="x", preset="veriscore_ternary", model="m", endpoint="nope")


def test_the_old_free_fields_are_gone(claims_study):
    operator_endpoint("https://api.openai.com/v1", name="openai")
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(
            study=claims_study,
            name="x",
            preset="veriscore_ternary",
            model="m",
            endpoint="openai",
            api_key_env="SECRET_KEY",
        )
    assert refused.value.errors == {"api_key_env": "unknown field"}


def test_models_and_concurrency_follow_the_operator_endpoint(claims_study):
    operator_endpoint("https://api.openai.com/v1", name="openai", models=["gpt-4o-mini"], max_concurrency=4)
    base = {"study": claims_study, "name": "x", "preset": "veriscore_ternary", "endpoint": "openai"}
    with pytest.raises(VerifierInvalid, match="offers gpt-4o-mini"):
        create_verifier(**base, model="gpt-4o")
    with pytest.raises(VerifierInvalid, match="between 1 and 4"):
        create_verifier(**base, model="gpt-4o-mini", concurrency=8)
    assert create_verifier(**base, model="gpt-4o-mini", concurrency=4).endpoint == "openai"


def test_requests_stay_within_the_operator_limits(claims_study, settings):
    operator_endpoint("https://api.openai.com/v1", name="openai")
    settings.VERIFIER_MAX_TIMEOUT, settings.VERIFIER_MAX_RETRIES, settings.VERIFIER_MAX_TOKENS = 30.0, 1, 100
    base = {"study": claims_study, "name": "x", "preset": "veriscore_ternary", "model": "m", "endpoint": "openai"}
    for field, value in (("timeout", 31), ("retries", 2), ("max_tokens", 101), ("concurrency", 65)):
        with pytest.raises(VerifierInvalid) as refused:
            create_verifier(**base, **{field: value})
        assert field in refused.value.errors


# --- researcher endpoints: off by default, address policy at save time --------------------------------


def test_researcher_endpoints_are_refused_unless_the_operator_allows_them(claims_study):
    with pytest.raises(VerifierInvalid, match="does not allow researcher endpoints"):
        own_verifier(claims_study, "https://llm.example.org/v1")


@pytest.mark.parametrize("url", FORBIDDEN)
def test_each_forbidden_address_form_is_refused_at_save_time(claims_study, researcher_endpoints, url):
    with pytest.raises(VerifierInvalid) as refused:
        own_verifier(claims_study, url)
    message = refused.value.errors["base_url"]
    assert "researcher endpoints must be public" in message or "metadata host" in message


def test_a_name_that_resolves_to_loopback_is_refused_at_save_time(claims_study, researcher_endpoints, monkeypatch):
    monkeypatch.setattr(addresses, "resolve", lambda host, port: [PUBLIC, "127.0.0.1"])
    with pytest.raises(VerifierInvalid, match=r"llm.example.org \(127.0.0.1\) is a loopback address"):
        own_verifier(claims_study, "https://llm.example.org/v1")


def test_the_operator_allow_list_admits_an_address(claims_study, researcher_endpoints):
    researcher_endpoints.VERIFIER_ADDRESS_ALLOW = ["127.0.0.0/8"]
    assert own_verifier(claims_study, "http://127.0.0.1:8001/v1").base_url == "http://127.0.0.1:8001/v1"


# --- ... and again at connect time ------------------------------------------------------------------


@pytest.mark.parametrize("url", FORBIDDEN)
def test_each_forbidden_address_form_is_refused_at_connect_time(researcher_endpoints, url):
    host = httpx2.URL(url).host

    async def connect() -> None:
        await GuardedBackend().connect_tcp(host, 80, timeout=1)

    with pytest.raises(httpcore2.ConnectError, match="refused by the address policy"):
        asyncio.run(connect())


def test_dns_rebinding_is_refused_when_the_runner_connects(claims_study, researcher_endpoints, monkeypatch, caplog):
    with FakeOpenAI() as server:
        port = server.port
        monkeypatch.setattr(addresses, "resolve", lambda host, port: [PUBLIC])  # at save time: public
        verifier = own_verifier(claims_study, f"http://llm.example.org:{port}/v1")
        monkeypatch.setattr(addresses, "resolve", lambda host, port: ["127.0.0.1"])  # at connect time: loopback
        with caplog.at_level(logging.DEBUG):
            run = run_to_completion(start_run(verifier=verifier, enqueue=False))
        assert server.requests == 0 and server.authorizations == []
    assert (run.status, run.errors) == ("succeeded", 6)
    errors = set(Prediction.objects.filter(run=run).values_list("error", flat=True))
    assert len(errors) == 1
    (error,) = errors
    assert "refused by the address policy" in error and "loopback" in error and len(error) <= 1000
    assert OWN_KEY not in caplog.text


def test_redirects_are_not_followed(claims_study, researcher_endpoints, monkeypatch):
    monkeypatch.setattr(addresses, "resolve", lambda host, port: [PUBLIC])
    verifier = own_verifier(claims_study, "https://llm.example.org/v1")
    seen: list[str] = []

    def redirect(request: httpx2.Request) -> httpx2.Response:
        seen.append(str(request.url))
        return httpx2.Response(307, headers={"location": "http://127.0.0.1:6379/v1/chat/completions"})

    run = run_to_completion(
        start_run(verifier=verifier, limit=1, enqueue=False), transport=httpx2.MockTransport(redirect)
    )
    assert seen == ["https://llm.example.org/v1/chat/completions"]
    assert run.errors == 1 and "HTTP 307" in Prediction.objects.get(run=run).error


# --- the researcher's key: sent to its own endpoint, stored encrypted, shown nowhere --------------------


def test_an_allow_listed_researcher_endpoint_gets_its_own_key_and_no_server_key(
    claims_study, researcher_endpoints, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    researcher_endpoints.VERIFIER_ADDRESS_ALLOW = ["127.0.0.1/32"]
    with FakeOpenAI() as server:
        verifier = own_verifier(claims_study, server.base_url)
        run = run_to_completion(start_run(verifier=verifier, enqueue=False))
        assert run.status == "succeeded" and run.errors == 0
        assert server.authorizations == [f"Bearer {OWN_KEY}"] * 6


def test_the_key_is_encrypted_at_rest_and_shown_nowhere(
    client, researcher, claims_study, researcher_endpoints, monkeypatch, caplog, make_user
):
    monkeypatch.setattr(addresses, "resolve", lambda host, port: [PUBLIC])
    client.force_login(researcher)
    with caplog.at_level(logging.DEBUG):
        created = client.post(
            reverse("api-verifier-list", args=["claims"]),
            {
                "name": "own",
                "preset": "veriscore_ternary",
                "model": "m",
                "base_url": "https://llm.example.org/v1",
                "api_key": OWN_KEY,
            },
            content_type="application/json",
        )
    assert created.status_code == 201, created.content
    assert created.json()["has_api_key"] is True and OWN_KEY not in created.content.decode()
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM metaeval_verifier")
        rows = cursor.fetchall()
    assert rows and OWN_KEY not in repr(rows)
    pages = [
        client.get(reverse("api-verifier-list", args=["claims"])),
        client.get(reverse("api-verifier-detail", args=["claims", created.json()["id"]])),
        client.get(reverse("verifiers:list", args=["claims"])),
    ]
    staff = make_user("admin-user", is_staff=True, is_superuser=True)
    client.force_login(staff)
    pages.append(client.get(reverse("admin:metaeval_verifier_change", args=[created.json()["id"]])))
    pages.append(client.get(reverse("admin:metaeval_verifier_changelist")))
    for page in pages:
        assert page.status_code == 200, page
        assert OWN_KEY not in page.content.decode()
    assert OWN_KEY not in caplog.text


def test_a_new_key_replaces_the_old_and_an_edit_without_one_keeps_it(claims_study, researcher_endpoints, monkeypatch):
    monkeypatch.setattr(addresses, "resolve", lambda host, port: [PUBLIC])
    verifier = own_verifier(claims_study, "https://llm.example.org/v1")
    stored = verifier.api_key_encrypted
    assert stored and OWN_KEY not in stored
    assert update_verifier(verifier=verifier, temperature=0.5).api_key_encrypted == stored
    assert update_verifier(verifier=verifier, api_key="other").api_key_encrypted not in ("", stored)
    operator_endpoint("https://api.openai.com/v1", name="openai")
    moved = update_verifier(verifier=verifier, endpoint="openai", base_url="")
    assert (moved.endpoint, moved.api_key_encrypted) == ("openai", "")


def test_a_researcher_endpoint_stops_running_when_the_operator_turns_them_off(
    claims_study, researcher_endpoints, monkeypatch
):
    monkeypatch.setattr(addresses, "resolve", lambda host, port: [PUBLIC])
    verifier = own_verifier(claims_study, "https://llm.example.org/v1")
    researcher_endpoints.VERIFIER_RESEARCHER_ENDPOINTS = False
    run = run_to_completion(start_run(verifier=verifier, enqueue=False))
    assert run.status == VerifierRun.Status.FAILED and "does not allow researcher endpoints" in run.error_message


def test_a_report_export_holds_no_key(client, researcher, claims_study, researcher_endpoints, monkeypatch):
    monkeypatch.setattr(addresses, "resolve", lambda host, port: [PUBLIC])
    own_verifier(claims_study, "https://llm.example.org/v1")
    client.force_login(researcher)
    for fmt in ("json", "csv", "html"):
        response = client.get(reverse("metaeval:report_download", args=["claims", fmt]))
        assert response.status_code == 200
        assert OWN_KEY not in streamed_body(response).decode()


# --- settings -------------------------------------------------------------------------------------


def test_endpoints_come_from_claimlab_endpoints(tmp_path):
    value = json.dumps(
        {"openai": {"base_url": "https://api.openai.com/v1/", "key_env": "OPENAI_API_KEY", "models": ["gpt-4o-mini"]}}
    )
    got = settings_under({"CLAIMLAB_ENDPOINTS": value}, tmp_path, unset=["CLAIMLAB_ENDPOINTS"])
    assert got["VERIFIER_ENDPOINTS"] == {
        "openai": {
            "base_url": "https://api.openai.com/v1",
            "key_env": "OPENAI_API_KEY",
            "models": ["gpt-4o-mini"],
            "max_concurrency": None,
        }
    }
    debug = settings_under({}, tmp_path, unset=["CLAIMLAB_ENDPOINTS", "CLAIMLAB_ENDPOINT_ALLOW"])
    assert debug["VERIFIER_ENDPOINTS"] == {"local": {"base_url": "http://127.0.0.1:11434/v1", "key_env": ""}}
    assert debug["VERIFIER_RESEARCHER_ENDPOINTS"] is False and debug["VERIFIER_ADDRESS_ALLOW"] == ["127.0.0.0/8", "::1"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "not valid JSON"),
        ('["openai"]', "must be a JSON object"),
        ('{"Open AI": {"base_url": "https://x/v1"}}', "lower-case"),
        ('{"x": {"base_url": "ftp://x/v1"}}', "base_url must be an http"),
        ('{"x": {"base_url": "https://x/v1", "key_env": "sk-123"}}', "key_env must be the NAME"),
        ('{"x": {"base_url": "https://x/v1", "models": "gpt"}}', "models must be a list"),
        ('{"x": {"base_url": "https://x/v1", "max_concurrency": 0}}', "max_concurrency"),
        ('{"x": {"base_url": "https://x/v1", "url": "y"}}', "unknown field"),
    ],
)
def test_a_bad_claimlab_endpoints_stops_the_server_with_a_clear_message(tmp_path, value, message):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match=message):
        settings_under({"CLAIMLAB_ENDPOINTS": value}, tmp_path, unset=["CLAIMLAB_ENDPOINTS"])
