"""The API keeps its own contract: one JSON error shape, declared on every operation, checked by schemathesis."""

from __future__ import annotations

import json
import os
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


# --- schemathesis on every operation: valid and invalid requests ------------------------------

#: Examples per operation and generation mode (valid, then invalid): 53 operations, 1,900 requests (an
#: operation without parameters or body has no invalid ones) in about 20 s on SQLite, 26 s on PostgreSQL
#: (2 cores). CLAIMLAB_API_EXAMPLES=100 for a longer hunt.
EXAMPLES = int(os.environ.get("CLAIMLAB_API_EXAMPLES", 20))


@pytest.fixture
def verifier_and_run(loaded_verification_study, researcher):
    """A study's baseline verifiers and a stopped run, so that generated ids name real objects too."""
    from metaeval.verifiers.services import ensure_baselines, start_run, stop_run

    majority, _ = ensure_baselines(study=loaded_verification_study, created_by=researcher)
    run = stop_run(run=start_run(verifier=majority, created_by=researcher, enqueue=False))
    return majority, run


@pytest.fixture
def real_objects(loaded_verification_study, researcher, annotator, verifier_and_run, settings, tmp_path) -> dict:
    """One real object behind every path parameter of the schema (name -> value).

    Without them nearly every generated request would be a 404 and the code behind it never run.
    """
    from annotation.members.invites import create_invite
    from annotation.models import ImportJob, StudyMember
    from annotation.transfer.services.export_jobs import request_export
    from annotation.transfer.services.export_runner import run_export_job
    from annotation.workbench.services import claim_next

    study = loaded_verification_study
    settings.VAR_DIR = tmp_path
    export = request_export(study=study, file_format="csv", created_by=researcher)
    run_export_job(job_id=export.pk)  # a finished file behind the download route
    job = ImportJob.objects.create(study=study, what="items", file_name="f.jsonl", file_format="jsonl")
    assignment = claim_next(user=annotator, study=study)
    assert assignment is not None
    verifier, run = verifier_and_run
    return {
        "slug": study.slug,
        "external_id": "c-1",
        "id": job.pk,
        "export_id": export.pk,
        "member_id": StudyMember.objects.get(study=study, user=annotator).pk,
        "invite_id": (invite := create_invite(study=study, created_by=researcher)).invite.pk,
        "token": invite.token,
        "token_id": issue_token(user=researcher, name="another").token.pk,  # not the one the requests use
        "assignment_id": assignment.pk,
        "verifier_id": verifier.pk,
        "run_id": run.pk,
    }


#: Operations an annotator calls (their assignments); the researcher calls every other one.
ANNOTATOR_PATHS = ("/assignments/",)


@pytest.fixture
def prolific_fake(settings):
    """Prolific as the local fake (tests/support/fake_prolific.py), as every test has it: a generated token is
    refused there (400 prolific_refused), where a closed port would be Prolific unreachable (502)."""
    from tests.support.fake_prolific import FakeProlific

    with FakeProlific(token="a token no generated request has") as fake:
        settings.PROLIFIC_API_URL = fake.url
        yield fake


