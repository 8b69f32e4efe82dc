import pytest
from django.urls import reverse


@pytest.mark.django_db
def test_researcher_sees_overview(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    response = client.get(reverse("annotation:study_detail", args=["verif"]))
    assert response.status_code == 200
    assert b"Items by domain" in response.content
    response = client.get(reverse("annotation:my_studies"))
    assert b"Verification" in response.content
    response = client.get(reverse("annotation:item_list", args=["verif"]))
    assert b"c-2" in response.content
    response = client.get(reverse("annotation:item_detail", args=["verif", "c-2"]))
    assert b"contradicted" in response.content
    response = client.get(reverse("annotation:study_export", args=["verif", "csv"]))
    body = b"".join(response.streaming_content).decode()
    assert body.splitlines()[0].startswith("study,item,domain,annotator")
    assert len(body.splitlines()) == 7
