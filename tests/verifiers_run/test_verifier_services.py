"""Defining verifiers: every face goes through these checks, so a bad definition never reaches a run."""

from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.errors import ServiceError
from annotation.studies.services import create_study
from metaeval.models import Verifier
from metaeval.verifiers import addresses
from metaeval.verifiers.services import VerifierInvalid, create_verifier, ensure_baselines, update_verifier
from tests.verifiers_run.conftest import operator_endpoint

pytestmark = pytest.mark.django_db

GOOD = {
    "name": "gpt",
    "preset": "veriscore_ternary",
    "model": "gpt-4o-mini",
    "endpoint": "openai",
}
OWN = {"endpoint": "", "api_key": "sk-own"}  # a researcher endpoint


@pytest.fixture(autouse=True)
def openai_endpoint(endpoint_settings, monkeypatch):
    """An operator endpoint ``openai``; researcher endpoints allowed, every host resolving to a public address."""
    operator_endpoint("https://api.openai.com/v1", name="openai", key_env="OPENAI_API_KEY")
    endpoint_settings.VERIFIER_RESEARCHER_ENDPOINTS = True
    monkeypatch.setattr(addresses, "resolve", lambda host, port: ["93.184.216.34"])


def test_a_good_llm_verifier_is_stored_with_the_endpoint_name_only(claims_study):
    verifier = create_verifier(study=claims_study, **GOOD, price_input_per_1k="0.15", price_output_per_1k=0.6)
    assert (verifier.kind, verifier.endpoint, verifier.base_url, verifier.concurrency, verifier.retries) == (
        "llm",
        "openai",
        "",
        8,
        2,
    )
    verifier.refresh_from_db()
    assert (verifier.price_input_per_1k, verifier.price_output_per_1k) == (Decimal("0.15"), Decimal("0.6"))
    assert not verifier.is_baseline and verifier.is_runnable


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({**OWN, "base_url": "ftp://example.org/v1"}, "base_url", "http:// or https://"),
        ({**OWN, "base_url": "api.openai.com/v1"}, "base_url", "http:// or https://"),
        ({**OWN, "base_url": "https://user:secret@example.org/v1"}, "base_url", "user name or password"),
        ({**OWN, "base_url": "https://example.org/v1?key=secret"}, "base_url", "must not contain a query"),
        ({**OWN, "base_url": ""}, "endpoint", "required"),
        ({"endpoint": "elsewhere"}, "endpoint", "not an endpoint of this server; choose one of: openai"),
        ({"base_url": "https://api.example.org/v1"}, "base_url", "the 'openai' endpoint has its own URL"),
        ({"api_key": "sk-proj-abc"}, "api_key", "uses the server's key"),  # a server key goes only to its endpoint
        ({"api_key_env": "SECRET_KEY"}, "api_key_env", "unknown field"),  # no free key variable any more
        ({"preset": "gpt-judge"}, "preset", "is not a preset"),
        ({"model": " "}, "model", "required"),
        ({"temperature": 2.5}, "temperature", "between 0 and 2"),
        ({"concurrency": 0}, "concurrency", "between 1 and 64"),
        ({"timeout": -1}, "timeout", "between"),
        ({"retries": "many"}, "retries", "whole number"),
        ({"max_tokens": 1.5}, "max_tokens", "whole number"),
        ({"template": "Claim: {{ claim }}"}, "template", "only the custom preset"),
        ({"preset": "factscore"}, "label_map", "'unsupported' is not one of the study's labels"),
        ({"label_map": {"supported": "true"}}, "label_map", "not one of the study's labels"),
        ({"price_output_per_1k": "-1"}, "price_output_per_1k", "price from 0"),
        ({"name": ""}, "name", "required"),
    ],
)
def test_bad_definitions_are_refused_with_the_field_named(claims_study, changes, field, says):
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(study=claims_study, **{**GOOD, **changes})
    assert field in refused.value.errors, refused.value.errors
    assert says in refused.value.errors[field]
    assert not Verifier.objects.exists()


