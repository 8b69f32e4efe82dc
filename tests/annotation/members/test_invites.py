"""Invite links: hashed tokens, sign-up and join pages, unusable links, throttling, max uses under races."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.members.invites import (
    InviteUnusable,
    SignupThrottled,
    create_invite,
    find_invite,
    hash_token,
    revoke_invite,
    sign_up_through_invite,
)
from annotation.members.membership import set_member_active
from annotation.models import Invite, InviteSignup, StudyMember
from tests.conftest import jsonl, verification_item
from tests.support.threads import run_in_threads

User = get_user_model()
GOOD_PASSWORD = "tall-violet-harbour-42"


def invite_url(token: str) -> str:
    return reverse("annotation:invite", args=[token])


def signup(client, token: str, username: str, password: str = GOOD_PASSWORD, **extra):
    data = {"username": username, "password1": password, "password2": password}
    return client.post(invite_url(token), data, **extra)


# --- service ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_token_is_stored_only_as_its_hash(verification_study, researcher):
    issued = create_invite(study=verification_study, created_by=researcher)
    invite = Invite.objects.get()
    assert issued.token not in (invite.token_hash, invite.prefix) and invite.token_hash == hash_token(issued.token)
    assert len(issued.token) >= 43 and invite.prefix == issued.token[:6]
    assert invite.role == "annotator" and invite.max_uses == 1
    assert (invite.expires_at - timezone.now()).days in (6, 7)
    assert find_invite(issued.token) == invite and find_invite(issued.token[:-1] + "x") is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_uses": 0}, "max_uses must be a whole number from 1 to 1000"),
        ({"max_uses": 1001}, "max_uses must be"),
        ({"expires_in_days": 0}, "expires_in_days must be a whole number from 1 to 90"),
        ({"expires_in_days": 91}, "expires_in_days must be"),
        ({"role": "admin"}, "role must be one of"),
    ],
)
def test_bad_invite_settings_are_refused_by_name(verification_study, researcher, kwargs, message):
    with pytest.raises(ServiceError, match=message):
        create_invite(study=verification_study, created_by=researcher, **kwargs)
    assert not Invite.objects.exists()


@pytest.mark.django_db
def test_sign_up_refuses_weak_passwords_and_taken_usernames_without_using_the_invite(verification_study, researcher):
    invite = create_invite(study=verification_study, created_by=researcher).invite
    for username, password, message in (
        ("newbie", "12345678", "password:"),
        ("anna", GOOD_PASSWORD, "username: that username is taken"),
        ("bad name!", GOOD_PASSWORD, "username:"),
    ):
        with pytest.raises(ServiceError, match=message):
            sign_up_through_invite(invite=invite, username=username, password=password, ip_address="10.0.0.1")
    invite.refresh_from_db()
    assert invite.uses == 0 and not User.objects.filter(username="newbie").exists()


# --- pages -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_anonymous_signs_up_and_lands_on_the_annotate_page(client, loaded_verification_study, researcher):
    token = create_invite(study=loaded_verification_study, created_by=researcher, max_uses=2).token
    page = client.get(invite_url(token))
    assert page.status_code == 200 and "Join Verification" in page.content.decode()

    response = signup(client, token, "newbie")

    assert response.status_code == 302 and response["Location"] == reverse("annotation:annotate", args=["verif"])
    newbie = StudyMember.objects.get(study=loaded_verification_study, user__username="newbie")
    assert newbie.role == "annotator" and newbie.is_active and newbie.pseudonym.startswith("ann-")
    assert newbie.pseudonym not in {"ann-01"}  # anna's; a fresh one
    assert Invite.objects.get().uses == 1 and InviteSignup.objects.get().ip_address == "127.0.0.1"
    annotate = client.get(response["Location"])
    assert annotate.status_code == 200 and 'name="label"' in annotate.content.decode()


@pytest.mark.django_db
def test_sign_up_errors_are_shown_on_the_form(client, verification_study, researcher):
    token = create_invite(study=verification_study, created_by=researcher).token
    response = signup(client, token, "newbie", password="password")
    html = response.content.decode()
    assert response.status_code == 400 and "This password is too common." in html
    response = client.post(invite_url(token), {"username": "x2", "password1": GOOD_PASSWORD, "password2": "other"})
    assert (
        response.status_code == 400 and "didn" in response.content.decode()
    )  # "The two password fields didn't match."
    assert Invite.objects.get().uses == 0


@pytest.mark.django_db
def test_logged_in_user_joins_with_one_click_and_members_do_not_use_it_up(
    client, verification_study, researcher, make_user
):
    token = create_invite(study=verification_study, created_by=researcher, max_uses=2).token
    client.force_login(make_user("carl"))
    page = client.get(invite_url(token))
    assert "Join the study" in page.content.decode() and not StudyMember.objects.filter(user__username="carl").exists()
    response = client.post(invite_url(token))
    assert response["Location"] == reverse("annotation:annotate", args=["verif"])
    assert StudyMember.objects.get(user__username="carl").role == "annotator"
    assert Invite.objects.get().uses == 1
    client.force_login(researcher)  # already a member: straight to the study, no use counted
    response = client.post(invite_url(token))
    assert response["Location"] == reverse("annotation:study_detail", args=["verif"])
    assert Invite.objects.get().uses == 1


@pytest.mark.django_db
def test_a_deactivated_member_cannot_rejoin_through_an_invite(client, verification_study, researcher, annotator):
    token = create_invite(study=verification_study, created_by=researcher).token
    anna = StudyMember.objects.get(study=verification_study, user=annotator)
    set_member_active(study=verification_study, member=anna, active=False)
    client.force_login(annotator)
    response = client.post(invite_url(token))
    assert response.status_code == 403 and "ended by its researchers" in response.content.decode()
    assert not StudyMember.objects.get(pk=anna.pk).is_active and Invite.objects.get().uses == 0


@pytest.mark.django_db
def test_unusable_links_get_a_clear_page(client, verification_study, researcher):
    expired = create_invite(study=verification_study, created_by=researcher)
    Invite.objects.filter(pk=expired.invite.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    revoked = create_invite(study=verification_study, created_by=researcher)
    revoke_invite(invite=revoked.invite)
    used = create_invite(study=verification_study, created_by=researcher)
    Invite.objects.filter(pk=used.invite.pk).update(uses=1)
    cases = {
        "nonsense-token": (404, "not valid"),
        expired.token: (410, "expired on"),
        revoked.token: (410, "withdrawn"),
        used.token: (410, "used 1 time(s)"),
    }
    for token, (status, words) in cases.items():
        for response in (client.get(invite_url(token)), signup(client, token, f"u{status}")):
            assert response.status_code == status and words in response.content.decode(), token
    assert not User.objects.filter(username__startswith="u4").exists()


@pytest.mark.django_db
def test_sign_ups_are_throttled_per_address(client, verification_study, researcher, settings):
    settings.INVITE_SIGNUP_LIMIT = 2
    token = create_invite(study=verification_study, created_by=researcher, max_uses=10).token
    for name in ("one", "two"):
        assert signup(client, token, name).status_code == 302
        client.logout()
    response = signup(client, token, "three")
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert "too many accounts" in response.content.decode()
    assert not User.objects.filter(username="three").exists() and Invite.objects.get().uses == 2
    # Another address is not held back by this one.
    assert signup(client, token, "four", REMOTE_ADDR="10.9.9.9").status_code == 302
    with pytest.raises(SignupThrottled):
        sign_up_through_invite(
            invite=Invite.objects.get(), username="five", password=GOOD_PASSWORD, ip_address="127.0.0.1"
        )


@pytest.mark.django_db
def test_members_page_creates_lists_and_revokes_invites(client, verification_study, researcher):
    client.force_login(researcher)
    response = client.post(
        reverse("annotation:invite_create", args=["verif"]),
        {"invite-role": "annotator", "invite-max_uses": 3, "invite-expires_in_days": 2},
    )
    html = response.content.decode()
    invite = Invite.objects.get()
    assert response.status_code == 200 and "Your new invite link" in html
    assert f"/invite/{invite.prefix}" in html and invite.max_uses == 3 and "0 of 3" in html
    page = client.get(reverse("annotation:study_members", args=["verif"])).content.decode()
    assert "Your new invite link" not in page and f"{invite.prefix}…" in page

    bad = client.post(
        reverse("annotation:invite_create", args=["verif"]), {"invite-role": "annotator", "invite-max_uses": 0}
    )
    assert bad.status_code == 400 and Invite.objects.count() == 1

    client.post(reverse("annotation:invite_revoke", args=["verif", invite.pk]))
    invite.refresh_from_db()
    assert invite.revoked_at is not None and invite.state() == "revoked"


# --- max uses under races --------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_sign_ups_at_once_on_a_one_use_invite_admit_exactly_one(researcher):
    from annotation.members.services import add_members
    from annotation.studies.services import create_study
    from annotation.transfer.services.item_import import import_items

    study = create_study(slug="race-invite", name="Race", kind="verification", annotators_per_item=1)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    import_items(study=study, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    invite = create_invite(study=study, created_by=researcher, max_uses=1).invite

    def attempt(name: str) -> str:
        try:
            sign_up_through_invite(
                invite=Invite.objects.get(pk=invite.pk), username=name, password=GOOD_PASSWORD, ip_address=None
            )
        except InviteUnusable:
            return "refused"
        return "joined"

    results = run_in_threads([lambda name=name: attempt(name) for name in ("racer1", "racer2", "racer3", "racer4")])

    assert sorted(results) == ["joined", "refused", "refused", "refused"]
    invite.refresh_from_db()
    assert invite.uses == 1
    assert StudyMember.objects.filter(study=study, role="annotator").count() == 1
    assert User.objects.filter(username__startswith="racer").count() == 1  # the losers' accounts were rolled back


# --- API -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_api_sign_up_then_token_then_annotate(client, loaded_verification_study, researcher):
    token = create_invite(study=loaded_verification_study, created_by=researcher, max_uses=1).token
    url = reverse("api-invite-signup", args=[token])
    weak = client.post(url, {"username": "apinew", "password": "123"}, content_type="application/json")
    assert weak.status_code == 400 and set(weak.json()["fields"]) == {"password"}

    response = client.post(url, {"username": "apinew", "password": GOOD_PASSWORD}, content_type="application/json")
    assert response.status_code == 201
    body = response.json()
    assert body["study"] == "verif" and body["role"] == "annotator" and body["joined"] is True
    again = client.post(url, {"username": "apinew2", "password": GOOD_PASSWORD}, content_type="application/json")
    assert again.status_code == 410 and again.json()["code"] == "invite_unusable"
    assert "used 1 time(s)" in again.json()["detail"]

    issued = client.post(
        reverse("api-token"), {"username": "apinew", "password": GOOD_PASSWORD}, content_type="application/json"
    )
    headers = {"HTTP_AUTHORIZATION": f"Token {issued.json()['token']}"}
    claimed = client.post(reverse("api-assignment-next", args=["verif"]), **headers)
    assert claimed.status_code == 200 and claimed.json()["item"]["kind"] == "verification"


@pytest.mark.django_db
def test_api_join_unknown_links_and_throttle(client, verification_study, researcher, make_user, settings):
    token = create_invite(study=verification_study, created_by=researcher, max_uses=5).token
    carl = make_user("carl")
    client.force_login(carl)
    joined = client.post(reverse("api-invite-join", args=[token]))
    assert joined.status_code == 200 and joined.json()["joined"] is True
    twice = client.post(reverse("api-invite-join", args=[token]))
    assert twice.json()["joined"] is False and Invite.objects.get().uses == 1
    client.logout()
    assert client.post(reverse("api-invite-join", args=[token])).status_code in (401, 403)

    missing = client.post(reverse("api-invite-signup", args=["no-such-token"]), {}, content_type="application/json")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    settings.INVITE_SIGNUP_LIMIT = 1
    url = reverse("api-invite-signup", args=[token])
    assert (
        client.post(url, {"username": "s1", "password": GOOD_PASSWORD}, content_type="application/json").status_code
        == 201
    )
    throttled = client.post(url, {"username": "s2", "password": GOOD_PASSWORD}, content_type="application/json")
    assert throttled.status_code == 429 and throttled.json()["code"] == "throttled" and throttled["Retry-After"]
    assert not User.objects.filter(username="s2").exists()
