"""A verification study's response is one system's answer in one domain: an item import that gives one response
two systems or two domains (in the file, or against the stored items it does not replace) is refused, naming both
places, and nothing changes; the report's factuality scores, which count claims per response, then always build."""

from __future__ import annotations

import pytest

from annotation.errors import ImportFailed
from annotation.models import Item
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from metaeval.reporting import build_report
from tests.conftest import jsonl, preference_item, verification_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def study():
    return create_study(slug="resp", name="Responses", kind="verification", annotators_per_item=1)


def claim(item_id: str, response: str, system: str = "sys-a", domain: str = "bio"):
    return verification_item(item_id, response_id=response, system=system, domain=domain)


def problems(excinfo) -> dict[tuple[int | None, str | None], str]:
    return {(error.line, error.field): error.message for error in excinfo.value.errors}


def test_a_file_giving_one_response_two_systems_or_domains_is_refused_naming_both_lines(study):
    rows = [
        claim("c-1", "r-1"),
        claim("c-2", "r-1", system="sys-b"),
        claim("c-3", "r-2"),
        claim("c-4", "r-2", domain="sports"),
        claim("c-5", "r-3"),
        claim("c-6", "r-3"),
    ]
    with pytest.raises(ImportFailed) as refused:
        import_items(study=study, stream=jsonl(*rows), fmt="jsonl")
    found = problems(refused)
    assert found == {
        (2, "system"): "response 'r-1' is system 'sys-a' on line 1, here 'sys-b': the claims of one response share "
        "its system",
        (4, "domain"): "response 'r-2' is domain 'bio' on line 3, here 'sports': the claims of one response share "
        "its domain",
    }
    assert not Item.objects.filter(study=study).exists()


def test_a_later_file_is_checked_against_the_stored_items_it_does_not_replace(study):
    import_items(study=study, stream=jsonl(claim("c-1", "r-1"), claim("c-2", "r-1")), fmt="jsonl")
    with pytest.raises(ImportFailed) as refused:
        import_items(study=study, stream=jsonl(claim("c-9", "r-2"), claim("c-3", "r-1", system="sys-b")), fmt="jsonl")
    assert problems(refused) == {
        (2, "system"): "response 'r-1' is system 'sys-a' in the study's item 'c-1', here 'sys-b': the claims of one "
        "response share its system",
    }
    assert sorted(Item.objects.filter(study=study).values_list("external_id", flat=True)) == ["c-1", "c-2"]
    # an update that replaces only one of the response's claims leaves it mixed: refused too
    with pytest.raises(ImportFailed) as refused:
        import_items(study=study, stream=jsonl(claim("c-2", "r-1", domain="sports")), fmt="jsonl", update=True)
    assert "in the study's item 'c-1', here 'sports'" in problems(refused)[(1, "domain")]
    # replacing every claim of the response moves it whole
    moved = jsonl(claim("c-1", "r-1", system="sys-b"), claim("c-2", "r-1", system="sys-b"))
    import_items(study=study, stream=moved, fmt="jsonl", update=True)
    assert set(Item.objects.filter(study=study).values_list("system", flat=True)) == {"sys-b"}
    import_items(study=study, stream=jsonl(claim("c-3", "r-1", system="sys-b"), claim("c-4", "")), fmt="jsonl")
    assert Item.objects.filter(study=study).count() == 4
    report = build_report(study)  # one system per response: the scores count it
    assert report["scores"] is not None


def test_claims_without_a_response_and_preference_items_are_not_checked(study):
    import_items(
        study=study,
        stream=jsonl(claim("c-1", "", system="sys-a"), claim("c-2", "", system="sys-b", domain="sports")),
        fmt="jsonl",
    )
    assert Item.objects.filter(study=study).count() == 2
    pairs = create_study(slug="pairs", name="Pairs", kind="preference", annotators_per_item=1)
    import_items(
        study=pairs,
        stream=jsonl(preference_item("p-1", domain="bio"), preference_item("p-2", domain="sports")),
        fmt="jsonl",
    )
    assert Item.objects.filter(study=pairs).count() == 2


def test_a_study_stored_before_the_check_gets_its_report_with_the_scores_left_out_and_why(client, researcher, study):
    from django.urls import reverse

    from annotation.members.services import add_members

    add_members(study=study, usernames=[researcher.username], role="researcher")
    study.binary_map = {"supported": "positive", "contradicted": "negative", "inconclusive": "negative"}
    study.save(update_fields=["binary_map"])
    import_items(study=study, stream=jsonl(claim("c-1", "r-1"), claim("c-2", "r-1"), claim("c-3", "r-2")), fmt="jsonl")
    Item.objects.filter(external_id="c-2").update(system="sys-b")  # as a study imported before imports checked it
    report = build_report(study)
    assert report["scores"]["available"] is False
    assert report["scores"]["reason"].startswith("1 response(s) ('r-1') have claims of more than one system or domain")
    client.force_login(researcher)
    page = client.get(reverse("metaeval:report", args=[study.slug]))
    assert page.status_code == 200 and "have claims of more than one system or domain" in page.content.decode()