def test_every_operation_refuses_what_it_does_not_understand(
    wsgi_app, researcher, annotator, real_objects, prolific_fake
):
    """Valid and invalid generated requests (fixed seed) on every operation of the schema.

    No 5xx, every answer as the schema declares it (status, content type, body), and every invalid
    request refused with a 4xx: an unknown field, a number out of range, a wrong type. In half the
    cases the path names real objects (`real_objects`), as the user who may act on them; each case
    runs in a savepoint rolled back after it, so every case starts from the same objects.
    """
    from django.db import transaction
    from schemathesis import GenerationMode
    from schemathesis.core.parameters import ParameterLocation
    from schemathesis.specs.openapi.checks import negative_data_rejection

    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app)
    tokens = {user: issue_token(user=user).key for user in (researcher, annotator)}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 53, [op.label for op in operations]
    unknown = {p["name"] for op in operations for p in op.definition.raw.get("parameters", []) if p["in"] == "path"}
    assert unknown <= set(real_objects), f"no real object for {unknown - set(real_objects)}"
    failures: list[str] = []
    answers: dict[str, set[int]] = {}  # operation -> the status codes it answered
    cases = 0

    def run(operation, mode, checks) -> None:
        user = annotator if any(part in operation.path for part in ANNOTATOR_PATHS) else researcher
        headers = {"Authorization": f"Token {tokens[user]}"}

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case) -> None:
            nonlocal cases
            cases += 1
            negated_path = case.meta is not None and case.meta.is_negative_at(ParameterLocation.PATH)
            if case.path_parameters and cases % 2 and not negated_path:
                case.path_parameters.update({name: real_objects[name] for name in case.path_parameters})
            with transaction.atomic():
                try:
                    response = case.call_and_validate(headers=headers, checks=checks)
                finally:
                    transaction.set_rollback(True)
            answers.setdefault(operation.label, set()).add(response.status_code)

        check()

    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            checks = [*CHECKS, negative_data_rejection] if mode is GenerationMode.NEGATIVE else CHECKS
            try:
                run(operation, mode, checks)
            except Unsatisfiable:  # no request to this operation can be invalid (no parameters, no body)
                continue
            except (Exception, BaseExceptionGroup) as exc:  # every operation's first failure
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {exc}")
    assert cases >= len(operations) * EXAMPLES
    print(f"{cases} cases on {len(operations)} operations")
    print(*(f"{label}: {sorted(codes)}" for label, codes in sorted(answers.items())), sep="\n")
    unreached = sorted(label for label, codes in answers.items() if codes <= {404})
    assert not unreached, f"never reached a real object: {unreached}"
    assert not failures, f"{len(failures)} of {len(operations) * 2} operation runs failed:\n\n" + "\n\n".join(failures)


# --- schemathesis's stateful phase: sequences that follow the links it infers ----------------

#: Sequences and steps per sequence: about 1,100 requests in 8 s (SQLite), 10 s (PostgreSQL). A sequence
#: goes on where a response names what another operation takes (the study list's slugs, a new study's).
STATEFUL_SEQUENCES = int(os.environ.get("CLAIMLAB_API_SEQUENCES", 100))
STATEFUL_STEPS = 10


def test_sequences_of_operations_keep_the_contract(wsgi_app, researcher, annotator, real_objects):
    """schemathesis's stateful phase on every link it infers from the schema (drf-spectacular writes none).

    Schemathesis 4 infers links from the schema's names: `slug` of the study list feeds every
    `/studies/{slug}/...` route, a verifier's `id` its runs, `assignment.id` the submit/skip/flag
    routes... Each sequence (fixed seed) runs in a savepoint rolled back after it. The checks are
    the fuzzing test's (no 5xx, answers as declared, invalid input refused); the stateful ones about
    deletion (use after free) do not apply: a revoked invite and a deactivated member stay readable.
    """
    from django.db import transaction
    from hypothesis.stateful import run_state_machine_as_test
    from schemathesis.specs.openapi.checks import negative_data_rejection

    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app)
    tokens = {user: issue_token(user=user).key for user in (researcher, annotator)}
    steps: dict[str, set[int]] = {}

    class Machine(schema.as_state_machine()):
        def setup(self) -> None:
            self.savepoint = transaction.atomic()
            self.savepoint.__enter__()

        def teardown(self) -> None:
            transaction.set_rollback(True)
            self.savepoint.__exit__(None, None, None)

        def get_call_kwargs(self, case) -> dict:
            user = annotator if any(part in case.path for part in ANNOTATOR_PATHS) else researcher
            return {"headers": {"Authorization": f"Token {tokens[user]}"}}

        def validate_response(self, response, case, additional_checks=None, **kwargs) -> None:
            steps.setdefault(f"{case.method} {case.path}", set()).add(response.status_code)
            case.validate_response(response, checks=[*CHECKS, negative_data_rejection])

    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=STATEFUL_SEQUENCES,
            stateful_step_count=STATEFUL_STEPS,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    print(*(f"{label}: {sorted(codes)}" for label, codes in sorted(steps.items())), sep="\n")
    assert len(steps) >= 10, steps
