"""The Prolific page and API (issue 34): connect, list, approve, reject and bonus through the study's own
routes, against the local fake; researchers of the study only; CSRF on the page; the token in no page,
answer or log row; the schema declares the routes and their refusals."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from accounts.services import issue_token
from annotation.members.services import add_members
from annotation.models import ParticipantLink, ProlificCall
from tests.annotation.crowd.prolific_support import TOKEN, A, B, C, D, G, scene
from tests.annotation.crowd_support import crowd_study

pytestmark = pytest.mark.django_db

REASON = (
    "Thank you for taking part. Two of the attention checks were answered against the instructions shown with "
    "them, so this submission cannot be approved."
)


def page_url(study) -> str:
    return reverse("annotation:participants_prolific", args=[study.slug])


def api(client: Client, user) -> dict:
    """Headers of a token-authenticated API call (no session, no CSRF)."""
    return {"HTTP_AUTHORIZATION": f"Token {issue_token(user=user).key}"}


def no_token_anywhere(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text
    for call in ProlificCall.objects.all():
        assert TOKEN not in json.dumps([call.path, call.request_body, call.response_body, call.error])


def test_the_participants_page_links_to_the_prolific_page(client, researcher):
    study, _link = crowd_study("linked", researcher=researcher.username)
    client.force_login(researcher)
    page = client.get(reverse("annotation:study_participants", args=[study.slug])).content.decode()
    assert f'href="{page_url(study)}"' in page


def test_the_page_connects_lists_approves_and_rejects(client, fake, researcher):
    study, _link = crowd_study("page", researcher=researcher.username)
    prolific = fake.add_study("Claim checking", **{A: "AWAITING_REVIEW", B: "AWAITING_REVIEW"})
    client.force_login(researcher)
    first = client.get(page_url(study)).content.decode()
    assert 'id="prolific-connect-form"' in first and 'id="submission-table"' not in first

    wrong = client.post(
        reverse("annotation:prolific_connect", args=[study.slug]), {"study_id": prolific.id, "token": "Bad_" + TOKEN}
    )
    assert wrong.status_code == 400 and "Not connected: Prolific refused the API token (401)" in wrong.content.decode()
    assert ParticipantLink.objects.get(study=study).prolific_token_encrypted == ""
    done = client.post(
        reverse("annotation:prolific_connect", args=[study.slug]), {"study_id": prolific.id, "token": TOKEN}
    )
    assert done.status_code == 302
    listed = client.get(page_url(study)).content.decode()
    assert "Connected to the Prolific study “Claim checking” (active)." in listed
    rows = re.findall(r'<tr data-panel-id="([0-9a-f]{24})" data-submission-id="([0-9a-f]{24})">', listed)
    assert sorted(pid for pid, _ in rows) == sorted([A, B])  # no Claimlab participant yet: both "review"
    assert listed.count("No Claimlab participant") == 2

    a_id, b_id = fake.submission(A)["id"], fake.submission(B)["id"]
    review = reverse("annotation:prolific_review", args=[study.slug])
    approved = client.post(review, {"action": "approve", "submission": [a_id]}, follow=True)
    assert "Approved 1 submission(s) on Prolific." in approved.content.decode()
    assert fake.submission(A)["status"] == "APPROVED"

    short = client.post(
        review, {"action": "reject", "submission": [b_id], "rejection_category": "LOW_EFFORT", "message": "Too short."}
    )
    body = short.content.decode()
    assert short.status_code == 400 and "at least 100 characters" in body and ">\nToo short.</textarea>" in body
    rejected = client.post(
        review,
        {"action": "reject", "submission": [b_id], "rejection_category": "LOW_EFFORT", "message": REASON},
        follow=True,
    )
    assert "Rejected 1 submission(s) on Prolific." in rejected.content.decode()
    assert fake.calls("POST", f"{b_id}/transition/")[-1].body == {
        "action": "REJECT",
        "message": REASON,
        "rejection_category": "LOW_EFFORT",
    }
    log = client.get(page_url(study)).content.decode()
    assert f"POST /api/v1/submissions/{a_id}/transition/" in log
    assert fake.problems == []
    no_token_anywhere(first, wrong.content.decode(), listed, body, log)


def test_bonuses_on_the_page_need_the_preview_s_confirmation(client, fake, researcher):
    s = scene(fake, researcher)
    client.force_login(researcher)
    bonuses = reverse("annotation:prolific_bonuses", args=[s.study.slug])
    preview = client.post(bonuses, {"step": "preview", "basis": "fixed", "amount": "0.30", "panel_ids": f"{A}\n{G}"})
    page = preview.content.decode()
    assert preview.status_code == 200
    assert "<strong>2</strong> participants, <strong>0.60 GBP</strong> in total" in page
    confirmation = re.search(r'name="confirmation" value="([0-9a-f]{32})"', page).group(1)
    assert fake.calls("POST") == []
    ids = re.search(r'name="panel_ids" value="([^"]*)"', page).group(1)
    assert ids == f"{A} {G}"
    pay = {"step": "pay", "basis": "fixed", "amount": "0.30", "panel_ids": ids, "confirmation": confirmation}
    stale = client.post(bonuses, {**pay, "amount": "0.40"})  # not what was previewed
    assert stale.status_code == 409 and "changed since the preview" in stale.content.decode()
    paid = client.post(bonuses, pay, follow=True)
    assert "Paid bonuses to 2 participant(s), 0.60 GBP" in paid.content.decode()
    assert fake.paid_lines() == [f"{A},0.30", f"{G},0.30"]
    again = client.post(bonuses, pay)  # the form sent twice
    assert again.status_code == 409 and sum(fake.pays.values()) == 1
    assert fake.problems == []
    no_token_anywhere(page, stale.content.decode(), again.content.decode())


def test_the_page_needs_its_csrf_token(fake, researcher):
    s = scene(fake, researcher)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(researcher)
    refused = strict.post(
        reverse("annotation:prolific_review", args=[s.study.slug]),
        {"action": "approve", "submission": [fake.submission(A)["id"]]},
    )
    assert refused.status_code == 403 and fake.calls("POST") == []
    assert fake.submission(A)["status"] == "AWAITING REVIEW"


def test_only_the_study_s_researchers_reach_prolific(client, fake, researcher, annotator, make_user):
    s = scene(fake, researcher)
    add_members(study=s.study, usernames=[annotator.username], role="annotator")
    other = make_user("olga")
    crowd_study("olgas", researcher=other.username)  # a researcher, of another study
    a_id = fake.submission(A)["id"]
    for outsider in (annotator, other):
        client.force_login(outsider)
        assert client.get(page_url(s.study)).status_code == 404
        assert (
            client.post(
                reverse("annotation:prolific_review", args=[s.study.slug]), {"action": "approve", "submission": [a_id]}
            ).status_code
            == 404
        )
        headers = api(client, outsider)
        for name in ("api-prolific-connection", "api-prolific-submissions", "api-prolific-calls"):
            assert client.get(reverse(name, args=[s.study.slug]), **headers).status_code == 404
        approve = client.post(
            reverse("api-prolific-approve", args=[s.study.slug]),
            {"submission_ids": [a_id]},
            content_type="application/json",
            **headers,
        )
        assert approve.status_code == 404
        gone = client.delete(reverse("api-prolific-connection", args=[s.study.slug]), **headers)
        assert gone.status_code == 404
    assert fake.calls("POST") == [] and ParticipantLink.objects.get(study=s.study).prolific_study_id
    client.logout()
    assert client.get(page_url(s.study)).status_code == 302  # to the login


def test_the_api_connects_lists_reviews_and_pays(client, fake, researcher):
    study, _link = crowd_study("api", researcher=researcher.username)
    prolific = fake.add_study("Claim checking")
    headers = api(client, researcher)
    slug = study.slug
    put = client.put(
        reverse("api-prolific-connection", args=[slug]),
        {"study_id": prolific.id, "token": TOKEN},
        content_type="application/json",
        **headers,
    )
    assert put.status_code == 200 and put.json() == {
        "study_id": prolific.id,
        "name": "Claim checking",
        "status": "ACTIVE",
    }
    state = client.get(reverse("api-prolific-connection", args=[slug]), **headers)
    assert state.json() == {"connected": True, "study_id": prolific.id, "token_set": True}
    test = client.post(reverse("api-prolific-test", args=[slug]), **headers)
    assert test.status_code == 200 and test.json()["name"] == "Claim checking"

    s = scene(fake, researcher, slug="api-scene")
    headers = api(client, researcher)
    slug = s.study.slug
    listed = client.get(reverse("api-prolific-submissions", args=[slug]), **headers)
    body = listed.json()
    rows = {row["panel_id"]: row for row in body["submissions"]}
    assert body["awaiting_review"] == 5 and body["currency"] == "GBP"
    assert rows[A]["suggestion"] == {"action": "approve", "reason": "completed their quota in Claimlab", "category": ""}
    assert rows[B]["suggestion"]["category"] == "FAILED_CHECK" and rows[A]["pay"] == "1.20"
    assert (rows[D]["outcome"], rows[D]["active_minutes"]) == ("timed_out", 2.0)

    approve = client.post(
        reverse("api-prolific-approve", args=[slug]),
        {"submission_ids": [rows[A]["submission_id"]]},
        content_type="application/json",
        **headers,
    )
    assert approve.json() == {
        "action": "approve",
        "done": [{"submission_id": rows[A]["submission_id"], "status": "APPROVED"}],
        "failed": [],
        "not_sent": [],
    }
    reject_url = reverse("api-prolific-reject", args=[slug])
    short = client.post(
        reject_url,
        {"submission_ids": [rows[B]["submission_id"]], "rejection_category": "FAILED_CHECK", "message": "No."},
        content_type="application/json",
        **headers,
    )
    assert short.status_code == 400 and short.json()["code"] == "invalid" and "100 characters" in short.json()["detail"]
    category = client.post(
        reject_url,
        {"submission_ids": [rows[B]["submission_id"]], "rejection_category": "RUDE", "message": REASON},
        content_type="application/json",
        **headers,
    )
    assert category.status_code == 400 and "rejection_category" in category.json()["fields"]
    rejected = client.post(
        reject_url,
        {"submission_ids": [rows[B]["submission_id"]], "rejection_category": "FAILED_CHECK", "message": REASON},
        content_type="application/json",
        **headers,
    )
    assert rejected.json()["done"][0]["status"] == "REJECTED"

    rule = {"basis": "pay", "amount": "0.20", "panel_ids": [A, C]}
    preview_url, pay_url = (
        reverse("api-prolific-bonus-preview", args=[slug]),
        reverse("api-prolific-bonus-pay", args=[slug]),
    )
    refused = client.post(preview_url, rule, content_type="application/json", **headers)
    assert refused.status_code == 400 and "nothing owed beyond the reward" in refused.json()["detail"]  # C: no pay
    rule["panel_ids"] = [A]
    preview = client.post(preview_url, rule, content_type="application/json", **headers).json()
    assert (preview["count"], preview["total"], preview["currency"]) == (1, "1.00", "GBP")
    assert preview["bonuses"] == [{"panel_id": A, "pseudonym": rows[A]["pseudonym"], "amount": "1.00"}]
    stale = client.post(pay_url, {**rule, "confirmation": "0" * 32}, content_type="application/json", **headers)
    assert stale.status_code == 409 and stale.json()["code"] == "confirmation_stale"
    paid = client.post(
        pay_url, {**rule, "confirmation": preview["confirmation"]}, content_type="application/json", **headers
    )
    assert paid.status_code == 200 and (paid.json()["count"], paid.json()["total"]) == (1, "1.00")
    assert paid.json()["prolific"]["total_amount"] == pytest.approx(1.33)
    assert fake.paid_lines() == [f"{A},1.00"]
    twice = client.post(
        pay_url, {**rule, "confirmation": preview["confirmation"]}, content_type="application/json", **headers
    )
    assert twice.status_code == 409 and sum(fake.pays.values()) == 1

    calls = client.get(reverse("api-prolific-calls", args=[slug]), **headers).json()["calls"]
    (pay_call,) = [call for call in calls if call["path"].endswith("/pay/")]  # newest first; the refusal paid nothing
    assert (pay_call["method"], pay_call["status_code"], pay_call["made_by"]) == ("POST", 202, "rita")
    assert calls[0]["at"] >= pay_call["at"] and calls[-1]["path"] == f"/api/v1/studies/{s.prolific.id}/"
    assert fake.problems == []
    no_token_anywhere(
        put.content.decode(), state.content.decode(), listed.content.decode(), json.dumps(calls), short.content.decode()
    )
    assert client.delete(reverse("api-prolific-connection", args=[slug]), **headers).status_code == 204
    assert client.get(reverse("api-prolific-connection", args=[slug]), **headers).json()["connected"] is False


def test_the_api_says_whose_failure_it_is(client, fake, researcher):
    study, _link = crowd_study("failing", researcher=researcher.username)
    headers = api(client, researcher)
    submissions = reverse("api-prolific-submissions", args=[study.slug])
    unconnected = client.get(submissions, **headers)
    assert unconnected.status_code == 409 and unconnected.json()["code"] == "prolific_not_connected"
    s = scene(fake, researcher, slug="failing-scene")
    submissions = reverse("api-prolific-submissions", args=[s.study.slug])
    fake.fail("500", path="/submissions/", times=3)
    failed = client.get(submissions, **headers)
    assert failed.status_code == 502 and failed.json()["code"] == "prolific_failed"
    assert "server error (500)" in failed.json()["detail"]
    fake.fail("400", path="/submissions/")
    refused = client.get(submissions, **headers)
    assert refused.status_code == 400 and refused.json() == {
        "detail": f"Prolific refused GET /api/v1/studies/{s.prolific.id}/submissions/ (400): study: Injected refusal "
        "for the test.",
        "code": "prolific_refused",
    }


def test_the_schema_declares_the_prolific_routes(client, researcher):
    client.force_login(researcher)
    schema = client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    base = "/api/studies/{slug}/participants/prolific"
    pay = schema["paths"][f"{base}/bonuses/pay"]["post"]
    assert {"200", "400", "404", "409", "502"} <= set(pay["responses"])
    connect = schema["paths"][base]["put"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][connect.rsplit("/", 1)[1]]
    assert set(body["properties"]) == {"study_id", "token"} and body.get("additionalProperties") is False
    answer = schema["paths"][base]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert "token" not in schema["components"]["schemas"][answer.rsplit("/", 1)[1]]["properties"]
    for route in ("", "/test", "/submissions", "/approve", "/reject", "/bonuses/preview", "/bonuses/pay", "/calls"):
        assert f"{base}{route}" in schema["paths"], route
