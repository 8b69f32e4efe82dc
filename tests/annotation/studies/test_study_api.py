"""The study-making API: create, update (PATCH), change status, duplicate; same rules as the pages."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Study, StudyChange, StudyMember
from annotation.transfer.services.item_import import import_items
from tests.annotation.test_api_contract import get_schema
from tests.conftest import jsonl, verification_item

pytestmark = pytest.mark.django_db


def create(client, **body):
    data = {"slug": "api-study", "name": "API study", "kind": "verification", **body}
    return client.post(reverse("api-study-list"), data, content_type="application/json")


def test_create_makes_a_draft_of_which_the_caller_is_researcher(client, researcher, verification_study):
    client.force_login(researcher)
    response = create(
        client, instructions="- a\n  - b", label_aliases={"yes": "supported"}, annotators_per_item=2, seed=11
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "draft" and body["role"] == "researcher" and body["seed"] == 11
    assert body["labels"] == ["supported", "contradicted", "inconclusive"] and body["counts"]["items"] == 0
    assert StudyMember.objects.get(study__slug="api-study", user=researcher).role == "researcher"


def test_create_refusals_are_in_the_one_error_shape(client, researcher, verification_study, make_user):
    client.force_login(researcher)
    response = create(client, label_aliases={"yes": "factual"})
    assert response.status_code == 400
    assert response.json() == {"detail": "label aliases point at unknown label(s): factual", "code": "invalid"}
    response = create(client, kind="poetry")
    assert response.status_code == 400 and response.json()["fields"].keys() == {"kind"}
    response = create(client, colour="blue")
    assert response.status_code == 400 and "'colour'" in response.json()["detail"]
    client.force_login(make_user("olga"))
    response = create(client)
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    assert not Study.objects.filter(slug="api-study").exists()


def test_patch_follows_the_settings_rules(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    url = reverse("api-study-detail", args=["verif"])
    response = client.patch(url, {"labels": ["yes", "no"]}, content_type="application/json")
    assert response.status_code == 400
    assert "labels cannot change after the first annotation" in response.json()["detail"]
    response = client.patch(url, {"name": "Renamed", "instructions": "New"}, content_type="application/json")
    assert response.status_code == 200 and response.json()["name"] == "Renamed"
    assert set(StudyChange.objects.filter(study__slug="verif").values_list("field", flat=True)) == {
        "name",
        "instructions",
    }


def test_patch_before_annotations_changes_labels(client, researcher, verification_study):
    client.force_login(researcher)
    create(client)
    url = reverse("api-study-detail", args=["api-study"])
    response = client.patch(
        url,
        {"labels": ["yes", "no"], "binary_map": {"yes": "positive", "no": "negative"}},
        content_type="application/json",
    )
    assert response.status_code == 200 and response.json()["labels"] == ["yes", "no"]


def test_status_changes_along_the_lifecycle(client, researcher, verification_study):
    client.force_login(researcher)
    create(client)
    url = reverse("api-study-status", args=["api-study"])
    response = client.post(url, {"status": "open"}, content_type="application/json")
    assert response.status_code == 400 and "needs items" in response.json()["detail"]
    import_items(study=Study.objects.get(slug="api-study"), stream=jsonl(verification_item()), fmt="jsonl")
    assert client.post(url, {"status": "open"}, content_type="application/json").json()["status"] == "open"
    assert client.post(url, {"status": "paused"}, content_type="application/json").json()["status"] == "paused"
    response = client.post(url, {"status": "draft"}, content_type="application/json")
    assert response.status_code == 400 and "from paused it can become: open, closed" in response.json()["detail"]


def test_duplicate(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    url = reverse("api-study-duplicate", args=["verif"])
    response = client.post(url, {"slug": "verif-2", "copy_items": True}, content_type="application/json")
    assert response.status_code == 201 and response.json()["status"] == "draft"
    assert response.json()["counts"]["items"] == 3 and response.json()["counts"]["annotations"] == 0
    response = client.post(url, {"slug": "verif-2"}, content_type="application/json")
    assert response.status_code == 400 and "already exists" in response.json()["detail"]


def test_only_researchers_change_a_study_and_outsiders_get_404(client, annotator, make_user, verification_study):
    routes = [
        ("patch", reverse("api-study-detail", args=["verif"]), {"name": "x"}),
        ("post", reverse("api-study-status", args=["verif"]), {"status": "open"}),
        ("post", reverse("api-study-duplicate", args=["verif"]), {"slug": "copy"}),
    ]
    client.force_login(annotator)
    for method, url, body in routes:
        assert getattr(client, method)(url, body, content_type="application/json").status_code == 403, url
    client.force_login(make_user("olga"))
    for method, url, body in routes:
        response = getattr(client, method)(url, body, content_type="application/json")
        assert response.status_code == 404 and response.json()["code"] == "not_found", url
    assert Study.objects.get(slug="verif").name == "Verification"


def test_the_schema_describes_the_study_routes(client):
    paths = get_schema(client)["paths"]
    assert "post" in paths["/api/studies/"] and "patch" in paths["/api/studies/{slug}/"]
    assert "post" in paths["/api/studies/{slug}/status"] and "post" in paths["/api/studies/{slug}/duplicate"]


def test_gold_in_agreement_is_set_at_creation_and_changed_later_with_a_record(
    client, researcher, loaded_verification_study
):
    """A report option, not a label rule: it may change after the first annotation, logged."""
    client.force_login(researcher)
    response = create(client, gold_in_agreement=False)
    assert response.status_code == 201, response.json()
    assert Study.objects.get(slug="api-study").gold_in_agreement is False
    url = reverse("api-study-detail", args=["verif"])
    response = client.patch(url, {"gold_in_agreement": False}, content_type="application/json")
    assert response.status_code == 200, response.json()
    assert Study.objects.get(slug="verif").gold_in_agreement is False
    change = StudyChange.objects.get(study__slug="verif", field="gold_in_agreement")
    assert (change.old_value, change.new_value, change.changed_by) == (True, False, researcher)
