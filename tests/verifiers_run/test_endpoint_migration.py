"""The migration to endpoints: a verifier on an operator endpoint's URL names that endpoint; others keep their URL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)


def with_annotation_leaf(target: tuple[str, str]) -> list[tuple[str, str]]:
    """`target`, with the annotation app fully migrated: the historical Study must have every
    column the database has (a later NOT NULL column missing from it would fail the insert)."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    return [target, *(node for node in leaves if node[0] == "annotation")]


def test_free_urls_become_operator_endpoints_or_researcher_endpoints(settings):
    settings.VERIFIER_ENDPOINTS = {"openai": {"base_url": "https://api.openai.com/v1", "key_env": "OPENAI_API_KEY"}}
    BEFORE = with_annotation_leaf(("metaeval", "0001_verifiers"))
    AFTER = with_annotation_leaf(("metaeval", "0002_verifier_endpoints"))
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    study = apps.get_model("annotation", "Study").objects.create(slug="s", name="S", kind="verification")
    verifier = apps.get_model("metaeval", "Verifier")
    llm = {"study": study, "kind": "llm", "preset": "veriscore_ternary", "model": "gpt-4o-mini"}
    verifier.objects.create(
        name="on-openai", base_url="https://api.openai.com/v1/", api_key_env="OPENAI_API_KEY", **llm
    )
    verifier.objects.create(name="elsewhere", base_url="http://127.0.0.1:6379/v1", api_key_env="OPENAI_API_KEY", **llm)
    verifier.objects.create(study=study, name="gpt-4", kind="imported")
    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    apps = executor.loader.project_state(AFTER).apps
    rows = {
        row["name"]: row
        for row in apps.get_model("metaeval", "Verifier").objects.values(
            "name", "endpoint", "base_url", "api_key_encrypted"
        )
    }
    assert rows["on-openai"] == {"name": "on-openai", "endpoint": "openai", "base_url": "", "api_key_encrypted": ""}
    assert rows["elsewhere"]["endpoint"] == "" and rows["elsewhere"]["base_url"] == "http://127.0.0.1:6379/v1"
    assert rows["gpt-4"]["endpoint"] == "" and rows["gpt-4"]["base_url"] == ""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
