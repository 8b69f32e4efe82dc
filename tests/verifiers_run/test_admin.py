"""The admin for verifiers, runs and predictions: pages render, and definitions pass the services' checks."""

from __future__ import annotations

import pytest
from django.urls import reverse

from metaeval.models import Prediction, Verifier, VerifierRun
from metaeval.verifiers.services import create_verifier, import_predictions, start_run
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client, make_user, claims_study):
    verifier = create_verifier(study=claims_study, name="overlap", kind="baseline_overlap")
    start_run(verifier=verifier, enqueue=False)
    import_predictions(
        study=claims_study, stream=jsonl({"item": "c1", "verifier": "x", "label": "supported"}), fmt="jsonl"
    )
    client.force_login(make_user("staff", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize("model", [Verifier, VerifierRun, Prediction], ids=lambda model: model.__name__)
def test_changelist_search_and_change_page_render(staff, model):
    name = model._meta.model_name
    assert staff.get(reverse(f"admin:metaeval_{name}_changelist"), {"q": "c1"}).status_code == 200
    assert staff.get(reverse(f"admin:metaeval_{name}_change", args=[model.objects.first().pk])).status_code == 200


def test_the_admin_form_refuses_what_the_services_refuse(staff, claims_study, endpoint_settings):
    endpoint_settings.VERIFIER_RESEARCHER_ENDPOINTS = True
    response = staff.post(
        reverse("admin:metaeval_verifier_add"),
        {
            "study": claims_study.pk,
            "name": "gpt",
            "kind": "llm",
            "preset": "veriscore_ternary",
            "model": "m",
            "endpoint": "",
            "base_url": "gopher://example.org",
            "api_key": "sk-typed-into-the-admin",
            "temperature": "0",
            "max_tokens": "512",
            "concurrency": "8",
            "timeout": "60",
            "retries": "2",
            "custom_labels": "[]",
            "label_map": "{}",
            "options": "{}",
        },
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "http:// or https://" in errors["base_url"][0]
    assert "sk-typed-into-the-admin" not in response.content.decode()  # the key field is never rendered back
    assert not Verifier.objects.filter(name="gpt").exists()


def test_the_admin_stores_a_researcher_key_encrypted(staff, claims_study, endpoint_settings):
    endpoint_settings.VERIFIER_RESEARCHER_ENDPOINTS = True
    endpoint_settings.VERIFIER_ADDRESS_ALLOW = ["127.0.0.1/32"]
    form = {
        "study": claims_study.pk,
        "name": "own",
        "kind": "llm",
        "preset": "veriscore_ternary",
        "model": "m",
        "endpoint": "",
        "base_url": "http://127.0.0.1:8001/v1",
        "api_key": "sk-typed-into-the-admin",
        "temperature": "0",
        "max_tokens": "512",
        "concurrency": "8",
        "timeout": "60",
        "retries": "2",
        "custom_labels": "[]",
        "label_map": "{}",
        "options": "{}",
    }
    response = staff.post(reverse("admin:metaeval_verifier_add"), form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    verifier = Verifier.objects.get(name="own")
    assert verifier.has_api_key and "sk-typed" not in verifier.api_key_encrypted
    stored = verifier.api_key_encrypted
    change = reverse("admin:metaeval_verifier_change", args=[verifier.pk])
    assert "sk-typed-into-the-admin" not in staff.get(change).content.decode()
    staff.post(change, {**form, "api_key": "", "temperature": "0.5"})  # an edit without a key keeps it
    verifier.refresh_from_db()
    assert (verifier.temperature, verifier.api_key_encrypted) == (0.5, stored)


def test_runs_and_predictions_are_not_edited_by_hand(staff):
    assert staff.get(reverse("admin:metaeval_prediction_add")).status_code == 403
    assert staff.get(reverse("admin:metaeval_verifierrun_add")).status_code == 403
