"""Every database constraint of the annotation models, violated once by a direct ORM write.

The services validate first, but the invariants of the data model (docs/architecture.md) (one label per
annotator per item, at most N slots per item, answers in system space) must
hold even when application code races or is bypassed, so each one is checked
here against the database itself, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from annotation.models import (
    AccountOrigin,
    ActiveTimeBucket,
    Adjudication,
    Annotation,
    AnnotationRevision,
    AnnotatorCount,
    Assignment,
    DomainCount,
    ExportJob,
    ImportJob,
    Invite,
    Item,
    Participant,
    ParticipantCheck,
    ParticipantLink,
    Study,
    StudyMember,
)

pytestmark = pytest.mark.django_db


def violates(name: str, write, *, columns: tuple[str, ...] = ()) -> IntegrityError:
    """Run `write` in its own savepoint and require it to break constraint `name`.

    PostgreSQL names the constraint in its message for every kind of
    constraint; SQLite names CHECK constraints but reports UNIQUE ones by
    their columns, so those are matched on the columns instead.
    """
    with pytest.raises(IntegrityError) as excinfo:
        with transaction.atomic():
            write()
    message = str(excinfo.value)
    if connection.vendor == "sqlite" and columns:
        assert "UNIQUE constraint failed" in message, message
        for column in columns:
            assert f".{column}" in message, message
    else:
        assert name in message, message
    return excinfo.value


def allowed(write):
    """Run `write` in its own savepoint; it must succeed."""
    with transaction.atomic():
        return write()


@pytest.fixture
def users(db):
    User = get_user_model()
    return [User.objects.create_user(username=f"u{n}", password="x") for n in range(5)]


@pytest.fixture
def study(db):
    return Study.objects.create(slug="s", name="S", kind="verification", labels=["yes", "no"], annotators_per_item=3)


@pytest.fixture
def other_study(db):
    return Study.objects.create(slug="t", name="T", kind="preference", annotators_per_item=2)


@pytest.fixture
def item(study):
    return Item.objects.create(study=study, external_id="i-1", payload={"claim": "x"})


def lease():
    return timezone.now() + timedelta(minutes=30)


def assignment(item, annotator, *, slot=0, status="submitted", **extra) -> Assignment:
    values = {
        "study": item.study,
        "item": item,
        "annotator": annotator,
        "slot": slot,
        "max_slots": item.study.annotators_per_item,
        "status": status,
        "lease_expires_at": lease() if status == "active" else None,
    }
    values.update(extra)
    return Assignment.objects.create(**values)


# --- valid rows -------------------------------------------------------------------


def test_a_valid_row_of_every_model_is_stored(study, item, users):
    member = allowed(lambda: StudyMember.objects.create(study=study, user=users[0], role="annotator", pseudonym="w1"))
    researcher = allowed(
        lambda: StudyMember.objects.create(study=study, user=users[1], role="researcher", pseudonym="r1")
    )
    active = allowed(lambda: assignment(item, users[0], slot=0, status="active"))
    submitted = allowed(
        lambda: assignment(item, users[1], slot=2, status="submitted")
    )  # slot N-1 is the last valid one
    skipped = allowed(lambda: assignment(item, users[2], slot=None, status="skipped"))
    label = allowed(lambda: Annotation.objects.create(assignment=submitted, label="yes", raw_label="Yes"))
    preferred = allowed(
        lambda: Annotation.objects.create(
            assignment=active, label="a_strong", preferred_system="veriscore", strength="strong"
        )
    )
    revision = allowed(
        lambda: AnnotationRevision.objects.create(
            annotation=label, old_value={"label": "no"}, new_value={"label": "yes"}
        )
    )
    job = allowed(lambda: ImportJob.objects.create(study=study, what="items", file_name="x.jsonl", file_format="jsonl"))
    assert member.pk and researcher.pk and active.pk and skipped.pk and preferred.pk and revision.pk and job.pk
    assert Assignment.objects.filter(item=item).count() == 3
    assert Annotation.objects.count() == 2
    for kind in ("preference", "verification"):
        for status in ("draft", "open", "paused", "closed", "archived"):
            allowed(
                lambda kind=kind, status=status: Study.objects.create(
                    slug=f"{kind}-{status}", name="x", kind=kind, status=status
                )
            )


# --- Study ----------------------------------------------------------------------


def test_study_needs_at_least_one_annotator_per_item(db):
    violates(
        "study_annotators_per_item_positive",
        lambda: Study.objects.create(slug="zero", name="x", kind="verification", annotators_per_item=0),
    )


def test_study_kind_must_be_known(db):
    violates("study_kind_valid", lambda: Study.objects.create(slug="k", name="x", kind="ranking"))
    violates("study_kind_valid", lambda: Study.objects.create(slug="k", name="x", kind=""))


def test_study_exact_n_rule_must_be_known(db):
    violates(
        "study_exact_n_per_valid",
        lambda: Study.objects.create(slug="en", name="x", kind="verification", exact_n_per="annotator"),
    )


@pytest.mark.parametrize(
    "n_min, k",
    [(2, None), (None, 2), (0, 2), (3, 2), (4, 2), (2, 1), (2, 4)],
    ids=["k-missing", "n-min-missing", "n-min-zero", "n-min-at-n", "n-min-above-n", "k-one", "k-above-n"],
)
def test_adaptive_overlap_needs_n_min_below_n_and_k_from_two_to_n(db, n_min, k):
    violates(
        "study_adaptive_overlap_valid",
        lambda: Study.objects.create(
            slug="ad", name="x", kind="verification", annotators_per_item=3, adaptive_min_n=n_min, adaptive_agreement=k
        ),
    )


def test_adaptive_overlap_two_then_three_is_stored(db):
    study = Study.objects.create(
        slug="ad", name="x", kind="verification", annotators_per_item=3, adaptive_min_n=2, adaptive_agreement=2
    )
    assert study.is_adaptive


def test_participant_link_pay_basis_must_be_known(study):
    violates(
        "participant_link_pay_basis",
        lambda: ParticipantLink.objects.create(study=study, token="t" * 20, pay_basis="hourly"),
    )


def test_study_status_must_be_known(db):
    violates(
        "study_status_valid", lambda: Study.objects.create(slug="st", name="x", kind="verification", status="frozen")
    )


def test_study_slug_is_unique(study):
    with pytest.raises(IntegrityError):
        with transaction.atomic():
            Study.objects.create(slug=study.slug, name="again", kind="verification")


# --- StudyMember ------------------------------------------------------------------


def test_a_user_is_a_member_of_a_study_once(study, other_study, users):
    StudyMember.objects.create(study=study, user=users[0], role="annotator", pseudonym="w1")
    violates(
        "member_unique_per_study",
        lambda: StudyMember.objects.create(study=study, user=users[0], role="researcher", pseudonym="w2"),
        columns=("study_id", "user_id"),
    )
    # The same user in another study is fine.
    allowed(lambda: StudyMember.objects.create(study=other_study, user=users[0], role="annotator", pseudonym="w1"))


def test_pseudonyms_are_unique_within_a_study(study, other_study, users):
    StudyMember.objects.create(study=study, user=users[0], role="annotator", pseudonym="w1")
    violates(
        "member_pseudonym_unique",
        lambda: StudyMember.objects.create(study=study, user=users[1], role="annotator", pseudonym="w1"),
        columns=("study_id", "pseudonym"),
    )
    allowed(lambda: StudyMember.objects.create(study=other_study, user=users[1], role="annotator", pseudonym="w1"))


def test_member_role_must_be_known(study, users):
    violates(
        "member_role_valid",
        lambda: StudyMember.objects.create(study=study, user=users[0], role="admin", pseudonym="w1"),
    )


# --- Item -------------------------------------------------------------------------


def test_external_id_is_unique_per_study_only(study, other_study, item):
    violates(
        "item_external_id_unique",
        lambda: Item.objects.create(study=study, external_id=item.external_id),
        columns=("study_id", "external_id"),
    )
    allowed(lambda: Item.objects.create(study=other_study, external_id=item.external_id))
    assert Item.objects.filter(external_id=item.external_id).count() == 2


def test_external_id_is_not_empty(study):
    violates("item_external_id_not_empty", lambda: Item.objects.create(study=study, external_id=""))


# --- Assignment -------------------------------------------------------------------


@pytest.mark.parametrize("slot", [3, 4, 100])
def test_slot_below_n(item, users, slot):
    violates("assignment_slot_below_n", lambda: assignment(item, users[0], slot=slot))


def test_slot_below_n_holds_against_a_forged_max_slots(item, users):
    """max_slots is the row's own copy of N; a slot must also be below that copy."""
    violates("assignment_slot_below_n", lambda: assignment(item, users[0], slot=1, max_slots=1))