def test_a_researcher_endpoint_is_stored_with_its_url_and_an_encrypted_key(claims_study):
    verifier = create_verifier(study=claims_study, **{**GOOD, **OWN, "base_url": "https://llm.example.org/v1"})
    assert (verifier.endpoint, verifier.base_url, verifier.has_api_key) == ("", "https://llm.example.org/v1", True)
    assert "sk-own" not in verifier.api_key_encrypted


def test_a_binary_preset_works_once_its_labels_are_mapped(claims_study):
    verifier = create_verifier(
        study=claims_study, **{**GOOD, "preset": "factscore"}, label_map={"unsupported": "inconclusive"}
    )
    assert verifier.label_map == {"unsupported": "inconclusive"}


def test_custom_preset_template_and_labels_are_checked(claims_study):
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(study=claims_study, **{**GOOD, "preset": "custom"}, template="Is it {% if %} true?")
    assert "syntax" in refused.value.errors["template"]
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(study=claims_study, **{**GOOD, "preset": "custom"}, template="Is it true?")
    assert "must show the claim" in refused.value.errors["template"]
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(
            study=claims_study, **{**GOOD, "preset": "custom"}, template="{{ claim }}", custom_labels=["yes", "no"]
        )
    assert "'yes', 'no'" in refused.value.errors["label_map"]
    verifier = create_verifier(
        study=claims_study,
        **{**GOOD, "preset": "custom"},
        template="{{ claim }}? yes or no",
        custom_labels="yes, no",
        label_map={"yes": "supported", "no": "contradicted"},
    )
    assert verifier.custom_labels == ["yes", "no"]


def test_names_are_unique_per_study(claims_study):
    create_verifier(study=claims_study, **GOOD)
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(study=claims_study, **{**GOOD, "name": " gpt "})
    assert "already has a verifier named 'gpt'" in refused.value.errors["name"]


def test_preference_studies_have_no_claim_verifiers(db):
    study = create_study(slug="pref", name="P", kind="preference")
    with pytest.raises(ServiceError, match="claim verifiers and baselines judge verification studies"):
        create_verifier(study=study, **GOOD)


def test_update_checks_the_same_rules_and_keeps_the_kind(claims_study):
    verifier = create_verifier(study=claims_study, **GOOD)
    with pytest.raises(VerifierInvalid) as refused:
        update_verifier(verifier=verifier, endpoint="", base_url="file:///etc/passwd")
    assert "base_url" in refused.value.errors
    with pytest.raises(VerifierInvalid):
        update_verifier(verifier=verifier, kind="baseline_majority")
    updated = update_verifier(verifier=verifier, temperature=0.7)
    verifier.refresh_from_db()
    assert (updated.temperature, verifier.temperature, verifier.endpoint) == (0.7, 0.7, "openai")


def test_baselines_take_no_model_and_check_their_options(claims_study):
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(study=claims_study, name="b", kind="baseline_majority", model="gpt-4o")
    assert "model" in refused.value.errors
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(study=claims_study, name="b", kind="baseline_overlap", options={"threshold": 1.5})
    assert "threshold" in refused.value.errors["threshold"] or "between 0 and 1" in str(refused.value)
    with pytest.raises(VerifierInvalid) as refused:
        create_verifier(study=claims_study, name="b", kind="baseline_overlap", options={"positive_label": "true"})
    assert "positive_label" in refused.value.errors["options"]
    overlap = create_verifier(study=claims_study, name="b", kind="baseline_overlap")
    assert overlap.options == {"threshold": 0.5, "positive_label": "supported", "negative_label": "inconclusive"}


def test_ensure_baselines_is_idempotent_and_avoids_taken_names(claims_study):
    create_verifier(study=claims_study, **{**GOOD, "name": "baseline-majority"})
    first = ensure_baselines(study=claims_study)
    again = ensure_baselines(study=claims_study)
    assert [v.pk for v in first] == [v.pk for v in again]
    assert [(v.kind, v.name) for v in first] == [
        ("baseline_majority", "baseline-majority-2"),
        ("baseline_overlap", "baseline-overlap"),
    ]
