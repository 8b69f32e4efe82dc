"""The API refuses what it does not understand (issue 31): unknown fields and query parameters, values
of another JSON type, numbers out of range, bodies of another media type; each a 4xx in the one
error shape naming what was wrong, never a guess, a silent drop or a 500.

The schemathesis tests (test_api_contract.py) find such answers by generating requests; these pin
down each one found, and the rules the schema states.
"""

from __future__ import annotations

import json
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from accounts.services import issue_token
from annotation.models import Study
from annotation.workbench.services import claim_next
from tests.conftest import verification_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, researcher, loaded_verification_study):
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {issue_token(user=researcher).key}"
    return client


@pytest.fixture
def annotating(annotator, loaded_verification_study):
    """The annotator's own client and an assignment they hold."""
    client = Client(HTTP_AUTHORIZATION=f"Token {issue_token(user=annotator).key}")
    assignment = claim_next(user=annotator, study=loaded_verification_study)
    assert assignment is not None
    return client, assignment


def post(client, url, body, method="post"):
    return getattr(client, method)(url, json.dumps(body), content_type="application/json")


def refused(response, *fields: str) -> dict:
    """A 400 in the one error shape whose `fields` are exactly these."""
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and isinstance(body["detail"], str), body
    assert set(body["fields"]) == set(fields), body
    return body


#: Every JSON request body of the annotation routes (the verifier and token bodies: verifiers_run/,
#: accounts/), with a valid part to which the test adds an unknown field.
JSON_BODIES = [
    ("post", "api-study-list", [], {"slug": "s2", "name": "S", "kind": "verification"}),
    ("patch", "api-study-detail", ["verif"], {"name": "S"}),
    ("post", "api-study-status", ["verif"], {"status": "paused"}),
    ("post", "api-study-duplicate", ["verif"], {"slug": "copy"}),
    ("post", "api-member-list", ["verif"], {"usernames": ["newbie"]}),
    ("post", "api-invite-list", ["verif"], {"max_uses": 2}),
    ("post", "api-export-create", ["verif"], {"format": "csv"}),
    ("patch", "api-adjudication-settings", ["verif"], {"adjudication_audit_share": 0.5}),
    ("post", "api-adjudication-item", ["verif", "c-1"], {"label": "supported"}),
]


@pytest.mark.parametrize(("method", "route", "args", "body"), JSON_BODIES, ids=[row[1] for row in JSON_BODIES])
def test_every_json_body_refuses_an_unknown_field_by_name(api, method, route, args, body):
    response = post(api, reverse(route, args=args), {**body, "colour": "red"}, method)
    detail = refused(response, "non_field_errors")["detail"]
    assert "unknown field(s) 'colour'" in detail and "expected" in detail


def test_the_annotating_bodies_refuse_unknown_fields_nested_ones_too(annotating):
    client, assignment = annotating
    submit = reverse("api-assignment-submit", args=[assignment.pk])
    assert "'lable'" in refused(post(client, submit, {"lable": "supported"}), "non_field_errors")["detail"]
    evidence = [{"index": 0, "judgement": "supports", "usefull": True}]
    body = refused(post(client, submit, {"label": "supported", "evidence": evidence}), "evidence.0.non_field_errors")
    assert "'usefull'" in body["detail"]
    flag = reverse("api-assignment-flag", args=[assignment.pk])
    assert "'why'" in refused(post(client, flag, {"reason": "broken", "why": "x"}), "non_field_errors")["detail"]


def test_the_upload_routes_refuse_unknown_fields(api):
    upload = SimpleUploadedFile("items.jsonl", json.dumps(verification_item("c-9")).encode())
    response = api.post(reverse("api-item-import", args=["verif"]), {"file": upload, "updte": "true"})
    assert "'updte'" in refused(response, "non_field_errors")["detail"]
    upload = SimpleUploadedFile("adj.jsonl", b"{}\n")
    response = api.post(reverse("api-adjudication-import", args=["verif"]), {"file": upload, "fromat": "csv"})
    assert "'fromat'" in refused(response, "non_field_errors")["detail"]


