"""The study pages: new study, settings and lifecycle, duplicate, previews, format help and example files."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Annotation, Assignment, Study, StudyChange, StudyMember
from annotation.studies.services import change_status, create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from tests.conftest import jsonl, preference_item, verification_item

pytestmark = pytest.mark.django_db

NESTED = "3. Then give the claim one label:\n   - **supported** - yes\n   - **contradicted** - no\n"


def new_study_data(**overrides) -> dict:
    data = {
        "kind": "verification",
        "name": "My study",
        "slug": "my-study",
        "annotators_per_item": "2",
        "labels": "",
        "label_aliases": "yes=supported\nno=contradicted",
        "binary_map": "",
        "systems": "",
        "seed": "7",
        "tie_allowed": "on",
        "justification_required": "on",
        "instructions": NESTED,
    }
    data.update(overrides)
    return data


def test_the_home_page_offers_new_study_to_those_who_may(client, researcher, verification_study, make_user):
    client.force_login(researcher)
    assert 'id="new-study"' in client.get(reverse("annotation:my_studies")).content.decode()
    client.force_login(make_user("olga"))
    assert 'id="new-study"' not in client.get(reverse("annotation:my_studies")).content.decode()
    assert client.get(reverse("annotation:study_new")).status_code == 403


def test_a_new_study_is_a_draft_of_its_creator(client, researcher, verification_study):
    client.force_login(researcher)
    page = client.get(reverse("annotation:study_new"))
    assert page.status_code == 200 and "Create draft study" in page.content.decode()
    response = client.post(reverse("annotation:study_new"), new_study_data())
    assert response.status_code == 302 and response["Location"] == reverse("annotation:study_detail", args=["my-study"])
    study = Study.objects.get(slug="my-study")
    assert (study.status, study.annotators_per_item, study.seed, study.justification_required) == ("draft", 2, 7, True)
    assert study.labels == ["supported", "contradicted", "inconclusive"]
    assert study.label_aliases == {"yes": "supported", "no": "contradicted"}
    assert StudyMember.objects.get(study=study, user=researcher).role == "researcher"
    detail = client.get(response["Location"]).content.decode()
    assert "<li><strong>supported</strong> - yes</li>" in detail and 'id="settings-link"' in detail


def test_a_bad_new_study_names_the_problem_and_stores_nothing(client, researcher, verification_study):
    client.force_login(researcher)
    response = client.post(reverse("annotation:study_new"), new_study_data(label_aliases="yes=factual"))
    assert (
        response.status_code == 400 and "label aliases point at unknown label(s): factual" in response.content.decode()
    )
    response = client.post(reverse("annotation:study_new"), new_study_data(slug="verif"))
    assert "a study with slug &#x27;verif&#x27; already exists" in response.content.decode()
    response = client.post(reverse("annotation:study_new"), new_study_data(kind="preference", systems="a, b, c"))
    assert "Give exactly two systems" in response.content.decode()
    assert not Study.objects.filter(slug="my-study").exists()


def test_the_preview_button_renders_without_saving(client, researcher, verification_study):
    client.force_login(researcher)
    response = client.post(reverse("annotation:study_new"), new_study_data(preview="1"))
    body = response.content.decode()
    assert response.status_code == 200 and not Study.objects.filter(slug="my-study").exists()
    assert "<ul>\n<li><strong>supported</strong> - yes</li>" in body


def test_the_live_preview_endpoint_uses_the_sanitised_renderer(client, researcher):
    client.force_login(researcher)
    url = reverse("annotation:markdown_preview")
    response = client.post(url, {"text": NESTED + "\n<script>alert(1)</script>[x](javascript:alert(1))"})
    body = response.content.decode()
    assert response.status_code == 200 and "<ul>" in body and "<li><strong>contradicted</strong> - no</li>" in body
    assert "<script>" not in body and "javascript:" not in body
    assert client.post(url, {"text": "x" * 100_001}).status_code == 400
    client.logout()
    assert client.post(url, {"text": "x"}).status_code == 302


def test_the_factcheck_instructions_render_a_nested_list():
    import json
    from pathlib import Path

    from annotation.lib.markdown import render_markdown

    definitions = json.loads((Path(__file__).parents[3] / "fixtures" / "studies.json").read_text())
    html = render_markdown(next(d for d in definitions if d["slug"] == "factcheck-gpt")["instructions"])
    assert "<li>Then give the claim one label:<ul>\n<li><strong>supported</strong>" in html
    assert "<li><strong>inconclusive</strong> - the passages" in html


def test_settings_edit_and_refusals_after_annotations(client, researcher, annotator, loaded_verification_study):
    study = loaded_verification_study
    client.force_login(researcher)
    url = reverse("annotation:study_settings", args=[study.slug])
    page = client.get(url).content.decode()
    assert "Locked: stored labels are canonical labels of the current list." in page
    assert "Locked: the stored labels belong to the study's kind." in page
    from annotation.studies.forms import StudySettingsForm

    data = {k: v for k, v in StudySettingsForm.initial_for(study).items() if v not in (False, None)}
    data["labels"] = "supported\ncontradicted"
    response = client.post(url, data)
    body = response.content.decode()
    assert (
        response.status_code == 400 and "Nothing was changed: labels cannot change after the first annotation" in body
    )
    data["labels"] = "\n".join(study.labels)
    data["name"] = "Renamed"
    data["instructions"] = "New words"
    response = client.post(url, data)
    assert response.status_code == 302
    log = client.get(url).content.decode()
    assert "Renamed" in log and "instructions" in log and researcher.username in log
    assert set(StudyChange.objects.filter(study=study).values_list("field", flat=True)) == {"name", "instructions"}


def test_annotators_and_outsiders_cannot_reach_the_study_pages(client, annotator, make_user, verification_study):
    pages = [
        ("annotation:study_settings", "get"),
        ("annotation:annotate_preview", "get"),
        ("annotation:formats_help", "get"),
        ("annotation:study_status", "post"),
        ("annotation:study_duplicate", "post"),
    ]
    client.force_login(annotator)
    for name, method in pages:
        assert getattr(client, method)(reverse(name, args=["verif"])).status_code == 403, name
    client.force_login(make_user("olga"))
    for name, method in pages:
        assert getattr(client, method)(reverse(name, args=["verif"])).status_code == 404, name


def test_status_buttons_move_the_study_and_refuse_with_a_reason(client, researcher):
    study = create_study(slug="s", name="S", kind="verification", status="draft", created_by=researcher)
    client.force_login(researcher)
    url = reverse("annotation:study_status", args=["s"])
    response = client.post(url, {"status": "open"}, follow=True)
    assert "needs items before it opens" in response.content.decode()
    import_items(study=study, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    client.post(url, {"status": "open", "next": "detail"})
    assert Study.objects.get(slug="s").status == "open"
    response = client.post(url, {"status": "archived"}, follow=True)
    assert "the study is open and cannot become archived" in response.content.decode()


def test_the_annotate_page_says_why_a_paused_study_hands_out_nothing(client, annotator, researcher, verification_study):
    import_items(study=verification_study, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    change_status(study=verification_study, status="paused")
    client.force_login(annotator)
    response = client.get(reverse("annotation:annotate", args=["verif"]))
    assert response.status_code == 403 and "is paused: no new items are handed out" in response.content.decode()
    api = client.post(reverse("api-assignment-next", args=["verif"]))
    assert api.status_code == 403 and "paused" in api.json()["detail"]


def test_duplicate_from_the_settings_page(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    url = reverse("annotation:study_duplicate", args=["verif"])
    response = client.post(url, {"slug": "verif-main", "name": "Main", "copy_items": "on"})
    assert response.status_code == 302
    copy = Study.objects.get(slug="verif-main")
    assert copy.status == "draft" and copy.items.count() == 3
    response = client.post(url, {"slug": "verif-main"})
    assert response.status_code == 400 and "already exists" in response.content.decode()


def test_the_annotate_preview_shows_a_real_item_and_stores_nothing(client, researcher, loaded_verification_study):
    client.force_login(researcher)
    before = Assignment.objects.count()
    response = client.get(reverse("annotation:annotate_preview", args=["verif"]))
    body = response.content.decode()
    assert response.status_code == 200 and "Claim c-1 is true." in body and "<fieldset disabled" in body
    assert 'id="preview-next"' in body and "?item=c-2" in body
    assert Assignment.objects.count() == before
    second = client.get(reverse("annotation:annotate_preview", args=["verif"]), {"item": "c-2"}).content.decode()
    assert "Claim c-2 is true." in second
    assert client.get(reverse("annotation:annotate_preview", args=["verif"]), {"item": "nope"}).status_code == 404


def test_the_preference_preview_hides_system_names(client, researcher, preference_study):
    import_items(study=preference_study, stream=jsonl(preference_item("p-1")), fmt="jsonl")
    client.force_login(researcher)
    body = client.get(reverse("annotation:annotate_preview", args=["pref"])).content.decode()
    assert "List 1" in body and "Ada was a mathematician." in body
    assert "veriscore" not in body.split('id="preview-form"')[1]


@pytest.mark.parametrize("kind", ["verification", "preference"])
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_the_example_files_import_cleanly(client, researcher, kind, fmt):
    """Download the examples of the format page and import them through the import form."""
    study = create_study(
        slug=f"ex-{kind}", name="Examples", kind=kind, status="draft", created_by=researcher, evidence_judgements=True
    )
    client.force_login(researcher)
    help_page = client.get(reverse("annotation:formats_help", args=[study.slug])).content.decode()
    assert "example-items" in help_page and "import as they are" in help_page
    for what in ("items", "annotations"):
        download = client.get(reverse("annotation:format_example", args=[study.slug, what, fmt]))
        assert download.status_code == 200 and "attachment" in download["Content-Disposition"]
        upload = SimpleUploadedFile(f"example.{fmt}", download.content)
        response = client.post(
            reverse("annotation:study_import", args=[study.slug]), {"what": what, "file": upload, "file_format": ""}
        )
        assert response.status_code == 302
        job = study.import_jobs.latest("pk")
        assert job.status == "succeeded", job.errors
    assert study.items.count() == 2
    assert Annotation.objects.filter(assignment__study=study).count() == 4


def test_the_example_files_follow_the_study_settings(client, researcher):
    study = create_study(
        slug="ex", name="Ex", kind="preference", systems=["alpha", "beta"], tie_allowed=False, created_by=researcher
    )
    client.force_login(researcher)
    items = client.get(reverse("annotation:format_example", args=["ex", "items", "jsonl"])).content.decode()
    annotations = client.get(reverse("annotation:format_example", args=["ex", "annotations", "jsonl"])).content.decode()
    assert '"alpha"' in items and '"beta"' in items and "veriscore" not in items
    assert '"tie"' not in annotations
    import_items(study=study, stream=io.BytesIO(items.encode()), fmt="jsonl")
    assert import_annotations(study=study, stream=io.BytesIO(annotations.encode()), fmt="jsonl").created == 4


def test_the_study_page_links_the_format_help(client, researcher, verification_study):
    client.force_login(researcher)
    body = client.get(reverse("annotation:study_detail", args=["verif"])).content.decode()
    assert reverse("annotation:formats_help", args=["verif"]) in body and "see the README" not in body


def test_annotators_keep_their_role_after_a_new_study(client, researcher, annotator, verification_study):
    add_members(study=verification_study, usernames=[annotator.username], role="annotator")
    client.force_login(researcher)
    client.post(reverse("annotation:study_new"), new_study_data())
    assert not StudyMember.objects.filter(study__slug="my-study", user=annotator).exists()


def test_a_paused_study_lets_the_annotator_finish_the_held_item(client, annotator, verification_study):
    import_items(study=verification_study, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    client.force_login(annotator)
    held = client.get(reverse("annotation:annotate", args=["verif"]))
    assert held.status_code == 200 and "Claim c-1 is true." in held.content.decode()
    change_status(study=verification_study, status="paused")
    assert 'id="study-paused"' in client.get(reverse("annotation:study_detail", args=["verif"])).content.decode()
    again = client.get(reverse("annotation:annotate", args=["verif"]))
    assert again.status_code == 200 and "Claim c-1 is true." in again.content.decode()
    assignment = Assignment.objects.get(study=verification_study, annotator=annotator)
    response = client.post(reverse("annotation:annotate_submit", args=["verif", assignment.pk]), {"label": "supported"})
    assert response.status_code == 302 and Annotation.objects.filter(assignment=assignment).exists()
    refused = client.get(reverse("annotation:annotate", args=["verif"]))
    assert refused.status_code == 403 and "paused" in refused.content.decode()


def test_researchers_are_pointed_to_the_annotators_view(client, researcher, verification_study):
    client.force_login(researcher)
    response = client.get(reverse("annotation:annotate", args=["verif"]))
    assert response.status_code == 403
    assert reverse("annotation:annotate_preview", args=["verif"]) in response.content.decode()
