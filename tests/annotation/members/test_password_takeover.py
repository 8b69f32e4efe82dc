"""Issue 31, finding 1: a researcher may reset only passwords of accounts their study created, and every
reset is recorded (PasswordReset, the study's change log, the admin) and outlives the membership."""

from __future__ import annotations

import sys

import pytest
from django.contrib.auth import get_user_model
from django.db.migrations.loader import MigrationLoader
from django.urls import reverse

from accounts.services import issue_token
from annotation.crowd import services as crowd
from annotation.errors import ServiceError
from annotation.members.invites import create_invite, join_through_invite, sign_up_through_invite
from annotation.members.membership import (
    PASSWORD_RESET_FIELD,
    password_reset_refusal,
    remove_member,
    reset_password,
    set_member_active,
)
from annotation.members.services import add_members
from annotation.models import AccountOrigin, InviteSignup, PasswordReset, StudyChange, StudyMember
from annotation.studies.services import create_study
from tests.annotation.crowd_support import crowd_study

pytestmark = pytest.mark.django_db

GOOD_PASSWORD = "tall-violet-harbour-42"
BEFORE_EXISTED = "had an account before joining this study"


def auth(user) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Token {issue_token(user=user).key}"}


def member(study, username: str) -> StudyMember:
    return StudyMember.objects.select_related("user").get(study=study, user__username=username)


def password_url(study, member_id: int) -> str:
    return reverse("api-member-password", args=[study.slug, member_id])


# --- the finding, from outside -----------------------------------------------------------------


def test_the_findings_sequence_no_longer_takes_over_an_account_in_no_study(client, verification_study, researcher):
    """Add any account in no study, reset its password: refused now, naming why; nothing changes."""
    victim = get_user_model().objects.create_user(username="victim", password="victims-own-pw-1")
    headers = auth(researcher)

    added = client.post(
        reverse("api-member-list", args=["verif"]),
        {"usernames": ["victim"]},
        content_type="application/json",
        **headers,
    )
    assert added.status_code == 200 and added.json()[0]["created_user"] is False
    victim_member = member(verification_study, "victim")

    refused = client.post(
        password_url(verification_study, victim_member.pk), {}, content_type="application/json", **headers
    )
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert BEFORE_EXISTED in refused.json()["detail"] and "administrator" in refused.json()["detail"]
    assert "password" not in refused.json()

    victim.refresh_from_db()
    assert victim.check_password("victims-own-pw-1")
    assert client.login(username="victim", password="victims-own-pw-1")
    client.logout()
    assert not PasswordReset.objects.exists()
    assert not StudyChange.objects.filter(field=PASSWORD_RESET_FIELD).exists()

    removed = client.delete(reverse("api-member-detail", args=["verif", victim_member.pk]), **headers)
    assert removed.status_code == 200 and removed.json()["action"] == "removed"
    assert not AccountOrigin.objects.filter(user=victim).exists()  # adding and removing gave the study no claim


def test_the_members_page_refuses_it_too_and_offers_no_button(client, verification_study, researcher, make_user):
    make_user("victim")
    add_members(study=verification_study, usernames=["victim", "fresh"], role="annotator")
    client.force_login(researcher)
    page = client.get(reverse("annotation:study_members", args=["verif"])).content.decode()
    victim_form = reverse("annotation:member_password", args=["verif", member(verification_study, "victim").pk])
    fresh_form = reverse("annotation:member_password", args=["verif", member(verification_study, "fresh").pk])
    assert victim_form not in page and fresh_form in page
    assert "only for annotator accounts this study created" in page

    response = client.post(victim_form, follow=True)
    assert "Password not reset" in response.content.decode() and BEFORE_EXISTED in response.content.decode()
    assert get_user_model().objects.get(username="victim").check_password("pw-victim")


# --- a reset that is allowed, and its trail ----------------------------------------------------