def test_two_assignments_cannot_hold_the_same_slot(item, users):
    assignment(item, users[0], slot=1)
    violates(
        "assignment_slot_unique",
        lambda: assignment(item, users[1], slot=1),
        columns=("item_id", "slot"),
    )


def test_an_annotator_is_assigned_an_item_once(item, users):
    assignment(item, users[0], slot=0)
    violates(
        "assignment_once_per_annotator",
        lambda: assignment(item, users[0], slot=1),
        columns=("item_id", "annotator_id"),
    )
    # Not even after skipping it: a skipped assignment keeps (item, annotator) taken.
    other = Item.objects.create(study=item.study, external_id="i-2")
    assignment(other, users[0], slot=None, status="skipped")
    violates(
        "assignment_once_per_annotator",
        lambda: assignment(other, users[0], slot=0),
        columns=("item_id", "annotator_id"),
    )


def test_active_assignment_needs_a_lease(item, users):
    violates(
        "assignment_active_has_lease",
        lambda: assignment(item, users[0], slot=0, status="active", lease_expires_at=None),
    )


@pytest.mark.parametrize("status", ["submitted", "active"])
def test_only_a_skipped_assignment_may_give_up_its_slot(item, users, status):
    violates(
        "assignment_holds_slot_unless_skipped",
        lambda: assignment(item, users[0], slot=None, status=status),
    )


