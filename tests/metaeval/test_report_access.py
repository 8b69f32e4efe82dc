"""Every report route: 404 for non-members, 403 for the study's annotators, login for anonymous users."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.services import issue_token
from annotation.members.services import add_members
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from tests.conftest import jsonl, verification_item

ROUTES = [
    ("metaeval:report", {}),
    ("metaeval:report_download", {"fmt": "json"}),
    ("metaeval:report_download", {"fmt": "csv"}),
    ("metaeval:report_download", {"fmt": "html"}),
    ("metaeval:report_chart", {"chart": "labels", "ext": "svg"}),
    ("metaeval:report_chart", {"chart": "agreement", "ext": "pdf"}),
    ("api-study-report", {}),
]


@pytest.fixture
def study(db, make_user):
    for name in ("owner", "outsider", "helper"):
        make_user(name)
    study = create_study(slug="secret", name="Secret", kind="verification")
    import_items(study=study, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    add_members(study=study, usernames=["owner"], role="researcher")
    add_members(study=study, usernames=["helper"], role="annotator")
    return study


def _url(name: str, kwargs: dict) -> str:
    return reverse(name, kwargs={"slug": "secret", **kwargs})


@pytest.mark.parametrize("name,kwargs", ROUTES)
def test_outsider_gets_404(client, study, name, kwargs):
    client.login(username="outsider", password="pw-outsider")
    assert client.get(_url(name, kwargs)).status_code == 404


@pytest.mark.parametrize("name,kwargs", ROUTES)
def test_annotator_of_the_study_gets_403(client, study, name, kwargs):
    client.login(username="helper", password="pw-helper")
    assert client.get(_url(name, kwargs)).status_code == 403


@pytest.mark.parametrize("name,kwargs", ROUTES)
def test_researcher_gets_200(client, study, name, kwargs):
    client.login(username="owner", password="pw-owner")
    assert client.get(_url(name, kwargs)).status_code == 200


def test_api_by_token_for_outsider_is_404(client, study, django_user_model):
    token = issue_token(user=django_user_model.objects.get(username="outsider"))
    response = client.get(_url("api-study-report", {}), HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 404


def test_anonymous_users_are_sent_to_login_or_refused(client, study):
    page = client.get(_url("metaeval:report", {}))
    assert page.status_code == 302 and "/accounts/login/" in page["Location"]
    assert client.get(_url("api-study-report", {})).status_code in (401, 403)


def test_outsider_cannot_learn_a_charts_etag(client, study):
    """A conditional request must not answer 304 before access is checked."""
    client.login(username="owner", password="pw-owner")
    etag = client.get(_url("metaeval:report_chart", {"chart": "labels", "ext": "svg"}))["ETag"]
    client.logout()
    client.login(username="outsider", password="pw-outsider")
    response = client.get(_url("metaeval:report_chart", {"chart": "labels", "ext": "svg"}), HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 404
