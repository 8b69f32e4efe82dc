"""Making and running studies: settings rules, lifecycle, change log, duplicates, who may create."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import override_settings

from annotation.access import may_create_studies
from annotation.errors import ServiceError
from annotation.members.services import add_members
from annotation.models import Annotation, Assignment, Item, Study, StudyChange, StudyMember
from annotation.studies.services import change_status, create_study, duplicate_study, update_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import LeaseLost, NotAllowed, SubmittedAnswer, claim_next, submit
from tests.conftest import jsonl, preference_item, verification_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft(researcher, annotator) -> Study:
    study = create_study(slug="d", name="Draft", kind="verification", status="draft", created_by=researcher)
    add_members(study=study, usernames=[annotator.username], role="annotator")
    import_items(study=study, stream=jsonl(*(verification_item(f"c-{n}") for n in range(3))), fmt="jsonl")
    return study


def annotate_one(study: Study, user) -> Assignment:
    assignment = claim_next(user=user, study=study)
    assert assignment is not None
    return submit(user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported"))


# --- creating -------------------------------------------------------------------


def test_the_creator_becomes_the_researcher(researcher):
    study = create_study(slug="mine", name="Mine", kind="preference", created_by=researcher, status="draft")
    member = StudyMember.objects.get(study=study, user=researcher)
    assert member.role == "researcher" and member.pseudonym == "res-01"
    assert study.status == "draft" and study.labels == ["a_strong", "a_slight", "tie", "b_slight", "b_strong"]


def test_creation_refuses_reserved_slugs_and_bad_settings(researcher):
    with pytest.raises(ServiceError, match="reserved"):
        create_study(slug="new", name="x", kind="verification")
    with pytest.raises(ServiceError, match="unknown label"):
        create_study(slug="x", name="x", kind="verification", label_aliases={"yes": "factual"})
    with pytest.raises(ServiceError, match="exactly two"):
        create_study(slug="x", name="x", kind="preference", systems=["a"])
    assert not Study.objects.filter(slug="x").exists()


def test_who_may_create_studies(make_user, researcher, verification_study):
    outsider = make_user("olga")
    assert may_create_studies(researcher)  # researcher of verif
    assert not may_create_studies(outsider)
    assert may_create_studies(make_user("boss", is_staff=True))
    outsider.user_permissions.add(Permission.objects.get(codename="add_study"))
    outsider = type(outsider).objects.get(pk=outsider.pk)  # drop the permission cache
    assert may_create_studies(outsider)
    plain = make_user("plain")
    assert not may_create_studies(plain)
    with override_settings(ANYONE_CAN_CREATE_STUDIES=True):
        assert may_create_studies(plain)


# --- lifecycle -------------------------------------------------------------------


def test_a_draft_hands_out_nothing_and_says_why(draft, annotator):
    with pytest.raises(NotAllowed, match="draft: annotation starts when a researcher opens it"):
        claim_next(user=annotator, study=draft)


def test_transitions_follow_the_lifecycle(draft, researcher):
    with pytest.raises(
        ServiceError, match="the study is draft and cannot become paused; from draft it can become: open, archived"
    ):
        change_status(study=draft, status="paused")
    change_status(study=draft, status="open", user=researcher)
    change_status(study=draft, status="paused", user=researcher)
    change_status(study=draft, status="open", user=researcher)
    change_status(study=draft, status="closed", user=researcher)
    change_status(study=draft, status="archived", user=researcher)
    with pytest.raises(ServiceError, match="cannot become open"):
        change_status(study=draft, status="open")
    assert Study.objects.get(pk=draft.pk).status == "archived"
    log = list(
        StudyChange.objects.filter(study=draft, field="status").order_by("id").values_list("new_value", flat=True)
    )
    assert log == ["open", "paused", "open", "closed", "archived"]
    assert StudyChange.objects.filter(study=draft).first().changed_by == researcher


def test_a_study_without_items_does_not_open(researcher):
    study = create_study(slug="empty", name="Empty", kind="verification", status="draft")
    with pytest.raises(ServiceError, match="needs items"):
        change_status(study=study, status="open")


def test_pausing_keeps_leases_and_stops_new_claims(draft, annotator, make_user):
    other = make_user("otto")
    add_members(study=draft, usernames=[other.username], role="annotator")
    change_status(study=draft, status="open")
    held = claim_next(user=annotator, study=draft)
    assert held is not None
    change_status(study=draft, status="paused")
    # the lease is kept: the same item again, and it can be answered
    again = claim_next(user=annotator, study=draft)
    assert again is not None and again.pk == held.pk
    with pytest.raises(NotAllowed, match="paused: no new items"):
        claim_next(user=other, study=draft)
    submit(user=annotator, study=draft, assignment_id=held.pk, answer=SubmittedAnswer(label="supported"))
    assert Annotation.objects.filter(assignment=held).exists()
    with pytest.raises(NotAllowed, match="paused"):
        claim_next(user=annotator, study=draft)


def test_closing_releases_open_leases_and_keeps_answers(draft, annotator, make_user):
    other = make_user("otto")
    add_members(study=draft, usernames=[other.username], role="annotator")
    change_status(study=draft, status="open")
    annotate_one(draft, annotator)
    open_lease = claim_next(user=other, study=draft)
    assert open_lease is not None
    item = open_lease.item
    taken_before = Item.objects.get(pk=item.pk).slots_taken
    change_status(study=draft, status="closed")
    assert Assignment.objects.get(pk=open_lease.pk).status == "skipped"
    assert Item.objects.get(pk=item.pk).slots_taken == taken_before - 1
    assert Annotation.objects.filter(assignment__study=draft).count() == 1
    with pytest.raises(NotAllowed, match="closed"):
        submit(user=other, study=draft, assignment_id=open_lease.pk, answer=SubmittedAnswer(label="supported"))
    # reopened: the late answer is refused as a lease that ran out; the item goes to someone else
    change_status(study=draft, status="open")
    with pytest.raises(LeaseLost, match="ran out"):
        submit(user=other, study=draft, assignment_id=open_lease.pk, answer=SubmittedAnswer(label="supported"))
    again = claim_next(user=other, study=draft)
    assert again is not None and again.item_id != item.pk


# --- editing -------------------------------------------------------------------


def test_before_the_first_annotation_everything_changes_without_a_log(draft):
    recorded = update_study(
        study=draft,
        changes={
            "labels": ["true", "false"],
            "annotators_per_item": 2,
            "binary_map": {"true": "positive", "false": "negative"},
        },
    )
    assert recorded == []
    draft.refresh_from_db()
    assert draft.labels == ["true", "false"] and draft.annotators_per_item == 2
    with pytest.raises(ServiceError, match="kind cannot change once the study has items"):
        update_study(study=draft, changes={"kind": "preference"})


def test_after_the_first_annotation_label_changes_are_refused_with_reasons(draft, annotator, researcher):
    change_status(study=draft, status="open")
    annotate_one(draft, annotator)
    with pytest.raises(ServiceError) as refused:
        update_study(study=draft, changes={"labels": ["a", "b"], "annotators_per_item": 5})
    message = str(refused.value)
    assert "labels cannot change after the first annotation" in message
    assert "annotators_per_item cannot change after the first annotation" in message
    with pytest.raises(ServiceError, match="evidence_judgements cannot change"):
        update_study(study=draft, changes={"evidence_judgements": True})
    draft.refresh_from_db()
    assert draft.labels == ["supported", "contradicted", "inconclusive"] and draft.annotators_per_item == 3


def test_after_the_first_annotation_harmless_changes_are_logged(draft, annotator, researcher):
    change_status(study=draft, status="open")
    annotate_one(draft, annotator)
    recorded = update_study(
        study=draft,
        changes={"name": "Renamed", "instructions": "Be careful.", "label_aliases": {"yes": "supported"}},
        user=researcher,
    )
    assert {change.field for change in recorded} == {"name", "instructions", "label_aliases"}
    change = StudyChange.objects.get(study=draft, field="name")
    assert (change.old_value, change.new_value, change.changed_by) == ("Draft", "Renamed", researcher)
    with pytest.raises(ServiceError, match="label aliases can only be added"):
        update_study(study=draft, changes={"label_aliases": {"yes": "contradicted"}})


def test_preference_labels_follow_the_tie_option_before_annotations(researcher):
    study = create_study(slug="p", name="P", kind="preference", status="draft")
    update_study(study=study, changes={"tie_allowed": False, "both_bad_allowed": True})
    study.refresh_from_db()
    assert study.labels == ["a_strong", "a_slight", "b_slight", "b_strong", "both_bad"]
    update_study(study=study, changes={"tie_allowed": True})
    study.refresh_from_db()
    assert "tie" in study.labels


def test_unknown_settings_are_refused(draft):
    with pytest.raises(ServiceError, match="read-only setting"):
        update_study(study=draft, changes={"slug": "other"})


# --- duplicating -------------------------------------------------------------------


def test_duplicate_copies_settings_and_optionally_items(draft, annotator, make_user):
    change_status(study=draft, status="open")
    annotate_one(draft, annotator)
    update_study(study=draft, changes={"instructions": "# Read me"})
    copier = make_user("carl")
    Study.objects.filter(pk=draft.pk).update(
        source_labels=[
            {"from": "factscore", "as": "gold", "annotators": ["factscore"]},
            {"from": "factcheckgpt", "as": "annotator", "annotators": ["factcheck-bench"]},
        ]
    )
    draft.refresh_from_db()
    copy = duplicate_study(study=draft, slug="d-main", name="Main run", copy_items=True, user=copier)
    # the items' gold labels come along, an imported annotator's labels (answers) do not
    assert copy.source_labels == [{"from": "factscore", "as": "gold", "annotators": ["factscore"]}]
    assert copy.status == "draft" and copy.instructions == "# Read me" and copy.labels == draft.labels
    assert copy.seed != Study.objects.get(pk=draft.pk).seed
    assert list(copy.items.values_list("external_id", flat=True)) == ["c-0", "c-1", "c-2"]
    assert set(copy.items.values_list("slots_taken", flat=True)) == {0}
    assert not Annotation.objects.filter(assignment__study=copy).exists()
    assert list(copy.members.values_list("user__username", "role")) == [("carl", "researcher")]
    bare = duplicate_study(study=draft, slug="d-bare")
    assert bare.items.count() == 0 and bare.name == "Draft (copy)"
    with pytest.raises(ServiceError, match="already exists"):
        duplicate_study(study=draft, slug="d-main")


def test_closed_imports_still_work_for_labels_collected_elsewhere(draft):
    """Importing annotations is not annotating: a draft takes imported labels (e.g. a pilot's)."""
    result = import_annotations(
        study=draft, stream=jsonl({"item": "c-0", "annotator": "w1", "label": "supported"}), fmt="jsonl"
    )
    assert result.created == 1


def test_preference_duplicate_keeps_systems(researcher):
    study = create_study(slug="pp", name="PP", kind="preference", systems=["veriscore", "safe"])
    import_items(study=study, stream=jsonl(preference_item("p-1")), fmt="jsonl")
    copy = duplicate_study(study=study, slug="pp-2", copy_items=True)
    assert copy.systems == ["veriscore", "safe"] and copy.items.get().claim_lists()[0][0] == "veriscore"
