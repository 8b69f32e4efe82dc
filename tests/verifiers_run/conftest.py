"""Fixtures for verifier runs: a study with claims, verifiers, and the loopback OpenAI-compatible server."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings as django_settings

from annotation.members.services import add_members
from annotation.models import Study
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.models import Verifier
from metaeval.verifiers.services import create_verifier
from tests.conftest import jsonl
from tests.support.fake_openai import FakeOpenAI


def claim_item(item_id: str, claim: str, *, system: str = "", response_id: str = "", evidence: str = "") -> dict:
    record = {
        "id": item_id,
        "claim": claim,
        "domain": "test",
        "evidence": [
            {"text": evidence or f"A passage about {claim}", "title": "Doc", "url": "https://example.org/doc"}
        ],
    }
    if system:
        record["system"] = system
    if response_id:
        record["response_id"] = response_id
    return record


@pytest.fixture
def claims_study(db, researcher, annotator) -> Study:
    """A verification study (supported / contradicted / inconclusive) with six plain claims and a researcher."""
    study = create_study(slug="claims", name="Claims", kind="verification", annotators_per_item=3)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    add_members(study=study, usernames=[annotator.username], role="annotator")
    import_items(
        study=study, stream=jsonl(*(claim_item(f"c{n}", f"Claim number {n} holds.") for n in range(1, 7))), fmt="jsonl"
    )
    return study


def add_items(study: Study, records: list[dict]) -> None:
    import_items(study=study, stream=jsonl(*records), fmt="jsonl")


def add_labels(study: Study, labels: list[tuple[str, str, str]]) -> None:
    """(item, annotator, label) triples as imported annotations."""
    import_annotations(
        study=study, stream=jsonl(*({"item": i, "annotator": a, "label": lab} for i, a, lab in labels)), fmt="jsonl"
    )


@pytest.fixture
def fake_server():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(autouse=True)
def endpoint_settings(settings):
    """Each test starts with no operator endpoints, researcher endpoints off and an empty allow-list."""
    settings.VERIFIER_ENDPOINTS = {}
    settings.VERIFIER_RESEARCHER_ENDPOINTS = False
    settings.VERIFIER_ADDRESS_ALLOW = []
    return settings


def operator_endpoint(base_url: str, *, name: str = "test", key_env: str = "", **extra: Any) -> str:
    """Define an operator endpoint for this test (the autouse fixture restores the settings afterwards)."""
    django_settings.VERIFIER_ENDPOINTS[name] = {"base_url": base_url.rstrip("/"), "key_env": key_env, **extra}
    return name


def llm_verifier(study: Study, base_url: str, *, api_key_env: str = "", **overrides) -> Verifier:
    """An LLM verifier on an operator endpoint ``test`` at ``base_url`` whose key is in ``api_key_env``."""
    fields: dict[str, Any] = {
        "name": "gpt",
        "preset": "veriscore_ternary",
        "model": "fake-model",
        "endpoint": operator_endpoint(base_url, key_env=api_key_env),
        "concurrency": 4,
        "timeout": 5.0,
        "retries": 0,
    }
    fields.update(overrides)
    return create_verifier(study=study, **fields)
