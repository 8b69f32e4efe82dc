"""Login throttling (django-axes) on the login page, the admin login and the token endpoint."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.backends import ModelBackend
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

ATTACKER = "203.0.113.9"
HOME = "198.51.100.7"
#: Guesses in a flood: ten times the failure limit (5) shows the lock holds, and hashes nothing more.
FLOOD = 50


@pytest.fixture
def password_checks(monkeypatch):
    """How often a password was actually checked (hashed) by the model backend."""
    calls = []
    original = ModelBackend.authenticate

    def counting(self, request, username=None, password=None, **kwargs):
        calls.append(username)
        return original(self, request, username=username, password=password, **kwargs)

    monkeypatch.setattr(ModelBackend, "authenticate", counting)
    return calls


def _login(client, url, username, password, ip):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=ip)


@pytest.mark.django_db
@pytest.mark.parametrize("url_name", ["login", "admin:login"])
def test_login_pages_lock_out_a_guesser_but_not_the_real_user(client, researcher, password_checks, settings, url_name):
    researcher.is_staff = True
    researcher.save()
    url = reverse(url_name)
    statuses = [_login(client, url, "rita", f"guess-{n}", ATTACKER).status_code for n in range(FLOOD)]

    limit = settings.AXES_FAILURE_LIMIT
    assert statuses[: limit - 1] == [200] * (limit - 1)  # the form again, with its error
    assert set(statuses[limit:]) == {429}
    # Once locked, no password is hashed any more: the flood costs no CPU.
    assert len(password_checks) == limit
    locked = _login(client, url, "rita", "pw-rita", ATTACKER)
    assert locked.status_code == 429
    assert "Too many failed login attempts" in locked.content.decode()
    assert int(locked["Retry-After"]) == 15 * 60

    # The real user, from their own address, still logs in.
    response = _login(client, url, "rita", "pw-rita", HOME)
    assert response.status_code == 302


@pytest.mark.django_db
def test_token_endpoint_answers_429_json_with_retry_after(client, researcher, password_checks, settings):
    url = reverse("api-token")
    statuses = [_login(client, url, "rita", f"guess-{n}", ATTACKER).status_code for n in range(FLOOD)]
    limit = settings.AXES_FAILURE_LIMIT
    assert statuses[: limit - 1] == [400] * (limit - 1)
    assert set(statuses[limit:]) == {429}
    assert len(password_checks) == limit

    locked = _login(client, url, "rita", "pw-rita", ATTACKER)
    assert locked.status_code == 429
    assert locked["Content-Type"] == "application/json"
    assert locked.json() == {
        "detail": "Too many failed login attempts. Try again later.",
        "code": "throttled",
        "retry_after": 900,
    }
    assert locked["Retry-After"] == "900"

    elsewhere = _login(client, url, "rita", "pw-rita", HOME)
    assert elsewhere.status_code == 201
    assert elsewhere.json()["token"]


@pytest.mark.django_db
@override_settings(AXES_FAILURE_LIMIT=3, LOGIN_IP_FAILURE_LIMIT=6)
def test_one_address_trying_many_usernames_is_locked_at_the_higher_limit(client, researcher):
    url = reverse("login")
    statuses = [_login(client, url, f"user{n}", "guess", ATTACKER).status_code for n in range(8)]
    assert statuses == [200] * 5 + [429] * 3
    assert _login(client, url, "rita", "pw-rita", ATTACKER).status_code == 429  # the whole address
    assert _login(client, url, "rita", "pw-rita", HOME).status_code == 302


@pytest.mark.django_db
def test_the_lockout_ends_after_the_cool_off(client, researcher, settings):
    url = reverse("login")
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login(client, url, "rita", f"guess-{n}", ATTACKER)
    assert _login(client, url, "rita", "pw-rita", ATTACKER).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1))
    assert _login(client, url, "rita", "pw-rita", ATTACKER).status_code == 302


@pytest.mark.django_db
def test_forwarded_for_is_ignored_unless_a_proxy_is_trusted(client, researcher, settings):
    url = reverse("login")
    # A client rotating X-Forwarded-For is still one address (REMOTE_ADDR).
    for n in range(settings.AXES_FAILURE_LIMIT):
        client.post(
            url, {"username": "rita", "password": "x"}, REMOTE_ADDR=ATTACKER, HTTP_X_FORWARDED_FOR=f"10.0.0.{n}"
        )
    assert _login(client, url, "rita", "pw-rita", ATTACKER).status_code == 429

    settings.LOGIN_TRUSTED_PROXY_COUNT = 1
    # Behind one trusted proxy, the address it appended is the client's (the forged first hop is not).
    proxied = client.post(
        url,
        {"username": "rita", "password": "pw-rita"},
        REMOTE_ADDR="10.1.1.1",
        HTTP_X_FORWARDED_FOR=f"{ATTACKER}, {HOME}",
    )
    assert proxied.status_code == 302
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {ATTACKER}