@pytest.mark.parametrize(
    ("route", "args", "body", "field", "says"),
    [
        ("api-study-list", [], {"slug": "s2", "name": "S", "kind": "verification", "annotators_per_item": "3"},
         "annotators_per_item", "must be a whole number, got a string"),
        ("api-study-duplicate", ["verif"], {"slug": "copy", "copy_items": "yes"}, "copy_items",
         "must be true or false, got a string"),
        ("api-study-duplicate", ["verif"], {"slug": 7}, "slug", "must be a string, got a number"),
        ("api-member-list", ["verif"], {"usernames": ["ok", 5]}, "usernames", "must be a string, got a number"),
        ("api-invite-list", ["verif"], {"max_uses": 2.0}, "max_uses", "must be a whole number, got a number"),
        ("api-export-create", ["verif"], {"format": ["csv"]}, "format", "must be a string, got an array"),
    ],
)  # fmt: skip
def test_a_json_value_of_another_type_is_refused_not_converted(api, route, args, body, field, says):
    response = post(api, reverse(route, args=args), body)
    assert refused(response, field)["fields"][field] == [says]


def test_an_annotation_of_another_type_is_refused(annotating):
    client, assignment = annotating
    flag = reverse("api-assignment-flag", args=[assignment.pk])
    assert refused(post(client, flag, {"reason": 5}), "reason")["fields"]["reason"] == [
        "must be a string, got a number"
    ]
    submit = reverse("api-assignment-submit", args=[assignment.pk])
    refused(post(client, submit, {"label": "supported", "next": "true"}), "next")
    refused(post(client, submit, {"label": "supported", "active_ms": "1200"}), "active_ms")


def test_numbers_out_of_range_are_refused_and_the_schema_says_the_range(api, annotating, settings):
    client, assignment = annotating
    submit = reverse("api-assignment-submit", args=[assignment.pk])
    refused(post(client, submit, {"label": "supported", "next": True, "holding": 2**63}), "holding")
    refused(post(client, submit, {"label": "supported", "rationale": "x" * 10_001}), "rationale")
    response = post(api, reverse("api-invite-list", args=["verif"]), {"max_uses": settings.INVITE_MAX_USES + 1})
    assert refused(response, "max_uses")["fields"]["max_uses"] == [
        f"must be a whole number from 1 to {settings.INVITE_MAX_USES}"
    ]
    schema = json.loads(api.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    components = schema["components"]["schemas"]
    invite = components["InviteRequestRequest"]["properties"]
    assert (invite["max_uses"]["minimum"], invite["max_uses"]["maximum"]) == (1, settings.INVITE_MAX_USES)
    assert invite["expires_in_days"]["maximum"] == settings.INVITE_MAX_DAYS
    answer = components["SubmitAnswerRequest"]["properties"]
    assert answer["holding"]["maximum"] == 2**63 - 1 and answer["rationale"]["maxLength"] == 10_000


def test_every_request_body_of_the_schema_allows_no_other_properties(api):
    schema = json.loads(api.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    components = schema["components"]["schemas"]
    open_bodies = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                name = media["schema"]["$ref"].rsplit("/", 1)[1]
                if components[name].get("additionalProperties") is not False:
                    open_bodies.append(f"{method.upper()} {path}: {name}")
    assert not open_bodies
    assert components["EvidenceJudgementRequest"]["additionalProperties"] is False  # nested bodies too


def test_json_routes_take_json_only_and_say_415(api):
    """A form cannot say an object, a null or an empty list: DRF read such a field as absent."""
    response = api.post(reverse("api-study-duplicate", args=["verif"]), {"slug": "copy"})  # multipart
    assert response.status_code == 415 and response.json()["code"] == "unsupported_media_type"
    schema = json.loads(api.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    duplicate = schema["paths"]["/api/studies/{slug}/duplicate"]["post"]
    assert list(duplicate["requestBody"]["content"]) == ["application/json"] and "415" in duplicate["responses"]
    # The token request is flat strings and a number: a form may say it, and login scripts send one.
    response = api.post(reverse("api-token"), {"username": "rita", "password": "pw-rita"})
    assert response.status_code == 201


def test_an_annotating_refusal_has_the_one_error_shape(annotating, loaded_verification_study):
    client, _ = annotating
    Study.objects.filter(pk=loaded_verification_study.pk).update(status=Study.Status.CLOSED)
    response = client.post(reverse("api-assignment-next", args=["verif"]))
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied" and response.json()["detail"]


@pytest.mark.parametrize(
    ("route", "args", "query", "field"),
    [
        ("api-item-list", ["verif"], {"domian": "longfact"}, "domian"),
        ("api-annotation-export", ["verif"], {"formt": "jsonl"}, "formt"),
        ("api-study-list", [], {"pge": "2"}, "pge"),
        ("api-token-list", [], {"page_size": "5"}, "page_size"),
        ("api-item-list", ["verif"], {"page": ""}, "page"),
        ("api-item-list", ["verif"], {"page": "last"}, "page"),
        ("api-study-list", [], {"page": "0"}, "page"),
        ("api-study-list", [], {"page": "9" * 5000}, "page"),
    ],
)
def test_a_query_parameter_a_route_does_not_take_or_cannot_read_is_refused(api, route, args, query, field):
    refused(api.get(reverse(route, args=args), query), field)


def test_a_page_past_the_end_is_still_not_found(api):
    assert api.get(reverse("api-item-list", args=["verif"]), {"page": "2"}).status_code == 404
    assert api.get(reverse("api-item-list", args=["verif"]), {"page": "1", "q": ""}).status_code == 200


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"kappa": "7"}, "kappa"),  # a preference plan does not use kappa: it was answered 200
        ({"kind": "verification", "kappa_b": "-1.5"}, "kappa_b"),
        ({"p": "0.42", "alpha": "1.4e-45"}, "p"),  # z at infinity: OverflowError, a 500
        ({"kind": "verification", "width": "1e-300"}, "kappa"),
    ],
)
def test_plan_numbers_out_of_range_or_beyond_any_count_are_400s(api, query, field):
    refused(api.get(reverse("api-plan"), query), field)