def test_skipped_assignment_frees_its_slot_for_someone_else(item, users):
    skipped = allowed(lambda: assignment(item, users[0], slot=None, status="skipped"))
    allowed(lambda: assignment(item, users[1], slot=None, status="skipped"))  # NULL slots never collide
    taken = allowed(lambda: assignment(item, users[2], slot=0, status="submitted"))
    assert skipped.slot is None and taken.slot == 0
    assert list(Assignment.objects.filter(item=item, slot__isnull=False).values_list("annotator", flat=True)) == [
        users[2].pk
    ]


def test_assignment_status_must_be_known(item, users):
    violates("assignment_status_valid", lambda: assignment(item, users[0], slot=0, status="done"))


# --- Annotation -------------------------------------------------------------------


@pytest.fixture
def submitted(item, users):
    return assignment(item, users[0], slot=0)


def test_annotation_label_is_not_empty(submitted):
    violates("annotation_label_not_empty", lambda: Annotation.objects.create(assignment=submitted, label=""))


def test_one_annotation_per_assignment(submitted):
    Annotation.objects.create(assignment=submitted, label="yes")
    with pytest.raises(IntegrityError):
        with transaction.atomic():
            Annotation.objects.create(assignment=submitted, label="no")


@pytest.mark.parametrize(
    "preferred, strength",
    [
        ("", "strong"),  # strength without a preferred system
        ("", "slight"),
        ("veriscore", ""),  # preferred system without a strength
        ("veriscore", "very"),  # a strength that is not on the scale
    ],
)
def test_strength_iff_preferred_system(submitted, preferred, strength):
    violates(
        "annotation_strength_iff_preferred",
        lambda: Annotation.objects.create(
            assignment=submitted, label="a_strong", preferred_system=preferred, strength=strength
        ),
    )


def test_tie_has_neither_preferred_system_nor_strength(submitted):
    annotation = allowed(lambda: Annotation.objects.create(assignment=submitted, label="tie"))
    assert annotation.preferred_system == "" and annotation.strength == ""


# --- ImportJob --------------------------------------------------------------------


def test_import_job_what_and_status_must_be_known(study):
    violates(
        "importjob_what_valid",
        lambda: ImportJob.objects.create(study=study, what="predictions", file_name="x", file_format="jsonl"),
    )
    violates(
        "importjob_status_valid",
        lambda: ImportJob.objects.create(study=study, what="items", file_name="x", file_format="jsonl", status="lost"),
    )


