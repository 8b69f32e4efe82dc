"""Access before parsing on the multipart import routes (issue 31, finding 5).

Session authentication checks CSRF, which reads the form body: a JSON body on a multipart-only
route was a 415 before the membership check ran, so a non-member learnt nothing wrong but got
the wrong answer. Now, by session (with CSRF enforced, as a browser) and by token alike:
non-members 404, annotators 403, researchers get to validation (415 for a body the route does
not take, 400 naming `file` for a form without it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.middleware import csrf
from django.test import Client
from django.urls import reverse

from accounts.services import issue_token
from tests.conftest import verification_item

# The prediction import route (metaeval/verifiers/api.py) had the same problem: it is here too.
ROUTES = ("api-item-import", "api-annotation-import", "api-adjudication-import", "api-prediction-import")
EXPECTED = {"olga": 404, "anna": 403}


def _client(auth: str, user) -> tuple[Client, dict[str, Any]]:
    """A client as a browser (session, CSRF enforced, token in the header) or as a script (API token)."""
    if auth == "token":
        return Client(), {"HTTP_AUTHORIZATION": f"Token {issue_token(user=user).key}"}
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    secret = csrf._get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    return client, {"HTTP_X_CSRFTOKEN": csrf._mask_cipher_secret(secret)}  # type: ignore[attr-defined]


def _post(client: Client, url: str, body: str, headers: dict[str, Any]):
    if body == "multipart":
        upload = SimpleUploadedFile("x.jsonl", json.dumps(verification_item("c-9")).encode())
        return client.post(url, {"file": upload}, **headers)
    if body == "multipart-empty":
        return client.post(url, {"format": "jsonl"}, **headers)
    return client.post(url, '{"file": "x"}', content_type="application/json", **headers)


@pytest.fixture
def olga(make_user):
    return make_user("olga")


@pytest.mark.django_db
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("auth", ["session", "token"])
@pytest.mark.parametrize("body", ["json", "multipart"])
@pytest.mark.parametrize("who", ["olga", "anna"])
def test_outsiders_and_annotators_are_refused_whatever_they_send(
    olga, annotator, verification_study, route, auth, body, who
):
    client, headers = _client(auth, get_user_model().objects.get(username=who))
    response = _post(client, reverse(route, args=["verif"]), body, headers)
    assert response.status_code == EXPECTED[who], response.content
    assert response.json()["code"] == ("not_found" if who == "olga" else "permission_denied")


@pytest.mark.django_db
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("auth", ["session", "token"])
def test_a_researcher_gets_to_validation(researcher, verification_study, route, auth):
    client, headers = _client(auth, researcher)
    url = reverse(route, args=["verif"])
    response = _post(client, url, "json", headers)
    assert response.status_code == 415 and response.json()["code"] == "unsupported_media_type"
    response = _post(client, url, "multipart-empty", headers)
    assert response.status_code == 400 and "file" in response.json()["fields"], response.content


@pytest.mark.django_db
def test_a_session_post_without_its_csrf_token_is_still_refused(researcher, verification_study):
    client = Client(enforce_csrf_checks=True)
    client.force_login(researcher)
    response = client.post(reverse("api-item-import", args=["verif"]), "{}", content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
