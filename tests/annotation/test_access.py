"""A user of study A gets 404 on every page and API route of study B.

Routes are enumerated from the URLconf, so a route added later is covered
without editing this test.
"""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from accounts.services import issue_token
from annotation.members.invites import create_invite
from annotation.members.services import add_members
from annotation.models import ExportJob, ImportJob, Invite, Item, Participant, StudyMember
from annotation.studies.services import create_study
from annotation.transfer.services.export_jobs import request_export
from annotation.transfer.services.export_runner import run_export_job
from annotation.transfer.services.item_import import import_items
from metaeval.models import Verifier, VerifierRun
from metaeval.ppi_items import NoPpiEstimates, ppi_items
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.latex_format import report_tables
from metaeval.verifiers.services import create_verifier
from metaeval.verifiers.services.runs import start_run
from tests.conftest import jsonl, verification_item


def study_routes() -> list[tuple[str, URLPattern]]:
    """(name, route) of every named route whose URL carries a study slug."""
    found: list[tuple[str, URLPattern]] = []

    def walk(patterns, namespace: str | None = None):
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, entry.namespace or namespace)
            elif isinstance(entry, URLPattern) and entry.name:
                regex = entry.pattern.regex.pattern
                if "slug" in regex:
                    found.append((f"{namespace}:{entry.name}" if namespace else entry.name, entry))

    walk(get_resolver().url_patterns)
    return found


def route_kwargs(pattern: URLPattern, slug: str, item_id: str, job_id: int) -> dict:
    names = set(re.compile(pattern.pattern.regex.pattern).groupindex)
    values = {
        "slug": slug,
        "external_id": item_id,
        "pk": job_id,
        "fmt": "csv",
        "what": "items",
        "chart": "labels",
        "ext": "svg",
        "table": "agreement",
        "assignment_id": 1,
        "export_id": ExportJob.objects.filter(study__slug=slug).values_list("pk", flat=True).first() or 1,
        "verifier_id": Verifier.objects.filter(study__slug=slug).values_list("pk", flat=True).first() or 1,
        "run_id": VerifierRun.objects.filter(verifier__study__slug=slug).values_list("pk", flat=True).first() or 1,
        "member_id": StudyMember.objects.filter(study__slug=slug).values_list("pk", flat=True).first() or 1,
        "invite_id": Invite.objects.filter(study__slug=slug).values_list("pk", flat=True).first() or 1,
        "participant_id": Participant.objects.filter(study__slug=slug).values_list("pk", flat=True).first() or 1,
        "which": "attention",  # a participant link's check list (the picker)
    }
    unknown = names - set(values)
    assert not unknown, f"test does not know how to fill {unknown} for {pattern.name}"
    return {name: values[name] for name in names}


@pytest.fixture
def two_studies(make_user, settings, tmp_path):
    alice, bob = make_user("alice"), make_user("bob")
    study_a = create_study(slug="study-a", name="A", kind="verification")
    study_b = create_study(slug="study-b", name="B", kind="verification")
    add_members(study=study_a, usernames=["alice"], role="researcher")
    add_members(study=study_b, usernames=["bob"], role="researcher")
    for study in (study_a, study_b):
        import_items(study=study, stream=jsonl(verification_item("x-1")), fmt="jsonl")
    job = ImportJob.objects.create(study=study_b, what="items", file_name="f.jsonl", file_format="jsonl")
    settings.VAR_DIR = tmp_path
    run_export_job(job_id=request_export(study=study_b, file_format="csv").pk)  # a finished export to download
    start_run(verifier=create_verifier(study=study_b, name="overlap", kind="baseline_overlap"), enqueue=False)
    create_invite(study=study_b, created_by=bob)  # a real invite and member of B behind the member/invite routes
    return alice, bob, study_b, job


def test_routes_are_enumerated():
    names = {name for name, _ in study_routes()}
    assert {"annotation:study_detail", "annotation:study_export", "api-study-detail", "api-item-list"} <= names
    assert len(names) >= 14


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post"])
def test_outsider_gets_404_on_every_study_route(client, two_studies, method):
    alice, _, study_b, job = two_studies
    client.force_login(alice)
    checked = 0
    for name, pattern in study_routes():
        url = reverse(name, kwargs=route_kwargs(pattern, study_b.slug, "x-1", job.pk))
        response = getattr(client, method)(url)
        if response.status_code == 405:  # the route does not take this method at all
            continue
        assert response.status_code == 404, f"{method.upper()} {url} ({name}) gave {response.status_code}"
        checked += 1
    assert checked >= 7


