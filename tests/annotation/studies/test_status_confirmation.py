"""Close and Pause ask first (issue 34): without the confirmation a POST changes nothing and asks."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Study
from annotation.studies.services import change_status, create_study
from annotation.transfer.services.item_import import import_items
from tests.conftest import jsonl, verification_item


@pytest.fixture
def open_study(researcher) -> Study:
    study = create_study(slug="s", name="Pilot", kind="verification", status="draft", created_by=researcher)
    import_items(study=study, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    change_status(study=study, status="open")
    return study


@pytest.mark.parametrize(("status", "asked"), [("closed", "Close Pilot?"), ("paused", "Pause Pilot?")])
def test_close_and_pause_without_confirmation_change_nothing_and_ask(client, researcher, open_study, status, asked):
    client.force_login(researcher)
    url = reverse("annotation:study_status", args=["s"])
    response = client.post(url, {"status": status, "next": "detail"})
    body = response.content.decode()
    assert response.status_code == 200
    assert Study.objects.get(slug="s").status == "open"
    assert asked in body and 'id="status-confirm"' in body
    # the page's own form carries the confirmation, the status and where to go back
    assert 'name="confirm" value="yes"' in body and f'name="status" value="{status}"' in body
    assert 'name="next" value="detail"' in body
    response = client.post(url, {"status": status, "next": "detail", "confirm": "yes"})
    assert response.status_code == 302 and response["Location"] == reverse("annotation:study_detail", args=["s"])
    assert Study.objects.get(slug="s").status == status


def test_open_and_resume_need_no_confirmation(client, researcher, open_study):
    change_status(study=open_study, status="paused")
    client.force_login(researcher)
    url = reverse("annotation:study_status", args=["s"])
    assert client.post(url, {"status": "open"}).status_code == 302
    assert Study.objects.get(slug="s").status == "open"


def test_a_refused_move_is_refused_at_once_not_asked(client, researcher):
    create_study(slug="d", name="Draft", kind="verification", status="draft", created_by=researcher)
    client.force_login(researcher)
    response = client.post(reverse("annotation:study_status", args=["d"]), {"status": "closed"}, follow=True)
    assert "The status was not changed" in response.content.decode()
    assert Study.objects.get(slug="d").status == "draft"


def test_the_status_buttons_carry_their_question_and_the_dialog(client, researcher, open_study):
    client.force_login(researcher)
    for name in ("annotation:study_detail", "annotation:study_settings"):
        body = client.get(reverse(name, args=["s"])).content.decode()
        assert 'value="paused" data-confirm="Pause Pilot?' in body, name
        assert 'value="closed" data-confirm="Close Pilot?' in body, name
        assert '<dialog id="status-dialog"' in body and "js/confirm_status.js" in body, name
