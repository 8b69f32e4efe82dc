"""The admin works for every model, with its list columns, filters and search."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

from annotation.models import Annotation, AnnotationRevision, Assignment, ImportJob, Item, Study, StudyMember
from annotation.workbench.answers import AnswerValues, record_answer

MODELS = [Study, StudyMember, Item, Assignment, Annotation, AnnotationRevision, ImportJob]


def test_every_model_is_registered_with_columns_and_search():
    for model in MODELS:
        model_admin = admin.site._registry.get(model)
        assert model_admin is not None, model
        assert len(model_admin.list_display) >= 3, model
        assert model_admin.search_fields, model


@pytest.mark.django_db
@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_changelist_search_filter_and_change_page_render(client, make_user, loaded_verification_study, model):
    annotation = Annotation.objects.first()
    record_answer(assignment=annotation.assignment, values=AnswerValues(label="inconclusive"), source="web")
    ImportJob.objects.create(study=loaded_verification_study, what="items", file_name="f.jsonl", file_format="jsonl")
    client.force_login(make_user("staff", is_staff=True, is_superuser=True))
    url = reverse(f"admin:annotation_{model._meta.model_name}_changelist")
    response = client.get(url)
    assert response.status_code == 200
    assert client.get(url, {"q": "c-1"}).status_code == 200
    obj = model.objects.first()
    change = client.get(reverse(f"admin:annotation_{model._meta.model_name}_change", args=[obj.pk]))
    assert change.status_code == 200
