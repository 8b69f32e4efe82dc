"""``manage.py invite_researcher EMAIL`` (issue 34): the first researcher of a fresh install, no createsuperuser."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.access import may_create_studies

LINK = re.compile(r"^(https?://\S+)/accounts/set-password/(\S+)/(\S+)/$", re.M)


def invite(email: str, *args: str) -> str:
    out = StringIO()
    call_command("invite_researcher", email, *args, stdout=out)
    return out.getvalue()


def link_path(output: str) -> str:
    match = LINK.search(output)
    assert match, output
    return match.group(0)[len(match.group(1)) :]


def set_password(client, path: str, password: str = "a-long passphrase 7"):
    """Follow the link (it moves the token into the session) and post the new password twice."""
    form = client.get(path, follow=True)
    if form.status_code != 200 or not form.context.get("validlink"):
        return form
    return client.post(form.redirect_chain[-1][0], {"new_password1": password, "new_password2": password}, follow=True)


def test_the_command_prints_a_one_time_link_for_a_new_account(db):
    output = invite("ada@example.org", "--base-url", "https://claimlab.example.org/")
    assert "Created the account ada@example.org; it may create studies." in output
    assert "works once" in output
    assert LINK.search(output).group(1) == "https://claimlab.example.org"
    user = User.objects.get(username="ada@example.org")
    assert user.email == "ada@example.org" and not user.has_usable_password() and not user.is_staff
    assert may_create_studies(user)


def test_the_link_sets_the_password_once_and_logs_in_someone_who_may_create_studies(client, db):
    path = link_path(invite("ada@example.org"))
    response = set_password(client, path)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == reverse("annotation:my_studies")
    user = response.context["user"]
    assert user.is_authenticated and user.get_username() == "ada@example.org"
    assert User.objects.get(username="ada@example.org").check_password("a-long passphrase 7")
    assert client.get(reverse("annotation:study_new")).status_code == 200  # may create studies
    client.logout()
    again = set_password(client, path, "another passphrase 8")
    assert again.status_code == 200 and not again.context["validlink"]
    assert "This link does not work" in again.content.decode()
    assert User.objects.get(username="ada@example.org").check_password("a-long passphrase 7")
    assert client.login(username="ada@example.org", password="a-long passphrase 7")


def test_an_existing_account_is_reused(db, make_user):
    user = make_user("grace", email="Grace@Example.org")
    assert not may_create_studies(user)
    output = invite("grace@example.org")
    assert "Reused the account grace" in output
    assert User.objects.count() == 1
    assert may_create_studies(User.objects.get(pk=user.pk))


@pytest.mark.parametrize("email", ["not-an-address", "ada@", ""])
def test_a_bad_email_is_refused_with_a_clear_message(db, email):
    with pytest.raises(CommandError, match="is not an e-mail address"):
        invite(email)
    assert not User.objects.exists()


def test_a_deactivated_account_is_refused(db, make_user):
    make_user("old", email="old@example.org", is_active=False)
    with pytest.raises(CommandError, match="deactivated"):
        invite("old@example.org")