def test_export_job_format_and_status_must_be_known(study):
    violates("exportjob_format_valid", lambda: ExportJob.objects.create(study=study, file_format="xlsx"))
    violates("exportjob_format_valid", lambda: ExportJob.objects.create(study=study, file_format="HF"))
    # Issue 34: the Hugging Face dataset (zip) is a known format, like csv and jsonl.
    assert {ExportJob.objects.create(study=study, file_format=fmt).file_format for fmt in ("csv", "jsonl", "hf")} == {
        "csv",
        "jsonl",
        "hf",
    }
    violates("exportjob_status_valid", lambda: ExportJob.objects.create(study=study, file_format="csv", status="lost"))


# --- Invite -----------------------------------------------------------------------


def invite(study, **extra) -> Invite:
    values = {
        "study": study,
        "token_hash": "h" * 64,
        "prefix": "abc",
        "max_uses": 2,
        "expires_at": timezone.now() + timedelta(days=1),
    }
    values.update(extra)
    return Invite.objects.create(**values)


def test_an_invite_admits_at_least_one_and_never_more_than_its_max(study):
    violates("invite_max_uses_positive", lambda: invite(study, max_uses=0))
    violates("invite_uses_within_max", lambda: invite(study, uses=3))
    made = allowed(lambda: invite(study, uses=2))
    violates(
        "invite_uses_within_max",
        lambda: Invite.objects.filter(pk=made.pk).update(uses=models.F("uses") + 1),
    )


def test_an_invite_role_must_be_known(study):
    violates("invite_role_valid", lambda: invite(study, role="admin"))


# --- Adjudication ----------------------------------------------------------------


def adjudication(study, item, user, **extra) -> Adjudication:
    return Adjudication.objects.create(study=study, item=item, adjudicator=user, **{"label": "yes", **extra})


def test_an_adjudication_has_a_label_and_one_per_adjudicator_and_item(study, item, users):
    violates("adjudication_label_not_empty", lambda: adjudication(study, item, users[0], label=""))
    allowed(lambda: adjudication(study, item, users[0]))
    violates(
        "adjudication_once_per_adjudicator",
        lambda: adjudication(study, item, users[0], label="no"),
        columns=("item_id", "adjudicator_id"),
    )


def test_an_adjudications_strength_comes_with_a_preferred_system_and_only_then(study, item, users):
    violates("adjudication_strength_iff_preferred", lambda: adjudication(study, item, users[0], strength="strong"))
    violates("adjudication_strength_iff_preferred", lambda: adjudication(study, item, users[1], preferred_system="a"))
    violates(
        "adjudication_strength_iff_preferred",
        lambda: adjudication(study, item, users[2], preferred_system="a", strength="huge"),
    )
    allowed(lambda: adjudication(study, item, users[3], preferred_system="a", strength="slight"))


def test_an_audit_share_is_a_fraction_of_the_items(study):
    for share in (0, 1.5):
        violates(
            "study_audit_share_in_range",
            lambda share=share: Study.objects.filter(pk=study.pk).update(adjudication_audit_share=share),
        )
    allowed(lambda: Study.objects.filter(pk=study.pk).update(adjudication_audit_share=1))


# --- Crowd participants -------------------------------------------------------------


def participant(study, user, pseudonym: str, **extra) -> Participant:
    member = StudyMember.objects.create(study=study, user=user, role="annotator", pseudonym=pseudonym)
    return Participant.objects.create(study=study, member=member, **{"panel_id": "P1", **extra})


def test_a_panel_id_is_one_participant_per_study_with_a_known_status(study, other_study, users):
    first = allowed(lambda: participant(study, users[0], "p-1"))
    violates(
        "participant_panel_id_unique",
        lambda: participant(study, users[1], "p-2"),
        columns=("study_id", "panel_id"),
    )
    allowed(lambda: participant(other_study, users[1], "p-2"))  # the same panel ID in another study
    violates("participant_status_valid", lambda: Participant.objects.filter(pk=first.pk).update(status="napping"))


