"""The API keeps its own contract: one JSON error shape, declared on every operation, checked by schemathesis."""

from __future__ import annotations

import json
from unittest import mock

import pytest
import schemathesis
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.services import issue_token
from tests.conftest import verification_item

IMPORT_ROUTES = ("api-item-import", "api-annotation-import", "api-prediction-import")


def get_schema(client) -> dict:
    response = client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json")
    return json.loads(response.content)


@pytest.mark.django_db
def test_unmatched_api_paths_answer_json_and_pages_stay_html(client, researcher):
    client.force_login(researcher)
    response = client.get("/api/no/such/route")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "No such API route or object.", "code": "not_found"}
    page = client.get("/no/such/page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_an_api_server_error_answers_json_without_internals(client, researcher):
    client.force_login(researcher)
    client.raise_request_exception = False
    with mock.patch("annotation.studies.selectors.studies_with_role", side_effect=RuntimeError("secret internals")):
        response = client.get(reverse("api-study-list"))
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Server error; it has been logged.", "code": "server_error"}


@pytest.mark.django_db
def test_every_error_has_the_one_shape(client, researcher, verification_study):
    url = reverse("api-study-detail", args=["verif"])
    assert client.get(url).json() == {
        "detail": "Authentication credentials were not provided.",
        "code": "not_authenticated",
    }
    client.force_login(researcher)
    assert client.get(reverse("api-study-detail", args=["nope"])).json()["code"] == "not_found"
    response = client.post(reverse("api-export-create", args=["verif"]), {"format": "xml"}, "application/json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and set(body["fields"]) == {"format"} and "format" in body["detail"]
    response = client.get(reverse("api-annotation-export", args=["verif"]), {"format": "xml"})
    assert response.json() == {"detail": "format must be csv, jsonl or labelstudio", "code": "invalid"}


@pytest.mark.django_db
def test_an_export_request_with_unknown_fields_is_refused(client, researcher, verification_study):
    client.force_login(researcher)
    response = client.post(
        reverse("api-export-create", args=["verif"]), {"format": "csv", "junk": 1}, content_type="application/json"
    )
    assert response.status_code == 400 and "'junk'" in response.json()["detail"]


@pytest.mark.django_db
def test_report_flags_must_be_booleans(client, researcher, verification_study):
    client.force_login(researcher)
    url = reverse("api-study-report", args=["verif"])
    response = client.get(url, {"by_domain": "null"})
    assert response.status_code == 400
    assert response.json()["fields"] == {"by_domain": ["by_domain must be true or false, got 'null'"]}
    assert client.get(url, {"by_domain": "false", "binary": "1"}).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("route", IMPORT_ROUTES)
@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "multipart/form-data"])
def test_import_routes_check_membership_before_the_content_type(
    client, make_user, verification_study, route, content_type
):
    client.force_login(make_user("olga"))
    url = reverse(route, args=["verif"])
    if content_type == "multipart/form-data":
        upload = SimpleUploadedFile("x.jsonl", json.dumps(verification_item("c-1")).encode())
        response = client.post(url, {"file": upload})
    else:
        response = client.post(url, "{}", content_type=content_type)
    assert response.status_code == 404 and response.json()["code"] == "not_found"


@pytest.mark.django_db
def test_the_schema_declares_the_error_shape_and_nullable_counts(client, researcher):
    schema = get_schema(client)
    assert schema["components"]["schemas"]["Error"]["required"] == ["detail"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for code in ("400", "401", "403", "404"):
                assert code in operation["responses"], (method, path, code)
    assert schema["components"]["schemas"]["Study"]["properties"]["n_items"]["nullable"] is True
    assert schema["components"]["schemas"]["Item"]["properties"]["n_annotations"]["nullable"] is True


# --- schemathesis: generated requests against the WSGI app ------------------------------

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES_PER_OPERATION = 3


@pytest.fixture
def wsgi_app(db):
    """Django's WSGI app, called in-process; like the test client, a request leaves the test's transaction open."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield WSGIHandler()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_the_api_answers_as_its_schema_says(wsgi_app, researcher, loaded_verification_study):
    """A few generated requests per operation (fixed seed): no 5xx, and every answer as declared."""
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app)
    headers = {"Authorization": f"Token {issue_token(user=researcher).key}"}
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 26

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case) -> None:
            if case.method == "GET" and "slug" in (case.path_parameters or {}):
                case.path_parameters["slug"] = loaded_verification_study.slug  # real objects, not only 404s
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            check()
        except Exception as exc:  # every operation's first failure, not just the first operation's
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert not failures, "\n\n".join(failures)


# --- schemathesis on the metaeval and accounts operations: valid and invalid requests ---------

#: The operations of metaeval (reports, planning, verifiers, runs, prediction import) and accounts (tokens).
OWN_PATHS = ("/api/auth/", "/api/plan", "/report", "/verifiers/", "/runs/", "/predictions/")
#: Examples per operation and generation mode (valid, then invalid): 15 operations x 2 x 5, about 10 s.
OWN_EXAMPLES = 5


def _own(operation) -> bool:
    return any(part in operation.path for part in OWN_PATHS)


@pytest.fixture
def verifier_and_run(loaded_verification_study, researcher):
    """A study's baseline verifiers and a stopped run, so that generated ids name real objects too."""
    from metaeval.verifiers.services import ensure_baselines, start_run, stop_run

    majority, _ = ensure_baselines(study=loaded_verification_study, created_by=researcher)
    run = stop_run(run=start_run(verifier=majority, created_by=researcher, enqueue=False))
    return majority, run


def test_the_metaeval_and_accounts_operations_refuse_what_they_do_not_understand(
    wsgi_app, researcher, loaded_verification_study, verifier_and_run
):
    """Valid and invalid generated requests (fixed seed) on every metaeval and accounts operation.

    No 5xx, every answer as the schema declares it, and every invalid request refused (4xx):
    an unknown field, a number out of range, a wrong type.
    """
    from schemathesis import GenerationMode
    from schemathesis.specs.openapi.checks import negative_data_rejection

    verifier, run = verifier_and_run
    real = {"slug": loaded_verification_study.slug, "verifier_id": verifier.pk, "run_id": run.pk}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app)
    headers = {"Authorization": f"Token {issue_token(user=researcher).key}"}
    operations = [op for op in (result.ok() for result in schema.get_all_operations()) if _own(op)]
    assert len(operations) >= 15, [op.label for op in operations]
    failures: list[str] = []
    cases = 0

    def run(operation, mode, checks) -> None:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=OWN_EXAMPLES,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case) -> None:
            nonlocal cases
            cases += 1
            for name, value in real.items():  # real objects in half the cases, not only 404s
                if name in (case.path_parameters or {}) and cases % 2:
                    case.path_parameters[name] = value
            case.call_and_validate(headers=headers, checks=checks)

        check()

    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            checks = [*CHECKS, negative_data_rejection] if mode is GenerationMode.NEGATIVE else CHECKS
            try:
                run(operation, mode, checks)
            except Unsatisfiable:  # no request to this operation can be invalid (a list without parameters)
                continue
            except (Exception, BaseExceptionGroup) as exc:  # every operation's first failure
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {exc}")
    assert cases >= len(operations) * OWN_EXAMPLES
    assert not failures, f"{len(failures)} of {len(operations) * 2} operation runs failed:\n\n" + "\n\n".join(failures)