def test_a_reset_of_an_account_the_study_created_works_and_is_logged(client, verification_study, researcher, make_user):
    headers = auth(researcher)
    added = client.post(
        reverse("api-member-list", args=["verif"]),
        {"usernames": ["newbie"]},
        content_type="application/json",
        **headers,
    ).json()
    assert added[0]["created_user"] is True
    origin = AccountOrigin.objects.get(user__username="newbie")
    assert origin.study == verification_study and origin.how == AccountOrigin.How.ADDED
    newbie = member(verification_study, "newbie")

    response = client.post(
        password_url(verification_study, newbie.pk),
        {},
        content_type="application/json",
        REMOTE_ADDR="10.1.2.3",
        **headers,
    )
    assert response.status_code == 200
    password = response.json()["password"]
    assert client.login(username="newbie", password=password)
    client.logout()

    record = PasswordReset.objects.get()
    assert (record.study, record.researcher, record.account) == (verification_study, researcher, newbie.user)
    assert (record.researcher_username, record.account_username, record.pseudonym) == (
        "rita",
        "newbie",
        newbie.pseudonym,
    )
    assert record.ip_address == "10.1.2.3" and record.created_at is not None
    line = StudyChange.objects.get(study=verification_study, field=PASSWORD_RESET_FIELD)
    assert line.changed_by == researcher and "newbie" in line.new_value and newbie.pseudonym in line.new_value

    # Removing the member (never given an item: deleted) keeps the trail.
    assert (
        client.delete(reverse("api-member-detail", args=["verif", newbie.pk]), **headers).json()["action"] == "removed"
    )
    assert PasswordReset.objects.filter(pk=record.pk, account_username="newbie").exists()
    assert StudyChange.objects.filter(pk=line.pk).exists()

    # The settings page shows the line in the change log.
    client.force_login(researcher)
    settings_page = client.get(reverse("annotation:study_settings", args=["verif"])).content.decode()
    assert PASSWORD_RESET_FIELD in settings_page and f"password of newbie ({newbie.pseudonym}) reset" in settings_page

    # The operator sees it in the admin, read-only.
    client.force_login(make_user("op", is_staff=True, is_superuser=True))
    listing = client.get(reverse("admin:annotation_passwordreset_changelist"))
    assert (
        listing.status_code == 200 and "newbie" in listing.content.decode() and "10.1.2.3" in listing.content.decode()
    )
    assert client.get(reverse("admin:annotation_passwordreset_add")).status_code == 403
    assert client.post(reverse("admin:annotation_passwordreset_delete", args=[record.pk])).status_code == 403
    assert client.get(reverse("admin:annotation_accountorigin_changelist")).status_code == 200

    # Deleting the account or the researcher keeps the record, by name.
    get_user_model().objects.filter(username__in=["newbie", "rita"]).delete()
    record.refresh_from_db()
    assert record.account is None and record.researcher is None
    assert (record.researcher_username, record.account_username) == ("rita", "newbie")


def test_the_page_reset_is_recorded_with_the_client_address(client, verification_study, researcher):
    add_members(study=verification_study, usernames=["fresh"], role="annotator")
    client.force_login(researcher)
    fresh = member(verification_study, "fresh")
    response = client.post(
        reverse("annotation:member_password", args=["verif", fresh.pk]), REMOTE_ADDR="192.0.2.7", follow=True
    )
    assert "New password of fresh" in response.content.decode()
    record = PasswordReset.objects.get()
    assert (record.account_username, record.researcher_username, record.ip_address) == ("fresh", "rita", "192.0.2.7")


# --- every kind of account ---------------------------------------------------------------------


def _other_study(researcher_username: str | None = None):
    other = create_study(slug="other", name="Other", kind="verification")
    add_members(study=other, usernames=["olaf"], role="researcher")
    if researcher_username:
        add_members(study=other, usernames=[researcher_username], role="researcher")
    return other


def test_every_kind_of_account(verification_study, researcher, make_user):
    """Who a researcher of `verif` may reset: only accounts `verif` made, and only while nothing else holds them."""
    study = verification_study
    other = _other_study()

    # Made by this study: through add_members, and through its invite.
    add_members(study=study, usernames=["made-here"], role="annotator")
    invite = create_invite(study=study, created_by=researcher, max_uses=5).invite
    sign_up_through_invite(invite=invite, username="signed-up", password=GOOD_PASSWORD, ip_address="10.0.0.9")
    assert AccountOrigin.objects.get(user__username="signed-up").how == AccountOrigin.How.INVITE
    # Existed before: in no study ("anna" of the fixture, "loner"), and an account of another study.
    make_user("loner")
    add_members(study=other, usernames=["theirs"], role="annotator")  # made by `other`
    add_members(study=study, usernames=["loner", "theirs"], role="annotator")
    # Made here, then it joined another study through that study's invite.
    add_members(study=study, usernames=["wanderer"], role="annotator")
    join_through_invite(invite=create_invite(study=other, created_by=None).invite, user=member(study, "wanderer").user)
    # Researchers: here, and an annotator here that researches elsewhere (both made here).
    add_members(study=study, usernames=["res-here"], role="researcher")
    add_members(study=study, usernames=["res-there"], role="annotator")
    add_members(study=other, usernames=["res-there"], role="researcher")
    # Staff and superuser accounts, even ones this study made.
    add_members(study=study, usernames=["staffer", "root"], role="annotator")
    get_user_model().objects.filter(username="staffer").update(is_staff=True)
    get_user_model().objects.filter(username="root").update(is_superuser=True)
    # A deactivated member the study made.
    add_members(study=study, usernames=["gone"], role="annotator")
    set_member_active(study=study, member=member(study, "gone"), active=False)

    expected = {
        "made-here": None,
        "signed-up": None,
        "anna": BEFORE_EXISTED,
        "loner": BEFORE_EXISTED,
        "theirs": "a study you are not a researcher of",
        "wanderer": "a study you are not a researcher of",
        "res-here": "only an annotator",
        "res-there": "researcher in a study",
        "rita": "only an annotator",
        "staffer": "staff and administrator",
        "root": "staff and administrator",
        "gone": "deactivated in this study",
    }
    for username, reason in expected.items():
        target = member(study, username)
        before = target.user.password
        if reason is None:
            assert password_reset_refusal(actor=researcher, study=study, member=target) is None
            password = reset_password(actor=researcher, study=study, member=target, ip_address="127.0.0.1")
            target.user.refresh_from_db()
            assert target.user.check_password(password)
        else:
            with pytest.raises(ServiceError, match=reason):
                reset_password(actor=researcher, study=study, member=target)
            target.user.refresh_from_db()
            assert target.user.password == before, username
    assert sorted(PasswordReset.objects.values_list("account_username", flat=True)) == ["made-here", "signed-up"]
    assert StudyChange.objects.filter(study=study, field=PASSWORD_RESET_FIELD).count() == 2


