"""API tokens: hashed at rest, optional expiry, listed and revoked by their owner (API and page)."""

from __future__ import annotations

import hashlib
import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import issue_token


def _issue(client, **extra):
    response = client.post(reverse("api-token"), {"username": "rita", "password": "pw-rita", **extra})
    assert response.status_code == 201, response.content
    return response.json()


def _studies(client, key):
    return client.get(reverse("api-study-list"), HTTP_AUTHORIZATION=f"Token {key}")


@pytest.mark.django_db
def test_the_database_holds_only_a_hash_of_the_key(client, researcher):
    body = _issue(client, name="laptop")
    key = body["token"]
    assert body["name"] == "laptop" and body["prefix"] == key[:8] and body["expires_at"] is None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiToken._meta.db_table}")
        stored = [str(value) for row in cursor.fetchall() for value in row]
    assert not any(key in value for value in stored)
    assert ApiToken.objects.get().key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert _studies(client, key).status_code == 200
    # Each request for a token issues a new one.
    assert _issue(client)["token"] != key


@pytest.mark.django_db
def test_an_expired_token_is_refused_with_a_clear_message(client, researcher):
    body = _issue(client, expires_in_days=7)
    token = ApiToken.objects.get(pk=body["id"])
    assert timedelta(days=7) - timedelta(minutes=1) < token.expires_at - timezone.now() <= timedelta(days=7)
    assert _studies(client, body["token"]).status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = _studies(client, body["token"])
    assert response.status_code == 401
    assert "expired" in response.json()["detail"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "field"), [(0, "expires_in_days"), ("soon", "expires_in_days"), (10**6, "expires_in_days")]
)
def test_a_bad_expiry_is_a_400_naming_the_field(client, researcher, value, field):
    response = client.post(reverse("api-token"), {"username": "rita", "password": "pw-rita", "expires_in_days": value})
    assert response.status_code == 400
    assert field in response.json()["fields"]


@pytest.mark.django_db
def test_owner_lists_and_revokes_tokens_through_the_api(client, researcher, annotator):
    first, second = _issue(client, name="one"), _issue(client, name="two")
    other = issue_token(user=annotator, name="theirs")
    auth = {"HTTP_AUTHORIZATION": f"Token {first['token']}"}

    listed = client.get(reverse("api-token-list"), **auth).json()["results"]
    assert [row["name"] for row in listed] == ["two", "one"]
    assert all("token" not in row and "key_hash" not in row for row in listed)

    # Another user's token: 404, and it keeps working.
    gone = client.delete(reverse("api-token-revoke", args=[other.token.id]), **auth)
    assert gone.status_code == 404
    assert _studies(client, other.key).status_code == 200

    assert client.delete(reverse("api-token-revoke", args=[second["id"]]), **auth).status_code == 204
    refused = _studies(client, second["token"])
    assert refused.status_code == 401
    assert "revoked" in refused.json()["detail"]
    statuses = {row["name"]: row["status"] for row in client.get(reverse("api-token-list"), **auth).json()["results"]}
    assert statuses == {"one": "active", "two": "revoked"}


@pytest.mark.django_db
def test_token_use_is_recorded(client, researcher):
    body = _issue(client)
    assert ApiToken.objects.get().last_used is None
    _studies(client, body["token"])
    assert ApiToken.objects.get().last_used is not None


@pytest.mark.django_db
def test_the_api_tokens_page_creates_shows_once_and_revokes(client, researcher, annotator):
    client.force_login(researcher)
    url = reverse("accounts:api_tokens")
    created = client.post(url, {"name": "notebook", "expires_in_days": "30"})
    assert created.status_code == 200
    token = ApiToken.objects.get(user=researcher)
    key = created.context["new_key"]
    assert hashlib.sha256(key.encode()).hexdigest() == token.key_hash
    assert key in created.content.decode()

    listing = client.get(url).content.decode()
    assert "notebook" in listing and token.prefix in listing and key not in listing

    assert client.post(url, {"expires_in_days": "0"}).status_code == 400

    theirs = issue_token(user=annotator)
    assert client.post(reverse("accounts:revoke_token", args=[theirs.token.id])).status_code == 404
    assert client.post(reverse("accounts:revoke_token", args=[token.id])).status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


@pytest.mark.django_db(transaction=True)  # a schema change, as in a real migration
def test_drf_tokens_are_migrated_hashed_and_keep_working(client, researcher):
    old_key = "a" * 40
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamp NOT NULL, user_id integer)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
            [old_key, "2025-01-02 03:04:05", researcher.pk],
        )
    migration = importlib.import_module("accounts.migrations.0002_hash_drf_tokens")
    with connection.schema_editor() as editor:
        migration.hash_drf_tokens(apps, editor)

    assert "authtoken_token" not in connection.introspection.table_names()
    token = ApiToken.objects.get()
    assert token.prefix == "aaaaaaaa" and token.key_hash == hashlib.sha256(old_key.encode()).hexdigest()
    assert token.created.year == 2025
    assert _studies(client, old_key).status_code == 200


@pytest.mark.django_db
def test_the_schema_describes_the_token_api(client, researcher):
    client.force_login(researcher)
    schema = client.get(reverse("api-schema"), {"format": "json"}, HTTP_ACCEPT="application/vnd.oai.openapi+json")
    text = schema.content.decode()
    assert schema.status_code == 200
    for path in ("/api/auth/token/", "/api/auth/tokens/", "/api/auth/tokens/{token_id}"):
        assert path in text
    assert "429" in text and "expires_in_days" in text


@pytest.mark.django_db
def test_staff_see_tokens_in_the_admin_without_keys(client, make_user, researcher):
    issued = issue_token(user=researcher, name="script")
    client.force_login(make_user("staff", is_staff=True, is_superuser=True))
    listing = client.get(reverse("admin:accounts_apitoken_changelist"), {"q": "rita"})
    assert listing.status_code == 200 and issued.token.prefix in listing.content.decode()
    change = client.get(reverse("admin:accounts_apitoken_change", args=[issued.token.pk]))
    assert change.status_code == 200 and issued.key not in change.content.decode()


@pytest.mark.django_db
def test_a_token_request_with_an_unknown_field_is_refused_by_name(client, researcher):
    response = client.post(
        reverse("api-token"),
        {"username": "rita", "password": "pw-rita", "expires": "30"},
        content_type="application/json",
    )
    assert response.status_code == 400 and not ApiToken.objects.exists()
    body = response.json()
    assert body["code"] == "invalid" and "unknown field(s) 'expires'" in body["detail"]


@pytest.mark.django_db
@pytest.mark.parametrize("days", [0, 3651, 10**20])
def test_a_token_expiry_out_of_range_is_refused_naming_the_range(client, researcher, days):
    response = client.post(
        reverse("api-token"),
        {"username": "rita", "password": "pw-rita", "expires_in_days": days},
        content_type="application/json",
    )
    assert response.status_code == 400 and not ApiToken.objects.exists()
    assert response.json()["fields"] == {"expires_in_days": ["must be a whole number from 1 to 3650"]}
