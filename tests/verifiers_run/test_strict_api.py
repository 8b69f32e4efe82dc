"""Strict API input on the verifier, run, prediction, report, planning and token routes (issue 31, finding 4).

What a route does not understand is refused by name (400), never dropped; every number is
range-checked with a message that names the field and the range; every refusal is the one error
shape (annotation/api_errors.py) that the schema declares; and a refusal gives the real reason.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from metaeval.models import Verifier
from metaeval.verifiers.services import create_verifier, ensure_baselines, start_run, stop_run
from metaeval.verifiers.services.verifiers import VerifierInvalid

from .conftest import add_labels, operator_endpoint

pytestmark = pytest.mark.django_db

LLM = {"name": "gpt", "kind": "llm", "preset": "veriscore_ternary", "model": "gpt-4o-mini", "endpoint": "test"}


@pytest.fixture
def endpoint():
    operator_endpoint("https://llm.example.org/v1")


@pytest.fixture
def api(client, researcher, claims_study):
    client.force_login(researcher)
    return client


@pytest.fixture
def schema(client):
    response = client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json")
    return json.loads(response.content)


def _post(client, url, body):
    return client.post(url, body, content_type="application/json")


def _patch(client, url, body):
    return client.patch(url, body, content_type="application/json")


def _refused(response, *fields: str) -> dict:
    """A 400 in the one error shape whose `fields` are exactly these."""
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and isinstance(body["detail"], str), body
    assert set(body["fields"]) == set(fields), body
    return body


# --- the finding's three examples ---------------------------------------------------------


def test_an_unknown_field_is_refused_by_name_and_nothing_is_stored(api, endpoint):
    response = _post(api, reverse("api-verifier-list", args=["claims"]), {**LLM, "api_key_env": "OPENAI_API_KEY"})
    body = _refused(response, "non_field_errors")
    assert "unknown field(s) 'api_key_env'" in body["detail"] and "expected name, kind" in body["detail"]
    assert not Verifier.objects.exists()


def test_a_huge_max_tokens_on_a_baseline_is_refused_naming_the_range(api, settings):
    response = _post(
        api,
        reverse("api-verifier-list", args=["claims"]),
        {"name": "b", "kind": "baseline_majority", "max_tokens": 10**20},
    )
    body = _refused(response, "max_tokens")
    assert body["fields"]["max_tokens"] == [
        f"must be between 1 and {settings.VERIFIER_MAX_TOKENS}, got a larger number"
    ]
    assert body["detail"].startswith("invalid input: max_tokens: must be between 1 and ")
    assert not Verifier.objects.exists()


def test_a_negative_concurrency_is_refused_for_what_it_is(api):
    url = reverse("api-verifier-list", args=["claims"])
    body = _refused(_post(api, url, {"name": "b", "kind": "baseline_majority", "concurrency": -5}), "concurrency")
    assert "already has a verifier" not in body["detail"]
    assert body["fields"]["concurrency"] == ["must be between 1 and 64, got a smaller number"]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("max_tokens", 10**20, "max_tokens: must be between 1 and 16384, got 100000000000000000000"),
        ("concurrency", -5, "concurrency: must be between 1 and 64, got -5"),
        ("timeout", 0, "timeout: must be between 0.001 and 600, got 0"),
        ("retries", 40_000, "retries: must be between 0 and 5, got 40000"),
        ("temperature", float("inf"), "temperature: must be between 0 and 2, got inf"),
    ],
)
def test_the_service_checks_a_baselines_numbers_too(claims_study, field, value, says):
    """Not only the API: the admin and the demo loader create verifiers through the same service."""
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(study=claims_study, name="b", kind="baseline_majority", **{field: value})
    assert str(refused.value) == says
    assert not Verifier.objects.exists()


def test_a_name_taken_is_still_named_as_such(api):
    url = reverse("api-verifier-list", args=["claims"])
    assert _post(api, url, {"name": "b", "kind": "baseline_majority"}).status_code == 201
    body = _refused(_post(api, url, {"name": "b", "kind": "baseline_overlap"}), "name")
    assert body["fields"]["name"] == ["the study already has a verifier named 'b'"]


# --- unknown fields everywhere -------------------------------------------------------------


def test_every_verifier_body_refuses_unknown_fields(api, claims_study):
    majority, _ = ensure_baselines(study=claims_study)
    detail = reverse("api-verifier-detail", args=["claims", majority.pk])
    body = _refused(_patch(api, detail, {"concurency": 2}), "non_field_errors")
    assert "'concurency'" in body["detail"]
    body = _refused(_patch(api, detail, {"kind": "llm"}), "non_field_errors")  # a kind never changes
    assert "'kind'" in body["detail"]
    runs = reverse("api-verifier-runs", args=["claims", majority.pk])
    body = _refused(_post(api, runs, {"limit": 2, "dry_run": True}), "non_field_errors")
    assert "'dry_run'" in body["detail"] and not majority.runs.exists()
    upload = SimpleUploadedFile("p.jsonl", b'{"item": "c1", "verifier": "x", "label": "supported"}\n')
    imported = api.post(reverse("api-prediction-import", args=["claims"]), {"file": upload, "overwrite": "1"})
    assert "'overwrite'" in _refused(imported, "non_field_errors")["detail"]


def test_the_schema_says_the_bodies_allow_no_other_properties(schema, settings):
    components = schema["components"]["schemas"]
    for name in ("VerifierWriteRequest", "PatchedVerifierUpdateRequest", "StartRunRequest", "TokenRequestRequest"):
        assert components[name]["additionalProperties"] is False, name
    write = components["VerifierWriteRequest"]["properties"]
    assert (write["max_tokens"]["minimum"], write["max_tokens"]["maximum"]) == (1, settings.VERIFIER_MAX_TOKENS)
    assert (write["concurrency"]["minimum"], write["concurrency"]["maximum"]) == (1, 64)
    assert (write["temperature"]["minimum"], write["temperature"]["maximum"]) == (0, 2)
    # Responses are not requests: a verifier as served may grow fields.
    assert "additionalProperties" not in components["Verifier"]


def test_the_schema_follows_the_operators_limits(client, settings):
    settings.VERIFIER_MAX_TOKENS = 2048
    response = client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json")
    write = json.loads(response.content)["components"]["schemas"]["VerifierWriteRequest"]["properties"]
    assert write["max_tokens"]["maximum"] == 2048


# --- numbers in range, messages naming field and range -------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("temperature", 2.5, "must be between 0 and 2"),
        ("temperature", -0.1, "must be between 0 and 2"),
        ("max_tokens", 0, "must be between 1 and 16384"),
        ("max_tokens", 16385, "must be between 1 and 16384"),
        ("concurrency", 65, "must be between 1 and 64"),
        ("timeout", 0, "must be between 0.001 and 600"),
        ("timeout", 601, "must be between 0.001 and 600"),
        ("retries", -1, "must be between 0 and 5"),
        ("retries", 6, "must be between 0 and 5"),
        ("price_input_per_1k", "-1", "must be between 0 and 999999.999999"),
        ("price_output_per_1k", "1000000", "must be between 0 and 999999.999999"),
    ],
)
def test_out_of_range_numbers_are_refused_naming_the_range(api, endpoint, field, value, says):
    response = _post(api, reverse("api-verifier-list", args=["claims"]), {**LLM, field: value})
    body = _refused(response, field)
    assert body["fields"][field][0].startswith(says), body
    assert body["detail"].startswith(f"invalid input: {field}: {says}")


def test_a_run_concurrency_and_limit_are_range_checked(api, claims_study):
    majority, _ = ensure_baselines(study=claims_study)
    runs = reverse("api-verifier-runs", args=["claims", majority.pk])
    body = _refused(_post(api, runs, {"concurrency": 0}), "concurrency")
    assert body["fields"]["concurrency"] == ["must be between 1 and 64, got a smaller number"]
    body = _refused(_post(api, runs, {"limit": 10**12}), "limit")
    assert body["fields"]["limit"] == ["must be between 1 and 2147483647, got a larger number"]


def test_report_and_plan_queries_refuse_what_they_do_not_know(api, claims_study):
    report = reverse("api-study-report", args=["claims"])
    body = _refused(api.get(report, {"by_domian": "true"}), "by_domian")
    assert "unknown query parameter 'by_domian'; this route takes by_domain" in body["detail"]
    assert _refused(api.get(report, {"k": ""}), "k")["fields"]["k"] == ["k is empty: give a value, or leave k out"]
    assert api.get(report, {"source_type": ""}).status_code == 200  # a list may be empty
    labels = reverse("api-study-labels", args=["claims"])
    _refused(api.get(labels, {"refrence": "gold"}), "refrence")
    plan = reverse("api-plan")
    assert _refused(api.get(plan, {"p": "nan"}), "p")["fields"]["p"] == ["p must be a finite number, got 'nan'"]
    _refused(api.get(plan, {"distribution": "0.5,inf"}), "distribution")
    _refused(api.get(plan, {"pp": "0.6"}), "pp")
    assert api.get(plan, {"p": "0.7"}).status_code == 200


# --- one error shape on every verifier route -------------------------------------------------


def _declared_400(schema: dict, path: str, method: str) -> dict:
    """The 400 body the schema declares for this operation, with its $refs in reach."""
    body = schema["paths"][path][method]["responses"]["400"]["content"]["application/json"]["schema"]
    return {**body, "components": schema["components"]}


def test_every_verifier_route_refuses_in_the_declared_error_shape(api, claims_study, schema, settings):
    add_labels(claims_study, [("c1", "w1", "supported"), ("c2", "w1", "contradicted")])
    majority, overlap = ensure_baselines(study=claims_study)
    run = stop_run(run=start_run(verifier=majority, enqueue=False))
    base = "/api/studies/{slug}"
    refusals = [
        # (path in the schema, method, response)
        (
            base + "/verifiers/",
            "post",
            _post(api, reverse("api-verifier-list", args=["claims"]), {"name": "x", "kind": "llm"}),
        ),
        (
            base + "/verifiers/",
            "post",
            _post(api, reverse("api-verifier-list", args=["claims"]), {"name": "x", "junk": 1}),
        ),
        (
            base + "/verifiers/",
            "post",
            _post(api, reverse("api-verifier-list", args=["claims"]), {"name": "x", "kind": "imported"}),
        ),
        (
            base + "/verifiers/{verifier_id}",
            "patch",
            _patch(api, reverse("api-verifier-detail", args=["claims", overlap.pk]), {"options": {"threshold": 2}}),
        ),
        (
            base + "/verifiers/{verifier_id}",
            "patch",
            _patch(api, reverse("api-verifier-detail", args=["claims", overlap.pk]), {"name": "baseline-majority"}),
        ),
        (
            base + "/verifiers/{verifier_id}/runs",
            "post",
            _post(api, reverse("api-verifier-runs", args=["claims", majority.pk]), {"concurrency": 999}),
        ),
        (base + "/runs/{run_id}/stop", "post", api.post(reverse("api-run-stop", args=["claims", run.pk]))),
    ]
    start_run(verifier=overlap, enqueue=False)
    refusals.append(
        (
            base + "/verifiers/{verifier_id}/runs",
            "post",
            _post(api, reverse("api-verifier-runs", args=["claims", overlap.pk]), {}),
        )
    )
    imports = reverse("api-prediction-import", args=["claims"])
    path = base + "/predictions/import"
    bad_line = SimpleUploadedFile("p.jsonl", b'{"item": "c1", "verifier": "x", "label": "nah"}\n')
    refusals.append((path, "post", api.post(imports, {"file": bad_line})))
    refusals.append((path, "post", api.post(imports, {"file": SimpleUploadedFile("p.xml", b"<x/>")})))
    settings.PREDICTION_UPLOAD_MAX_BYTES = 10
    refusals.append((path, "post", api.post(imports, {"file": SimpleUploadedFile("p.jsonl", b"{}" * 10)})))

    error = {**schema["components"]["schemas"]["Error"], "components": schema["components"]}
    for path, method, response in refusals:
        assert response.status_code == 400, (path, response.content)
        body = response.json()
        jsonschema.validate(body, _declared_400(schema, path, method))
        jsonschema.validate(body, error)  # every refusal is an Error, whatever else it adds
        assert isinstance(body["detail"], str) and body["code"] == "invalid", body
        assert "errors" not in body or path.endswith("/import"), body
    stop_refusal = refusals[6][2].json()
    assert stop_refusal == {"detail": f"run {run.pk} has already stopped; there is nothing to stop", "code": "invalid"}


def test_outsiders_annotators_and_anonymous_get_the_error_shape_too(client, claims_study, annotator, make_user):
    majority, _ = ensure_baselines(study=claims_study)
    url = reverse("api-verifier-detail", args=["claims", majority.pk])
    assert client.get(url).json()["code"] == "not_authenticated"
    client.force_login(annotator)
    assert client.get(url).json()["code"] == "permission_denied"
    client.force_login(make_user("olga"))
    response = client.patch(url, {"name": "y"}, content_type="application/json")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
