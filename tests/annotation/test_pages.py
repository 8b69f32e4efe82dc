"""Server-rendered pages: login, My studies, the study overview, items, import and export."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Item, Study, StudyMember
from annotation.progress.counters import recount_study
from annotation.transfer.services.item_import import import_items
from tests.conftest import jsonl, verification_item

ASSET = re.compile(r'<(?:script|link|img|iframe|source)\b[^>]*?(?:src|href)="([^"]*)"', re.I)


def assert_offline(html: str) -> None:
    """Every script, stylesheet and image comes from our own origin."""
    external = [url for url in ASSET.findall(html) if re.match(r"^(https?:)?//", url)]
    assert not external, external


@pytest.mark.django_db
def test_login_and_logout(client, researcher):
    page = client.get(reverse("login"))
    assert page.status_code == 200 and b'name="password"' in page.content
    assert_offline(page.content.decode())
    response = client.post(reverse("login"), {"username": "rita", "password": "wrong"})
    assert b"did not match" in response.content
    response = client.post(reverse("login"), {"username": "rita", "password": "pw-rita"})
    assert response.status_code == 302 and response["Location"] == reverse("annotation:my_studies")
    response = client.post(reverse("logout"))
    assert response.status_code == 302
    assert client.get(reverse("annotation:my_studies")).status_code == 302


@pytest.mark.django_db
def test_my_studies_lists_role_and_progress(client, annotator, loaded_verification_study):
    client.force_login(annotator)
    html = client.get(reverse("annotation:my_studies")).content.decode()
    assert "Verification" in html and "annotator" in html
    assert "6 of 9 (67%)" in html
    assert_offline(html)


@pytest.mark.django_db
def test_overview_for_researcher(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    response = client.get(reverse("annotation:study_detail", args=["verif"]))
    html = response.content.decode()
    assert response.status_code == 200
    for text in (
        "Items by domain",
        "longfact",
        "Download CSV",
        "Download JSON Lines",
        'enctype="multipart/form-data"',
        "w1",
        "w2",
        "imported identity",
        "ann-01",
    ):
        assert text in html, text
    assert "Content-Security-Policy" in response.headers
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]
    assert_offline(html)


@pytest.mark.django_db
def test_untrusted_text_is_escaped_and_instructions_sanitised(client, researcher, verification_study):
    verification_study.instructions = "# Guide\n\n<script>alert(1)</script>\n\n[click](javascript:alert(2)) **bold**"
    verification_study.save()
    payload = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    import_items(study=verification_study, stream=jsonl(verification_item("xss", claim=payload)), fmt="jsonl")
    client.force_login(researcher)
    html = client.get(reverse("annotation:item_detail", args=["verif", "xss"])).content.decode()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    html = client.get(reverse("annotation:study_detail", args=["verif"])).content.decode()
    assert "<h3>Guide</h3>" in html and "<strong>bold</strong>" in html
    assert html.count("<h1") == 1, "the study page has one h1: the instructions' # is demoted"
    assert "<script>alert(1)" not in html and "javascript:" not in html


@pytest.mark.django_db
def test_item_list_filters_by_domain_and_text(client, researcher, verification_study):
    import_items(
        study=verification_study,
        stream=jsonl(
            verification_item("a-1", domain="news"),
            verification_item("b-1", domain="bio", claim="Marie Curie won twice."),
        ),
        fmt="jsonl",
    )
    client.force_login(researcher)
    url = reverse("annotation:item_list", args=["verif"])
    html = client.get(url, {"domain": "bio"}).content.decode()
    assert "b-1" in html and "a-1" not in html
    html = client.get(url, {"q": "curie"}).content.decode()
    assert "b-1" in html and "a-1" not in html


@pytest.mark.django_db
def test_import_from_the_study_page(client, researcher, verification_study):
    client.force_login(researcher)
    url = reverse("annotation:study_import", args=["verif"])
    good = SimpleUploadedFile("items.jsonl", b'{"id": "p-1", "claim": "Water boils at 100 C."}\n')
    response = client.post(url, {"what": "items", "file": good}, follow=True)
    assert "Imported 1 new" in response.content.decode()
    bad = SimpleUploadedFile("items.csv", b"id,claim\np-2,Fine\np-3,\n")
    response = client.post(url, {"what": "items", "file": bad}, follow=True)
    html = response.content.decode()
    assert "Nothing was imported" in html and "claim" in html and ">3<" in html
    assert list(Item.objects.filter(study=verification_study).values_list("external_id", flat=True)) == ["p-1"]


@pytest.mark.django_db
def test_add_members_from_the_study_page_shows_password_once(client, researcher, verification_study):
    client.force_login(researcher)
    url = reverse("annotation:study_add_members", args=["verif"])
    response = client.post(url, {"usernames": "newbie, anna", "role": "annotator"}, follow=True)
    html = response.content.decode()
    assert "Created newbie (annotator) with password" in html
    assert "anna is already in this study (as annotator)" in html
    assert StudyMember.objects.filter(study=verification_study, user__username="newbie", role="annotator").exists()
    html = client.get(reverse("annotation:study_detail", args=["verif"])).content.decode()
    assert "with password" not in html


@pytest.mark.django_db
def test_csv_download_from_the_study_page(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    response = client.get(reverse("annotation:study_export", args=["verif", "csv"]))
    assert response["Content-Disposition"] == 'attachment; filename="verif-annotations.csv"'
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines[0].startswith("study,item,domain,annotator,label,raw_label")
    assert len(lines) == 1 + 6
    assert client.get("/studies/verif/export.xml").status_code == 404


@pytest.mark.django_db
def test_preference_item_shows_lists_in_declared_system_order(client, researcher, preference_study):
    from tests.conftest import preference_item

    preference_study.systems = ["safe", "veriscore"]
    preference_study.save()
    import_items(study=preference_study, stream=jsonl(preference_item("p-9")), fmt="jsonl")
    client.force_login(researcher)
    html = client.get(reverse("annotation:item_detail", args=["pref", "p-9"])).content.decode()
    assert html.index("<h2>safe</h2>") < html.index("<h2>veriscore</h2>")


@pytest.mark.django_db
def test_item_page_names_annotators_by_pseudonym_and_former_members_by_id(
    client, researcher, loaded_verification_study
):
    former = StudyMember.objects.get(study=loaded_verification_study, pseudonym="w2")
    user_id = former.user_id
    former.delete()
    client.force_login(researcher)
    html = client.get(reverse("annotation:item_detail", args=["verif", "c-1"])).content.decode()
    assert "<td>w1</td>" in html and f"<td>user-{user_id}</td>" in html


@pytest.mark.django_db
def test_my_studies_counts_what_matters_to_each_role(client, researcher, annotator, loaded_verification_study):
    """Researchers see items complete (not their own labels, always 0); annotators their labels;
    a study that is not open says so beside its name."""
    study = loaded_verification_study
    Study.objects.filter(pk=study.pk).update(annotators_per_item=2, status=Study.Status.CLOSED)
    recount_study(Study.objects.get(pk=study.pk))  # N changed behind the services' back
    client.force_login(researcher)
    html = client.get(reverse("annotation:my_studies")).content.decode()
    row = re.search(r'<tr data-study="verif">(.*?)</tr>', html, re.S).group(1)
    yours = " ".join(re.sub(r"<[^>]+>", " ", re.search(r'data-field="yours">(.*?)</td>', row, re.S).group(1)).split())
    assert yours == "3 of 3 items complete"
    assert 'data-status="closed"' in row and ">Closed<" in row
    client.force_login(annotator)
    html = client.get(reverse("annotation:my_studies")).content.decode()
    row = re.search(r'<tr data-study="verif">(.*?)</tr>', html, re.S).group(1)
    assert "0 labels by you" in row


def test_item_list_counts_from_the_counter_rows_equal_counting_the_items(client, researcher, verification_study):
    """Issue 35: the pager's count (DomainCount) and each row's labels (Item.n_answers) are what counting the
    items and their labels gives, for every filter, after updates that move items between domains and gold."""
    from django.db.models import Count

    from annotation.studies.selectors import paged_study_items, study_items
    from annotation.transfer.services.annotation_import import import_annotations

    first = [
        verification_item(f"c-{n:03d}", domain=("news", "bio", "")[n % 3], **({"gold": "supported"} if n % 4 else {}))
        for n in range(130)
    ]
    import_items(study=verification_study, stream=jsonl(*first), fmt="jsonl")
    moved = [verification_item(f"c-{n:03d}", domain="moved", gold="contradicted") for n in range(0, 130, 7)]
    import_items(study=verification_study, stream=jsonl(*moved), fmt="jsonl", update=True)
    labels = [
        {"item": f"c-{n:03d}", "annotator": f"w{k}", "label": "supported"} for n in range(60) for k in range(n % 3)
    ]
    import_annotations(study=verification_study, stream=jsonl(*labels), fmt="jsonl")
    client.force_login(researcher)
    url = reverse("annotation:item_list", args=["verif"])
    for domain in (None, "news", "bio", "", "moved", "absent"):
        for has_gold in (None, True, False):
            counted = paged_study_items(verification_study, domain=domain, has_gold=has_gold)
            truth = study_items(verification_study, domain=domain, has_gold=has_gold)
            assert counted.count() == truth.count(), (domain, has_gold)
            query = {"domain": domain or "", "gold": {None: "", True: "yes", False: "no"}[has_gold]}
            if domain == "":
                continue  # the page's "" is all domains
            html = client.get(url, query).content.decode()
            n = truth.count()
            assert f"{n} item{'s' if n != 1 else ''}</p>" in html, (domain, has_gold)
    labelled = dict(
        Item.objects.filter(study=verification_study)
        .annotate(n=Count("assignments__annotation"))
        .values_list("external_id", "n")
    )
    shown = {item.external_id: item.n_annotations for item in study_items(verification_study)}
    assert shown == labelled and sum(labelled.values()) == len(labels)
    api = client.get(reverse("api-item-list", args=["verif"]), {"domain": "moved"}).json()
    assert api["count"] == 19 and {row["n_annotations"] for row in api["results"]} <= {0, 1, 2}
