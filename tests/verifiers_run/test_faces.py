"""The faces of verifiers: API, the verifiers page, the CLI; and who may reach them (researchers only, 404 for outsiders)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django_tasks_db.models import DBTaskResult

from accounts.services import issue_token
from annotation.members.services import add_members
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from metaeval.models import Prediction, Verifier, VerifierRun
from metaeval.verifiers.services import create_verifier, start_run
from tests.conftest import jsonl
from tests.verifiers_run.conftest import llm_verifier, operator_endpoint

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.verifiers_run.urls")]
REPO = Path(__file__).resolve().parents[2]
NEW_MODULES = ("metaeval.verifiers.urls", "metaeval.verifiers.api_urls")
LLM = {
    "name": "gpt-4o-mini",
    "preset": "veriscore_ternary",
    "model": "gpt-4o-mini",
    "endpoint": "openai",
}


@pytest.fixture(autouse=True)
def openai_endpoint(endpoint_settings):
    """The operator endpoint the verifiers here name."""
    operator_endpoint("https://api.example.org/v1", name="openai", key_env="OPENAI_API_KEY")


# --- API -------------------------------------------------------------------------------------------


def test_api_defines_lists_and_changes_verifiers(client, researcher, claims_study):
    client.force_login(researcher)
    url = reverse("api-verifier-list", args=["claims"])
    created = client.post(url, LLM, content_type="application/json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["kind"], body["endpoint"], body["has_api_key"], body["concurrency"]) == ("llm", "openai", False, 8)
    assert "api_key" not in body and "api_key_encrypted" not in body
    baseline = client.post(
        url,
        {"name": "overlap", "kind": "baseline_overlap", "options": {"threshold": 0.3}},
        content_type="application/json",
    )
    assert baseline.status_code == 201 and baseline.json()["options"]["threshold"] == 0.3
    listed = client.get(url).json()
    assert [v["name"] for v in listed] == ["gpt-4o-mini", "overlap"] and listed[0]["n_predictions"] == 0
    detail = reverse("api-verifier-detail", args=["claims", body["id"]])
    changed = client.patch(detail, {"temperature": 0.2, "concurrency": 16}, content_type="application/json")
    assert changed.status_code == 200 and (changed.json()["temperature"], changed.json()["concurrency"]) == (0.2, 16)
    assert client.get(detail).json()["temperature"] == 0.2


def test_api_refuses_bad_definitions_field_by_field(client, researcher, claims_study):
    client.force_login(researcher)
    response = client.post(
        reverse("api-verifier-list", args=["claims"]),
        {**LLM, "endpoint": "", "base_url": "http://127.0.0.1:6379/v1", "api_key": "sk-live-0123456789abcdefghijklmn"},
        content_type="application/json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and set(body["fields"]) == {"base_url"}
    assert "does not allow researcher endpoints" in body["fields"]["base_url"][0]
    assert body["detail"].startswith("invalid input: base_url: ")
    assert "sk-live" not in response.content.decode()
    assert not Verifier.objects.exists()


def test_api_starts_polls_and_stops_a_run(client, researcher, claims_study, django_capture_on_commit_callbacks):
    client.force_login(researcher)
    verifier = create_verifier(study=claims_study, **LLM)
    runs_url = reverse("api-verifier-runs", args=["claims", verifier.pk])
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(runs_url, {"limit": 4}, content_type="application/json")
    assert started.status_code == 202, started.content
    run = started.json()
    assert (run["status"], run["total"], run["done"], run["active"]) == ("queued", 4, 0, True)
    assert DBTaskResult.objects.filter(task_path="metaeval.verifiers.tasks.run_verifier_chunk").count() == 1
    again = client.post(runs_url, {}, content_type="application/json")
    assert again.status_code == 400 and "already has a run in progress" in again.json()["detail"]
    status_url = reverse("api-run-detail", args=["claims", run["id"]])
    assert client.get(status_url).json()["status"] == "queued"
    assert [r["id"] for r in client.get(runs_url).json()] == [run["id"]]
    stopped = client.post(reverse("api-run-stop", args=["claims", run["id"]]))
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
    assert client.post(reverse("api-run-stop", args=["claims", run["id"]])).status_code == 400


def test_api_imports_predictions_all_or_nothing(client, researcher, claims_study):
    client.force_login(researcher)
    url = reverse("api-prediction-import", args=["claims"])
    good = SimpleUploadedFile("p.jsonl", b'{"item": "c1", "verifier": "elsewhere", "label": "supported", "score": 1}\n')
    assert client.post(url, {"file": good}).json() == {"created": 1, "updated": 0, "records": 1, "notes": []}
    bad = SimpleUploadedFile(
        "p.jsonl",
        b'{"item": "c2", "verifier": "elsewhere", "label": "supported"}\n'
        b'{"item": "c3", "verifier": "elsewhere", "label": "nah"}\n',
    )
    refused = client.post(url, {"file": bad})
    assert refused.status_code == 400
    assert refused.json()["errors"] == [
        {
            "line": 2,
            "field": "label",
            "message": "'nah' is not one of the study's labels (supported, contradicted, inconclusive)",
        }
    ]
    assert Prediction.objects.count() == 1


# --- the verifiers page ----------------------------------------------------------------------------


def test_the_page_lists_verifiers_and_runs_with_a_poller_and_no_inline_script(client, researcher, claims_study):
    verifier = create_verifier(study=claims_study, **{**LLM, "name": "<script>alert(1)</script>"})
    run = start_run(verifier=verifier, enqueue=False)
    client.force_login(researcher)
    page = client.get(reverse("verifiers:list", args=["claims"]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert f'data-run-status-url="/studies/claims/runs/{run.pk}/status.json"' in html
    assert re.findall(r"<script\b[^>]*>", html) == ['<script src="/static/js/verifier_runs.js" defer>']
    assert " style=" not in html and "<code>openai</code>" in html
    assert "script-src 'self';" in page["Content-Security-Policy"] + ";"


def test_the_page_defines_a_verifier_or_says_what_is_wrong(client, researcher, claims_study):
    client.force_login(researcher)
    url = reverse("verifiers:list", args=["claims"])
    form = {**LLM, "temperature": "0", "max_tokens": "256", "concurrency": "4", "timeout": "30", "retries": "2"}
    refused = client.post(url, {**form, "endpoint": "elsewhere"})
    assert refused.status_code == 400 and b"Select a valid choice" in refused.content
    assert not Verifier.objects.exists()
    refused = client.post(url, {**form, "preset": "factscore"})
    assert refused.status_code == 400 and b"is not one of the study&#x27;s labels" in refused.content
    created = client.post(url, form)
    assert created.status_code == 302
    assert Verifier.objects.get().max_tokens == 256


def test_the_page_starts_polls_and_stops_runs(client, researcher, claims_study, django_capture_on_commit_callbacks):
    client.force_login(researcher)
    client.post(reverse("verifiers:add_baselines", args=["claims"]))
    assert sorted(Verifier.objects.values_list("kind", flat=True)) == ["baseline_majority", "baseline_overlap"]
    overlap = Verifier.objects.get(kind="baseline_overlap")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("verifiers:start_run", args=["claims", overlap.pk]), {"limit": "2"})
    assert response.status_code == 302
    run = VerifierRun.objects.get()
    status = client.get(reverse("verifiers:run_status", args=["claims", run.pk])).json()
    assert (status["status"], status["total"], status["done"], status["active"]) == ("queued", 2, 0, True)
    refused = client.post(reverse("verifiers:start_run", args=["claims", overlap.pk]), {"limit": "0"}, follow=True)
    assert b"Limit must be a whole number" in refused.content
    client.post(reverse("verifiers:stop_run", args=["claims", run.pk]))
    assert VerifierRun.objects.get().status == "stopped"


def test_the_page_imports_predictions_and_lists_problems_by_line(client, researcher, claims_study):
    client.force_login(researcher)
    url = reverse("verifiers:import_predictions", args=["claims"])
    bad = SimpleUploadedFile("p.jsonl", b'{"item": "zz", "verifier": "v", "label": "supported"}\n')
    refused = client.post(url, {"file": bad})
    assert refused.status_code == 400 and b"no item &#x27;zz&#x27; in study" in refused.content
    good = SimpleUploadedFile("p.csv", b"item,verifier,label\nc1,v,supported\n")
    assert client.post(url, {"file": good}).status_code == 302
    assert Prediction.objects.get().label == "supported"


def test_the_poller_script_is_local_and_writes_text_only():
    script = (REPO / "static" / "js" / "verifier_runs.js").read_text()
    assert "data-run-status-url" in script and "textContent" in script
    assert "innerHTML" not in script and "eval(" not in script and "http" not in script.split("*/", 1)[1]


# --- access ----------------------------------------------------------------------------------------


def new_routes() -> list[tuple[str, URLPattern]]:
    """Every named route of the verifier URL modules (enumerated, so a route added later is covered)."""
    found = []

    def walk(patterns, namespace=None, inside=False):
        for entry in patterns:
            if isinstance(entry, URLResolver):
                name = getattr(entry.urlconf_name, "__name__", entry.urlconf_name)
                walk(entry.url_patterns, entry.namespace or namespace, inside or name in NEW_MODULES)
            elif inside and entry.name:
                found.append((f"{namespace}:{entry.name}" if namespace else entry.name, entry))

    walk(get_resolver("tests.verifiers_run.urls").url_patterns)
    return found


@pytest.fixture
def other_study(make_user, fake_server):
    """Study B with a verifier, a run and a prediction, and its researcher bob."""
    make_user("bob")
    study = create_study(slug="study-b", name="B", kind="verification")
    add_members(study=study, usernames=["bob"], role="researcher")
    import_items(study=study, stream=jsonl({"id": "b1", "claim": "B's claim."}), fmt="jsonl")
    verifier = llm_verifier(study, fake_server.base_url)
    run = start_run(verifier=verifier, enqueue=False)
    return study, verifier, run


def kwargs_for(pattern: URLPattern, slug: str, verifier: Verifier, run: VerifierRun) -> dict:
    names = set(pattern.pattern.regex.groupindex)
    values = {"slug": slug, "verifier_id": verifier.pk, "run_id": run.pk}
    assert names <= set(values), names
    return {name: values[name] for name in names}


def test_every_new_route_is_enumerated():
    names = {name for name, _ in new_routes()}
    assert {
        "verifiers:list",
        "verifiers:start_run",
        "verifiers:stop_run",
        "verifiers:run_status",
        "verifiers:add_pairwise_judge",
        "api-verifier-list",
        "api-verifier-runs",
        "api-run-detail",
        "api-run-stop",
    } <= names
    assert len(names) == 13


@pytest.mark.parametrize("method", ["get", "post", "patch"])
def test_outsiders_get_404_on_every_route(client, researcher, claims_study, other_study, method):
    _, verifier, run = other_study
    client.force_login(researcher)  # a researcher, but of another study
    checked = 0
    for name, pattern in new_routes():
        response = getattr(client, method)(reverse(name, kwargs=kwargs_for(pattern, "study-b", verifier, run)))
        if response.status_code == 405:
            continue
        assert response.status_code == 404, f"{method.upper()} {name} gave {response.status_code}"
        checked += 1
    assert checked >= {"get": 7, "post": 7, "patch": 1}[method]
    assert VerifierRun.objects.get(pk=run.pk).status == "queued" and not Verifier.objects.filter(study=claims_study)


def test_ids_of_another_study_are_404_under_your_own_slug(client, researcher, claims_study, other_study):
    _, verifier, run = other_study
    client.force_login(researcher)
    for name, pattern in new_routes():
        if {"verifier_id", "run_id"} & set(pattern.pattern.regex.groupindex):
            response = client.get(reverse(name, kwargs=kwargs_for(pattern, "claims", verifier, run)))
            assert response.status_code in (404, 405), f"{name} gave {response.status_code}"


def test_token_outsiders_and_annotators_are_refused(client, annotator, claims_study, other_study):
    _, verifier, run = other_study
    token = issue_token(user=annotator)
    auth = {"HTTP_AUTHORIZATION": f"Token {token.key}"}
    for name, pattern in new_routes():
        if not name.startswith("api-"):
            continue
        assert client.get(reverse(name, kwargs=kwargs_for(pattern, "study-b", verifier, run)), **auth).status_code in (
            404,
            405,
        )
        own = kwargs_for(pattern, "claims", verifier, run)
        if set(own) == {"slug"}:
            assert client.get(reverse(name, kwargs=own), **auth).status_code in (403, 405), name
    client.force_login(annotator)
    assert client.get(reverse("verifiers:list", args=["claims"])).status_code == 403
    assert client.post(reverse("verifiers:list", args=["claims"]), LLM).status_code == 403
    assert not Verifier.objects.filter(study=claims_study).exists()


def test_members_reach_every_route(client, make_user, other_study):
    _, verifier, run = other_study
    client.login(username="bob", password="pw-bob")
    for name, pattern in new_routes():
        response = client.get(reverse(name, kwargs=kwargs_for(pattern, "study-b", verifier, run)))
        assert response.status_code in (200, 405), f"GET {name} gave {response.status_code}"


# --- CLI -------------------------------------------------------------------------------------------


def test_run_verifier_dry_run_prints_a_prompt_and_sends_nothing(claims_study, fake_server):
    llm_verifier(claims_study, fake_server.base_url, api_key_env="DRY_RUN_NEEDS_NO_API_KEY")
    out = io.StringIO()
    call_command("run_verifier", "claims", "gpt", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "nothing is sent" in text and "--- system ---" in text and "Claim: Claim number 1 holds." in text
    assert fake_server.requests == 0 and not VerifierRun.objects.exists()


def test_run_verifier_runs_in_process_and_a_rerun_asks_nothing(claims_study, fake_server):
    llm_verifier(claims_study, fake_server.base_url, concurrency=8)
    out, err = io.StringIO(), io.StringIO()
    call_command("run_verifier", "claims", "gpt", "--limit", "3", "--concurrency", "2", stdout=out, stderr=err)
    assert "succeeded: 3 of 3 items, 0 from earlier runs, 0 errors" in out.getvalue()
    assert fake_server.requests == 3 and fake_server.max_in_flight <= 2
    assert VerifierRun.objects.get().effective_concurrency == 2
    out = io.StringIO()
    call_command("run_verifier", "claims", "gpt", stdout=out, stderr=io.StringIO())
    assert "6 of 6 items, 3 from earlier runs" in out.getvalue() and fake_server.requests == 6


def test_run_verifier_explains_what_is_missing(claims_study, fake_server, monkeypatch):
    monkeypatch.delenv("CLAIMLAB_TEST_ABSENT_API_KEY", raising=False)
    llm_verifier(claims_study, fake_server.base_url, api_key_env="CLAIMLAB_TEST_ABSENT_API_KEY")
    with pytest.raises(CommandError, match="CLAIMLAB_TEST_ABSENT_API_KEY is not set"):
        call_command("run_verifier", "claims", "gpt")
    with pytest.raises(CommandError, match=r"no verifier 'gpt-5' \(its verifiers: gpt\)"):
        call_command("run_verifier", "claims", "gpt-5")
    assert fake_server.requests == 0 and not VerifierRun.objects.exists()


def test_resume_stale_runs_command(claims_study):
    verifier = create_verifier(study=claims_study, name="b", kind="baseline_overlap")
    run = start_run(verifier=verifier, enqueue=False)
    VerifierRun.objects.filter(pk=run.pk).update(status="running", heartbeat_at=None)
    out = io.StringIO()
    call_command("resume_stale_runs", "--stale-after", "0", stdout=out)
    assert f"resumed run {run.pk} of 'b'" in out.getvalue() and "1 stale run(s) resumed" in out.getvalue()
    assert VerifierRun.objects.get(pk=run.pk).generation == 1


def test_the_api_schema_documents_the_routes_without_warnings():
    out, err = io.StringIO(), io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json", stdout=out, stderr=err)
    paths = json.loads(out.getvalue())["paths"]
    assert {
        "/api/studies/{slug}/verifiers/",
        "/api/studies/{slug}/verifiers/{verifier_id}/runs",
        "/api/studies/{slug}/runs/{run_id}",
        "/api/studies/{slug}/runs/{run_id}/stop",
    } <= set(paths)
    assert "202" in paths["/api/studies/{slug}/verifiers/{verifier_id}/runs"]["post"]["responses"]


def test_the_form_offers_a_preset_that_fits_the_study_labels(client, researcher, db):
    study = create_study(
        slug="wice-like", name="W", kind="verification", labels=["supported", "partially_supported", "not_supported"]
    )
    add_members(study=study, usernames=[researcher.username], role="researcher")
    client.force_login(researcher)
    html = client.get(reverse("verifiers:list", args=["wice-like"])).content.decode()
    assert '<option value="wice" selected>' in html