def test_a_participant_answers_a_check_item_once_and_checks_are_of_a_known_kind(study, item, users):
    someone = participant(study, users[0], "p-1")

    def check(**extra) -> ParticipantCheck:
        values = {"participant": someone, "item": item, "kind": "attention", "label": "yes", "correct": True}
        return ParticipantCheck.objects.create(**{**values, **extra})

    violates("participant_check_kind", lambda: check(kind="quiz"))
    allowed(check)
    violates("participant_check_once", lambda: check(kind="qualification"), columns=("participant_id", "item_id"))


def test_an_annotator_answers_a_training_item_once(study, item, users):
    """TrainingAnswer: one per (study, annotator, item); a second answer keeps the first (issue 32)."""
    from annotation.models import TrainingAnswer

    def answer() -> TrainingAnswer:
        return TrainingAnswer.objects.create(study=study, annotator=users[0], item=item, label="yes", correct=True)

    allowed(answer)
    violates("training_answer_once", answer, columns=("study_id", "annotator_id", "item_id"))


def test_a_questionnaire_is_answered_once_per_attempt_and_is_of_a_known_kind(study, users):
    """QuestionnaireResponse: one row per (study, person, kind, attempt); kind pre, quiz or post (issue 32)."""
    from annotation.models import QuestionnaireResponse

    def response(**extra) -> QuestionnaireResponse:
        values = {"study": study, "respondent": users[0], "kind": "pre", "attempt": 1, "answers": {}}
        return QuestionnaireResponse.objects.create(**{**values, **extra})

    violates("questionnaire_response_kind", lambda: response(kind="during"))
    allowed(response)
    violates("questionnaire_response_once", response, columns=("study_id", "respondent_id", "kind", "attempt"))
    allowed(lambda: response(attempt=2))


def test_an_account_origin_says_how_the_study_made_it(study, users):
    """AccountOrigin.how is one of its kinds: a researcher's right to reset rests on it (issue 31)."""
    violates("origin_how_valid", lambda: AccountOrigin.objects.create(user=users[0], study=study, how="guessed"))
    allowed(lambda: AccountOrigin.objects.create(user=users[1], study=study, how="added"))


# --- counters (progress/counters.py) -------------------------------------------------


def test_one_counter_row_per_study_and_domain_and_per_study_annotator_and_domain(study, other_study, users):
    """The counter upserts rely on these: a second row for the same key would split the count."""
    DomainCount.objects.create(study=study, domain="bio", items=1)
    violates(
        "domain_count_unique",
        lambda: DomainCount.objects.create(study=study, domain="bio"),
        columns=("study_id", "domain"),
    )
    allowed(lambda: DomainCount.objects.create(study=other_study, domain="bio"))
    AnnotatorCount.objects.create(study=study, user=users[0], domain="bio", annotations=1)
    violates(
        "annotator_count_unique",
        lambda: AnnotatorCount.objects.create(study=study, user=users[0], domain="bio"),
        columns=("study_id", "user_id", "domain"),
    )
    allowed(lambda: AnnotatorCount.objects.create(study=study, user=users[0], domain="science"))


def test_one_active_time_bucket_row_per_study_annotator_and_bucket(study, other_study, users):
    """The sketch's upserts rely on it (progress/quality_counters.py): a second row would split a bucket's count."""
    ActiveTimeBucket.objects.create(study=study, user=users[0], bucket=640, labels=1)
    violates(
        "active_time_bucket_unique",
        lambda: ActiveTimeBucket.objects.create(study=study, user=users[0], bucket=640),
        columns=("study_id", "user_id", "bucket"),
    )
    allowed(lambda: ActiveTimeBucket.objects.create(study=study, user=users[0], bucket=641))
    allowed(lambda: ActiveTimeBucket.objects.create(study=other_study, user=users[0], bucket=640))


# --- coverage -----------------------------------------------------------------------


def test_every_named_constraint_is_violated_by_a_test_in_this_module():
    """A constraint added to the models without a test here fails this."""
    declared = {
        constraint.name
        for model in apps.get_app_config("annotation").get_models()
        for constraint in model._meta.constraints
        if isinstance(constraint, (models.CheckConstraint, models.UniqueConstraint))
    }
    tested = set(re.findall(r'violates\(\s*"(\w+)"', Path(__file__).read_text(encoding="utf-8")))
    assert len(declared) >= 16
    assert declared - tested == set()
    assert tested - declared == set(), "a test names a constraint the models do not declare"
