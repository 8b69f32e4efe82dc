"""The import fast path (annotation/lib/bulk.py: executemany on SQLite, COPY on PostgreSQL)
stores what the ORM would and refuses what the constraints refuse."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.lib.bulk import insert_rows
from annotation.models import Item
from annotation.studies.services import create_study

pytestmark = pytest.mark.django_db

FIELDS = [
    "study",
    "external_id",
    "position",
    "domain",
    "summary",
    "payload",
    "response_id",
    "system",
    "gold_label",
    "gold_raw",
    "slots_taken",
    "created_at",
    "updated_at",
]


def row(study, external_id: str, payload: dict, now) -> tuple:
    return (study.pk, external_id, 0, "wiki", "", payload, "", "", "", "", 0, now, now)


def test_rows_read_back_as_written():
    study = create_study(slug="bulk", name="Bulk", kind="verification")
    now = timezone.now()
    payload = {"claim": 'Tab\tnewline\nbackslash\\ quote" «é» \\N', "evidence": [{"text": "x", "rank": None}]}
    assert insert_rows(Item, FIELDS, [row(study, "a", payload, now), row(study, "b", {}, now)]) == 2
    stored = {item.external_id: item for item in Item.objects.filter(study=study)}
    assert stored["a"].payload == payload and stored["b"].payload == {}
    assert stored["a"].created_at == now and stored["a"].domain == "wiki"


def test_a_constraint_violation_is_an_integrity_error_and_writes_nothing():
    study = create_study(slug="bulk", name="Bulk", kind="verification")
    now = timezone.now()
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(Item, FIELDS, [row(study, "ok", {}, now), row(study, "", {}, now)])  # empty id: CHECK fails
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(Item, FIELDS, [row(study, "twice", {}, now), row(study, "twice", {}, now)])  # UNIQUE fails
    assert not Item.objects.filter(study=study).exists()