@pytest.mark.django_db
def test_outsider_gets_404_through_token_auth(client, two_studies):
    alice, _, study_b, job = two_studies
    token = issue_token(user=alice)
    for name, pattern in study_routes():
        if not name.startswith("api-"):
            continue
        url = reverse(name, kwargs=route_kwargs(pattern, study_b.slug, "x-1", job.pk))
        response = client.get(url, HTTP_AUTHORIZATION=f"Token {token.key}")
        assert response.status_code in (404, 405), f"{url} gave {response.status_code}"


#: Annotator pages refuse a researcher (403); revising a made-up assignment id is 404; a crowd
#: participant's step page is 404 for anyone the session does not hold as a participant; the
#: Prolific submissions of a study not connected to Prolific are a 409 `prolific_not_connected`.
RESEARCHER_ON_ANNOTATOR_PAGES = {
    "api-prolific-submissions": 409,
    "annotation:annotate": 403,
    "api-training-next": 403,
    "annotation:annotate_training": 403,
    "annotation:questionnaire": 403,
    "annotation:annotate_revise": 404,
    "annotation:participant_step": 404,
}


@pytest.mark.django_db
def test_member_reaches_the_same_routes(client, two_studies):
    """The 404s above come from scoping, not from broken routes."""
    _, bob, study_b, job = two_studies
    client.force_login(bob)
    for name, pattern in study_routes():
        url = reverse(name, kwargs=route_kwargs(pattern, study_b.slug, "x-1", job.pk))
        response = client.get(url)
        expected = RESEARCHER_ON_ANNOTATOR_PAGES.get(name, 200)
        if name == "metaeval:report_table_tex" and response.status_code == 404:
            # reached: an empty study's report has no agreement table yet (the 404 says so in DEBUG)
            assert "agreement" not in report_tables(build_report(study_b, ReportOptions()))
            continue
        if name in ("metaeval:report_ppi_items", "api-study-report-ppi-items") and response.status_code == 404:
            # reached: a study without human labels and predictions has no PPI estimates
            with pytest.raises(NoPpiEstimates):
                ppi_items(study_b, ReportOptions())
            continue
        assert response.status_code in (expected, 405), f"GET {url} ({name}) gave {response.status_code}"
        if response.status_code == 409:  # reached the view: it says why
            assert response.json()["code"] == "prolific_not_connected"


@pytest.mark.django_db
def test_annotator_is_refused_researcher_pages(client, two_studies, make_user):
    _, _, study_b, _job = two_studies
    make_user("carol")
    add_members(study=study_b, usernames=["carol"], role="annotator")
    client.login(username="carol", password="pw-carol")
    assert client.get(reverse("annotation:study_detail", args=[study_b.slug])).status_code == 200
    for name in ("annotation:item_list", "annotation:study_export", "api-item-list", "api-annotation-export"):
        kwargs = {"slug": study_b.slug}
        if name == "annotation:study_export":
            kwargs["fmt"] = "csv"
        assert client.get(reverse(name, kwargs=kwargs)).status_code == 403, name
    response = client.get(reverse("annotation:study_detail", args=[study_b.slug]))
    assert b"Download CSV" not in response.content


@pytest.mark.django_db
def test_anonymous_is_sent_to_login_and_api_refuses(client, two_studies):
    _, _, study_b, _ = two_studies
    response = client.get(reverse("annotation:study_detail", args=[study_b.slug]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.get(reverse("api-study-detail", args=[study_b.slug])).status_code in (401, 403)


@pytest.mark.django_db
def test_api_list_shows_only_own_studies(client, two_studies):
    alice, *_ = two_studies
    client.force_login(alice)
    data = client.get(reverse("api-study-list")).json()
    assert [study["slug"] for study in data["results"]] == ["study-a"]
    assert data["results"][0]["role"] == "researcher"


@pytest.mark.django_db
def test_staff_sees_every_study(client, two_studies, make_user):
    staff = make_user("root", is_staff=True)
    client.force_login(staff)
    data = client.get(reverse("api-study-list")).json()
    assert {study["slug"] for study in data["results"]} == {"study-a", "study-b"}
    assert client.get(reverse("annotation:study_detail", args=["study-b"])).status_code == 200


@pytest.mark.django_db
def test_item_of_other_study_with_same_id_is_not_leaked(client, two_studies):
    alice, *_ = two_studies
    client.force_login(alice)
    response = client.get(reverse("api-item-detail", args=["study-a", "x-1"]))
    assert response.status_code == 200
    own = Item.objects.get(study__slug="study-a", external_id="x-1")
    assert response.json()["id"] == own.external_id
