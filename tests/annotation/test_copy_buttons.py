"""Copy buttons beside the invite link (shown once) and the crowd participant link (issue 34)."""

from __future__ import annotations

from django.urls import reverse


def test_the_new_invite_link_has_a_copy_button_and_a_live_status(client, researcher, verification_study):
    client.force_login(researcher)
    response = client.post(
        reverse("annotation:invite_create", args=["verif"]),
        {"invite-role": "annotator", "invite-max_uses": "1", "invite-expires_in_days": "7"},
    )
    body = response.content.decode()
    assert 'id="new-invite-url"' in body
    assert 'data-copy="new-invite-url" data-copy-status="copy-invite-status"' in body
    assert '<span id="copy-invite-status" class="copy-status" aria-live="polite"></span>' in body
    assert "js/copy_link.js" in body


def test_the_participant_link_has_a_copy_button_and_a_live_status(client, researcher, verification_study):
    client.force_login(researcher)
    body = client.get(reverse("annotation:study_participants", args=["verif"])).content.decode()
    assert 'data-copy="link-url" data-copy-status="copy-link-status"' in body
    assert '<span id="copy-link-status" class="copy-status" aria-live="polite"></span>' in body
    assert "js/copy_link.js" in body
