"""The members and invites API: researchers manage, everyone else gets 404; errors in the one shape."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.services import issue_token
from annotation.members.invites import find_invite
from annotation.models import AccountOrigin, Invite, StudyMember
from annotation.workbench.services import claim_next


def auth(user) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Token {issue_token(user=user).key}"}


def member_id(study, username: str) -> int:
    return StudyMember.objects.get(study=study, user__username=username).pk


@pytest.mark.django_db
def test_list_and_add_members(client, loaded_verification_study, researcher):
    headers = auth(researcher)
    url = reverse("api-member-list", args=["verif"])
    rows = client.get(url, **headers).json()
    by_name = {row["pseudonym"]: row for row in rows}
    assert {"username", "role", "is_active", "is_external", "annotations"} <= set(rows[0])
    external = [row for row in rows if row["is_external"]]
    assert external and all(row["username"] is None for row in external)
    assert by_name["ann-01"]["username"] == "anna" and by_name["ann-01"]["role"] == "annotator"

    response = client.post(url, {"usernames": ["newbie", "anna"]}, content_type="application/json", **headers)
    assert response.status_code == 200
    added = {row["username"]: row for row in response.json()}
    assert added["newbie"]["role"] == "annotator" and added["newbie"]["created_user"] is True
    assert len(added["newbie"]["password"]) >= 16 and added["anna"]["already_member"] is True
    assert added["anna"]["password"] is None

    bad = client.post(url, {"usernames": ["x"], "role": "boss"}, content_type="application/json", **headers)
    assert bad.status_code == 400 and bad.json()["code"] == "invalid" and "role" in bad.json()["fields"]
    junk = client.post(url, {"usernames": ["x"], "rol": "annotator"}, content_type="application/json", **headers)
    assert junk.status_code == 400 and "'rol'" in junk.json()["detail"]


@pytest.mark.django_db
def test_change_role_deactivate_and_remove(client, loaded_verification_study, researcher, annotator):
    study = loaded_verification_study
    headers = auth(researcher)
    anna = member_id(study, "anna")
    url = reverse("api-member-detail", args=["verif", anna])
    claim_next(user=annotator, study=study)

    response = client.patch(url, {"is_active": False}, content_type="application/json", **headers)
    assert response.status_code == 200 and response.json()["is_active"] is False
    response = client.patch(url, {"is_active": True, "role": "researcher"}, content_type="application/json", **headers)
    assert response.json()["is_active"] is True and response.json()["role"] == "researcher"
    empty = client.patch(url, {}, content_type="application/json", **headers)
    assert empty.status_code == 400 and "send role, is_active, can_adjudicate or several" in empty.json()["detail"]

    response = client.delete(url, **headers)
    assert response.status_code == 200
    body = response.json()
    assert body["action"] == "deactivated" and body["member"]["is_active"] is False  # was given an item

    add = client.post(
        reverse("api-member-list", args=["verif"]), {"usernames": ["brief"]}, content_type="application/json", **headers
    )
    assert add.status_code == 200
    response = client.delete(reverse("api-member-detail", args=["verif", member_id(study, "brief")]), **headers)
    assert response.json()["action"] == "removed"
    assert not StudyMember.objects.filter(study=study, user__username="brief").exists()


@pytest.mark.django_db
def test_the_last_researcher_is_refused_with_a_reason(client, verification_study, researcher):
    headers = auth(researcher)
    url = reverse("api-member-detail", args=["verif", member_id(verification_study, "rita")])
    for response in (
        client.delete(url, **headers),
        client.patch(url, {"role": "annotator"}, content_type="application/json", **headers),
        client.patch(url, {"is_active": False}, content_type="application/json", **headers),
    ):
        assert response.status_code == 400 and "only researcher" in response.json()["detail"]
    assert StudyMember.objects.get(study=verification_study, user=researcher).role == "researcher"


@pytest.mark.django_db
def test_password_reset_returns_the_password_once_and_refuses_researchers(client, verification_study, researcher):
    headers = auth(researcher)
    anna = member_id(verification_study, "anna")
    AccountOrigin.objects.create(
        user=StudyMember.objects.get(pk=anna).user, study=verification_study, how=AccountOrigin.How.ADDED
    )
    response = client.post(reverse("api-member-password", args=["verif", anna]), **headers)
    assert response.status_code == 200 and response.json()["username"] == "anna"
    assert client.login(username="anna", password=response.json()["password"])
    rita = member_id(verification_study, "rita")
    refused = client.post(reverse("api-member-password", args=["verif", rita]), **headers)
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert "only an annotator" in refused.json()["detail"]


@pytest.mark.django_db
def test_invites_create_list_revoke(client, verification_study, researcher):
    headers = auth(researcher)
    url = reverse("api-invite-list", args=["verif"])
    response = client.post(url, {"max_uses": 3, "expires_in_days": 14}, content_type="application/json", **headers)
    assert response.status_code == 201
    body = response.json()
    assert body["role"] == "annotator" and body["max_uses"] == 3 and body["uses"] == 0 and body["state"] == "active"
    assert body["url"].endswith(f"/invite/{body['token']}/") and body["url"].startswith("http")
    assert find_invite(body["token"]).pk == body["id"]

    listed = client.get(url, **headers).json()
    assert [row["id"] for row in listed] == [body["id"]] and "token" not in listed[0] and "url" not in listed[0]
    for bad, field in (({"max_uses": 0}, "max_uses"), ({"expires_in_days": 1000}, "expires_in_days")):
        response = client.post(url, bad, content_type="application/json", **headers)
        assert response.status_code == 400 and field in response.json()["fields"]

    detail = reverse("api-invite-detail", args=["verif", body["id"]])
    response = client.delete(detail, **headers)
    assert response.status_code == 200 and response.json()["state"] == "revoked"
    assert client.get(detail, **headers).json()["revoked_at"] is not None
    assert Invite.objects.count() == 1


@pytest.mark.django_db
def test_annotators_and_outsiders_get_404(client, verification_study, researcher, annotator, make_user):
    invite_id = client.post(
        reverse("api-invite-list", args=["verif"]), {}, content_type="application/json", **auth(researcher)
    ).json()["id"]
    anna = member_id(verification_study, "anna")
    for user in (annotator, make_user("olga")):
        headers = auth(user)
        for method, url in (
            ("get", reverse("api-member-list", args=["verif"])),
            ("post", reverse("api-member-list", args=["verif"])),
            ("get", reverse("api-member-detail", args=["verif", anna])),
            ("delete", reverse("api-member-detail", args=["verif", anna])),
            ("post", reverse("api-member-password", args=["verif", anna])),
            ("get", reverse("api-invite-list", args=["verif"])),
            ("post", reverse("api-invite-list", args=["verif"])),
            ("delete", reverse("api-invite-detail", args=["verif", invite_id])),
        ):
            response = getattr(client, method)(url, **headers)
            assert response.status_code == 404 and response.json()["code"] == "not_found", (user, method, url)
    assert StudyMember.objects.get(pk=anna).is_active and Invite.objects.get().revoked_at is None


@pytest.mark.django_db
def test_staff_manage_any_study(client, verification_study, make_user):
    staff = make_user("ops", is_staff=True)
    response = client.get(reverse("api-member-list", args=["verif"]), **auth(staff))
    assert response.status_code == 200 and {row["username"] for row in response.json()} == {"rita", "anna"}
