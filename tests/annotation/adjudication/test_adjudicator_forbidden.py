"""An adjudicator who is no researcher gets 403 from the settings and import pages (issue 31, finding 6)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import StudyMember

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("page", ["adjudication_settings", "adjudication_import"])
def test_an_adjudicator_posting_to_researchers_pages_gets_403(client, loaded_verification_study, make_user, page):
    study = loaded_verification_study
    judge = make_user("judge")
    add_members(study=study, usernames=["judge"], role="annotator")
    StudyMember.objects.filter(study=study, user=judge).update(can_adjudicate=True)
    client.force_login(judge)
    data = {"file": SimpleUploadedFile("a.jsonl", b"{}\n")} if page == "adjudication_import" else {}
    assert client.post(reverse(f"annotation:{page}", args=[study.slug]), data).status_code == 403
