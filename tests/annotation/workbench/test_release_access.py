"""The annotate page's release route checks ownership before anything else (issue 31, finding 6).

Another user's assignment, or one that does not exist, is a 404 whatever was sent (with or
without the stamp), and nothing is changed.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Assignment
from annotation.workbench.services import claim_next
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("with_stamp", [False, True])
def test_another_users_assignment_is_a_404_and_is_kept(client, with_stamp):
    study, (a1, a2, _) = make_study(items=3, n=1)
    current = claim_next(user=a1, study=study)
    ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
    client.force_login(a2)
    url = reverse("annotation:annotate_release", args=[study.slug, ahead.pk])
    data = {"updated_at": ahead.updated_at.isoformat()} if with_stamp else {}
    assert client.post(url, data).status_code == 404
    assert Assignment.objects.filter(pk=ahead.pk, status="active").exists()


def test_a_missing_assignment_is_a_404(client):
    study, (a1, *_) = make_study(items=3, n=1)
    client.force_login(a1)
    assert client.post(reverse("annotation:annotate_release", args=[study.slug, 999999]), {}).status_code == 404


def test_ones_own_release_still_works(client):
    study, (a1, *_) = make_study(items=3, n=1)
    current = claim_next(user=a1, study=study)
    ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
    client.force_login(a1)
    url = reverse("annotation:annotate_release", args=[study.slug, ahead.pk])
    assert client.post(url, {}).status_code == 400
    assert client.post(url, {"updated_at": ahead.updated_at.isoformat()}).json() == {"released": True}