def test_an_account_another_study_made_stays_refused_to_a_researcher_of_both(verification_study, researcher):
    """Running both studies does not make `verif` the maker of `other`'s account: that study's researchers
    may reset it there, nobody may through `verif`."""
    study = verification_study
    other = _other_study(researcher_username="rita")
    add_members(study=other, usernames=["theirs"], role="annotator")
    add_members(study=study, usernames=["theirs"], role="annotator")
    with pytest.raises(ServiceError, match="created by another study"):
        reset_password(actor=researcher, study=study, member=member(study, "theirs"))
    assert reset_password(actor=researcher, study=other, member=member(other, "theirs"))


def test_staff_on_the_study_page_are_held_to_the_same_rule(verification_study, make_user):
    staff = make_user("ops", is_staff=True)
    with pytest.raises(ServiceError, match=BEFORE_EXISTED):
        reset_password(actor=staff, study=verification_study, member=member(verification_study, "anna"))
    add_members(study=verification_study, usernames=["made-here"], role="annotator")
    assert reset_password(actor=staff, study=verification_study, member=member(verification_study, "made-here"))
    assert PasswordReset.objects.get().researcher_username == "ops"


def test_a_crowd_participants_account_is_never_resettable():
    study, link = crowd_study(researcher="rita")
    participant = crowd.arrive(link=link, ids=crowd.PanelIds(participant="5f1a", study="S1", session="X1"))
    target = StudyMember.objects.select_related("user").get(pk=participant.member_id)
    assert not AccountOrigin.objects.filter(user=target.user).exists()
    rita = get_user_model().objects.get(username="rita")
    with pytest.raises(ServiceError, match="not an account that logs in"):
        reset_password(actor=rita, study=study, member=target)
    assert not PasswordReset.objects.exists()


def test_the_origin_outlives_the_membership(verification_study, researcher):
    """Removed and added again, an account the study made is still its own; one it did not make never becomes so."""
    study = verification_study
    add_members(study=study, usernames=["made-here"], role="annotator")
    outcome = remove_member(study=study, member=member(study, "made-here"))
    assert outcome.action == "removed"
    add_members(study=study, usernames=["made-here"], role="annotator")
    assert reset_password(actor=researcher, study=study, member=member(study, "made-here"))

    remove_member(study=study, member=member(study, "anna"))
    add_members(study=study, usernames=["anna"], role="annotator")
    with pytest.raises(ServiceError, match=BEFORE_EXISTED):
        reset_password(actor=researcher, study=study, member=member(study, "anna"))


def test_the_migration_backfills_only_invite_sign_ups(verification_study, researcher, make_user):
    """Accounts whose invite sign-up row names the study get that origin; no other account gets one."""
    invite = create_invite(study=verification_study, created_by=researcher, max_uses=5).invite
    sign_up_through_invite(invite=invite, username="signed-up", password=GOOD_PASSWORD, ip_address=None)
    add_members(study=verification_study, usernames=["made-here"], role="annotator")
    AccountOrigin.objects.all().delete()  # as before the migration
    assert InviteSignup.objects.count() == 1

    migration = MigrationLoader(None, ignore_no_migrations=True).get_migration(
        "annotation", "0024_account_origin_password_resets"
    )
    backfill = sys.modules[type(migration).__module__].backfill_invite_origins
    from django.apps import apps

    backfill(apps, None)
    origins = list(AccountOrigin.objects.values_list("user__username", "study__slug", "how"))
    assert origins == [("signed-up", "verif", "invite")]
