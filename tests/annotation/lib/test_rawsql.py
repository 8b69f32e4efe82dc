"""The hand-written SQL of the hot path reads and writes exactly what the ORM would.

These run on the suite's database (SQLite locally, PostgreSQL on CI), where
the converters differ: JSON arrives as text, SQLite's datetimes as text and
booleans as integers.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from accounts.services import issue_token
from annotation.access import access_assignment, access_study
from annotation.lib.rawsql import ModelRows, fetch_one, insert_returning_id, names
from annotation.models import Annotation, Assignment, Item, Study
from annotation.transfer.services.item_import import import_items
from annotation.workbench import assignment_sql
from annotation.workbench import services as assignments
from tests.conftest import jsonl, verification_item


def _load(study: Study, *records: dict) -> None:
    """Import the items and open the study for annotation."""
    import_items(study=study, stream=jsonl(*records), fmt="jsonl")
    study.status = Study.Status.OPEN
    study.save()


def _field_values(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def _study_row(slug: str) -> Study:
    rows, S = ModelRows(Study, alias="s"), names(Study)
    row = fetch_one(f"SELECT {rows.select} FROM {S.table} s WHERE s.{S.slug} = %s", (slug,))
    assert row is not None, f"no study {slug!r}"
    return rows.instance(row)


@pytest.mark.django_db
def test_model_rows_read_every_field_as_the_orm_does(preference_study):
    Study.objects.filter(pk=preference_study.pk).update(
        labels=["a_strong", "tie"],
        label_aliases={"A>>B": "a_strong"},
        systems=["veriscore", "safe"],
        tie_allowed=False,
        both_bad_allowed=True,
        instructions="Read <b>carefully</b> é",
    )
    expected = Study.objects.get(pk=preference_study.pk)
    read = _study_row(preference_study.slug)
    assert _field_values(read) == _field_values(expected)
    assert isinstance(read.labels, list) and read.tie_allowed is False and read.both_bad_allowed is True
    assert read.created_at.tzinfo is not None
    assert not read._state.adding and read._state.db == connection.alias


@pytest.mark.django_db
def test_columns_not_read_are_deferred_and_load_on_access(verification_study):
    _load(verification_study, verification_item("c-1", domain="wiki"))
    item = assignment_sql.item(Item.objects.get(study=verification_study).pk)
    assert {"domain", "position", "gold_label"} <= item.get_deferred_fields()
    assert "payload" not in item.get_deferred_fields()
    assert item.payload["claim"] == "Claim c-1 is true."
    assert item.domain == "wiki"  # one extra query, as with .only()


@pytest.mark.django_db
def test_model_rows_refuse_unknown_fields():
    with pytest.raises(ValueError, match="no concrete field"):
        ModelRows(Item, ("id", "not_a_field"))


@pytest.mark.django_db
def test_names_are_the_quoted_columns():
    qn = connection.ops.quote_name
    assert names(Item).slots_taken == qn("slots_taken")
    assert names(Item).study == qn("study_id")
    assert names(Assignment).table == qn("annotation_assignment")


@pytest.mark.django_db
def test_insert_returning_id_stores_json_and_times_like_the_orm(verification_study, annotator):
    _load(verification_study, verification_item("c-1"))
    now = timezone.now()
    assignment = assignments.claim_next(user=annotator, study=verification_study, now=now)
    judgements = [{"index": 0, "judgement": "support", "useful": True}]
    pk = insert_returning_id(
        Annotation,
        {
            "assignment_id": assignment.pk,
            "study_id": verification_study.pk,
            "label": "supported",
            "raw_label": "Supported",
            "preferred_system": "",
            "strength": "",
            "choice": "supported",
            "justification": "«quoted» 'text'; DROP TABLE x; --",
            "evidence_judgements": judgements,
            "active_ms": 1234,
            "source": "api",
            "created_at": now,
            "updated_at": now + timedelta(seconds=1),
        },
    )
    stored = Annotation.objects.get(pk=pk)
    assert stored.evidence_judgements == judgements
    assert stored.justification == "«quoted» 'text'; DROP TABLE x; --"
    assert stored.created_at == now and stored.updated_at == now + timedelta(seconds=1)
    assert stored.active_ms == 1234 and stored.assignment_id == assignment.pk


@pytest.mark.django_db
def test_claimed_assignment_equals_what_the_orm_reads_back(verification_study, annotator):
    _load(verification_study, verification_item("c-1"), verification_item("c-2"))
    claimed = assignments.claim_next(user=annotator, study=verification_study)
    assert _field_values(claimed) == _field_values(Assignment.objects.get(pk=claimed.pk))
    again = assignments.claim_next(user=annotator, study=verification_study)  # the renewed lease, read by SQL
    stored = Assignment.objects.get(pk=claimed.pk)
    assert _field_values(again) == _field_values(stored)
    assert again.item.payload == Item.objects.get(pk=claimed.item_id).payload
    assert json.dumps(again.item.payload)  # a dict, not the JSON text


@pytest.mark.django_db
def test_access_helpers_refuse_anonymous_users(verification_study, annotator):
    with pytest.raises(Http404):
        access_study(AnonymousUser(), verification_study.slug)
    _load(verification_study, verification_item("c-1"))
    assignment = assignments.claim_next(user=annotator, study=verification_study)
    with pytest.raises(Http404):
        access_assignment(AnonymousUser(), assignment.pk)
    found = access_assignment(annotator, assignment.pk)
    assert found.study.user_role == "annotator" and found.study.labels == verification_study.labels


@pytest.mark.django_db
def test_token_authentication_answers_like_drf(client, researcher, verification_study):
    url = reverse("api-study-list")
    token = issue_token(user=researcher)
    ok = client.get(url, HTTP_AUTHORIZATION=f"Token {token.key}")
    assert ok.status_code == 200 and [study["slug"] for study in ok.json()["results"]] == ["verif"]
    unknown = client.get(url, HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert unknown.status_code == 401 and unknown.json()["detail"] == "Invalid token."
    assert unknown.headers["WWW-Authenticate"] == "Token"
    researcher.is_active = False
    researcher.save()
    inactive = client.get(url, HTTP_AUTHORIZATION=f"Token {token.key}")
    assert inactive.status_code == 401 and inactive.json()["detail"] == "User inactive or deleted."


@pytest.mark.django_db
def test_schema_still_documents_token_authentication(client, researcher):
    client.force_login(researcher)
    schema = json.loads(client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    assert schema["components"]["securitySchemes"]["tokenAuth"] == {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": 'Token-based authentication with required prefix "Token"',
    }
