"""The verifiers page shows what applies: only a pairwise judge for a preference study, no baseline button twice."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.members.services import add_members
from annotation.studies.services import create_study
from metaeval.verifiers.selectors import missing_baselines
from metaeval.verifiers.services import ensure_baselines

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.verifiers_run.urls")]


def test_a_preference_study_is_offered_only_a_pairwise_judge(client, researcher):
    study = create_study(slug="prefs", name="Prefs", kind="preference", systems=["a", "b"])
    add_members(study=study, usernames=[researcher.username], role="researcher")
    client.force_login(researcher)
    html = client.get(reverse("verifiers:list", args=[study.slug])).content.decode()
    assert 'id="verifiers-not-applicable"' in html and "pairwise LLM judge" in html
    for form in ('id="verifier-form"', 'id="add-baselines"', "Import predictions"):
        assert form not in html, form
    assert 'id="pairwise-judge-form"' in html and 'id="runs"' in html  # what does apply: judges and their runs
    assert reverse("metaeval:report", args=[study.slug]) in html


def test_the_baselines_button_offers_only_what_is_missing(client, researcher, claims_study):
    client.force_login(researcher)
    url = reverse("verifiers:list", args=[claims_study.slug])
    html = client.get(url).content.decode()
    assert "Add the two baselines" in html and 'id="verifier-form"' in html
    assert 'id="verifiers-not-applicable"' not in html
    _majority, overlap = ensure_baselines(study=claims_study)
    assert missing_baselines(claims_study) == []
    assert 'id="add-baselines"' not in client.get(url).content.decode()
    overlap.delete()
    html = client.get(url).content.decode()
    offer = re.search(r'<form[^>]*id="add-baselines".*?</form>', html, re.S).group(0)
    assert "Add the missing baseline" in offer and "lexical overlap" in offer and "always the majority" not in offer