def test_a_share_near_one_half_is_answered_at_once(api):
    """p=0.5001 needs about 100,000 items: the exact search took minutes (quadratic), now under a second."""
    started = time.monotonic()
    response = api.get(reverse("api-plan"), {"p": "0.5001"})
    assert time.monotonic() - started < 10
    assert "more than 100000 decisive items" in refused(response, "p")["detail"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('{"format": ' + "[" * 10_000 + "]" * 10_000 + "}", "nested deeper than 32 levels"),  # was a 500
        ('{"format": ' + "[" * 40 + "]" * 40 + "}", "nested deeper than 32 levels"),
        ('{"format": "csv", "format": "jsonl"}', "the key 'format' is given twice"),  # the last one won
        # NUL: refused naming its field (code "invalid"), the one rule of lib/formats.py; test_control_characters.py
        ('{"format": "\\ud800"}', "unpaired surrogates"),
        ('{"format": 1e400}', "numbers must be finite"),  # read as infinity
        ('{"format": NaN}', "NaN"),
    ],
)
def test_json_the_api_cannot_read_without_doubt_is_a_400(api, body, says):
    api.raise_request_exception = False
    response = api.post(reverse("api-export-create", args=["verif"]), body, content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "parse_error", response.content
    assert says in response.json()["detail"]


def test_a_failed_import_answers_the_one_error_shape_with_its_job(api):
    upload = SimpleUploadedFile("items.jsonl", b'{"id": "c-9", "cliam": "typo"}\n')
    response = api.post(reverse("api-item-import", args=["verif"]), {"file": upload})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and body["detail"].startswith(
        f"Nothing was imported ({body['error_count']} problem(s))"
    )
    assert body["status"] == "failed" and body["errors"][0]["line"] == 1
