"""The assignment service (docs/architecture.md, Mechanisms): slots, leases, breadth-first order, answers in system space."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.lib.randomisation import left_system_for, queue_position
from annotation.members.services import add_members
from annotation.models import Annotation, AnnotationRevision, Assignment, Item, Study
from annotation.studies.services import set_study_status
from annotation.transfer.selectors import export_rows
from annotation.vocab import (
    PREFERENCE_BOTH_BAD,
    PREFERENCE_CHOICES,
    PREFERENCE_LABELS,
    preference_choice_parts,
    preference_label,
    preference_parts,
)
from annotation.workbench.forms import PREFERENCE_OPTIONS
from annotation.workbench.selectors import annotator_progress, display_payload
from annotation.workbench.services import (
    CANDIDATES,
    LeaseLost,
    NotAllowed,
    SubmittedAnswer,
    claim_next,
    flag,
    lease_length,
    skip,
    submit,
)
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db

SUPPORTED = SubmittedAnswer(label="supported")


def answer_all(study: Study, user, answer: SubmittedAnswer = SUPPORTED) -> list[str]:
    """Claim and submit until nothing is left; the external ids in the order served."""
    served = []
    while (assignment := claim_next(user=user, study=study)) is not None:
        served.append(assignment.item.external_id)
        submit(user=user, study=study, assignment_id=assignment.pk, answer=answer)
    return served


# --- handing out ---------------------------------------------------------------


def test_the_same_assignment_comes_back_until_it_is_answered():
    study, (a1, *_) = make_study()
    now = timezone.now()
    first = claim_next(user=a1, study=study, now=now)
    again = claim_next(user=a1, study=study, now=now + timedelta(minutes=5))
    assert again.pk == first.pk
    assert again.lease_expires_at == now + timedelta(minutes=5) + lease_length()
    assert Assignment.objects.filter(annotator=a1).count() == 1
    submit(user=a1, study=study, assignment_id=first.pk, answer=SUPPORTED)
    assert claim_next(user=a1, study=study).pk != first.pk


def test_breadth_first_items_in_progress_are_finished_first():
    # More items than one claim looks at (CANDIDATES): the database, not only Python, must put them first.
    study, (a1, a2, a3) = make_study(items=CANDIDATES + 8)
    first = claim_next(user=a1, study=study)
    # a1 has not even answered: the item is in progress, so the others join it.
    assert claim_next(user=a2, study=study).item_id == first.item_id
    submit(user=a1, study=study, assignment_id=first.pk, answer=SUPPORTED)
    assert claim_next(user=a3, study=study).item_id == first.item_id
    # Full now: a1's next item is a new one.
    second = claim_next(user=a1, study=study)
    assert second.item_id != first.item_id
    assert Item.objects.get(pk=first.item_id).slots_taken == 3


def test_breadth_first_prefers_the_item_with_most_slots_taken():
    study, users = make_study(items=4, annotators=4)
    one = Item.objects.get(study=study, external_id="i-1")
    two = Item.objects.get(study=study, external_id="i-2")
    for user, item in ((users[0], one), (users[1], two), (users[2], two)):
        Assignment.objects.create(
            study=study,
            item=item,
            annotator=user,
            slot=item.slots_taken,
            max_slots=3,
            status="submitted",
        )
        Item.objects.filter(pk=item.pk).update(slots_taken=item.slots_taken + 1)
        item.refresh_from_db()
    assert claim_next(user=users[3], study=study).item_id == two.pk
    submit(user=users[3], study=study, assignment_id=Assignment.objects.get(annotator=users[3]).pk, answer=SUPPORTED)
    assert claim_next(user=users[3], study=study).item_id == one.pk


def test_a_user_never_gets_the_same_item_twice():
    study, (a1, *_) = make_study(items=5)
    served = answer_all(study, a1)
    assert sorted(served) == [f"i-{number}" for number in range(5)]
    assert claim_next(user=a1, study=study) is None


def test_a_skipped_item_is_not_served_again_and_its_slot_is_freed():
    study, (a1, a2, _) = make_study(items=3, n=1)
    first = claim_next(user=a1, study=study)
    skipped = skip(user=a1, study=study, assignment_id=first.pk)
    assert (skipped.status, skipped.slot) == ("skipped", None)
    assert Item.objects.get(pk=first.item_id).slots_taken == 0
    served = answer_all(study, a1)
    assert first.item.external_id not in served and len(served) == 2
    # The freed slot (slot 0 of an N=1 study) goes to someone else.
    taken = claim_next(user=a2, study=study)
    assert (taken.item_id, taken.slot) == (first.item_id, 0)
    assert skip(user=a1, study=study, assignment_id=first.pk).status == "skipped"  # repeat-safe


def test_an_expired_lease_is_reclaimed_by_someone_who_has_not_had_the_item(caplog):
    study, (a1, a2, _) = make_study(kind="preference", items=2, n=2)
    now = timezone.now()
    held = claim_next(user=a1, study=study, now=now)
    later = now + lease_length() + timedelta(seconds=1)
    taken = claim_next(user=a2, study=study, now=later)
    assert taken.item_id == held.item_id
    # Same slot, same counterbalanced side: the reclaim does not disturb the design.
    assert (taken.slot, taken.left_system) == (held.slot, held.left_system)
    assert taken.lease_expires_at == later + lease_length()
    old = Assignment.objects.get(pk=held.pk)
    assert (old.status, old.slot, old.annotator_id) == ("skipped", None, a1.pk)
    assert old.lease_expires_at is not None  # the mark of a lease that ran out
    assert Item.objects.get(pk=held.item_id).slots_taken == 1
    with (
        caplog.at_level(logging.INFO, logger="annotation.workbench.services"),
        pytest.raises(LeaseLost, match="ran out"),
    ):
        submit(user=a1, study=study, assignment_id=held.pk, answer=SubmittedAnswer(choice="tie"))
    assert not Annotation.objects.exists()
    assert f"answered assignment {held.pk} in study {study.slug} after its lease ran out" in caplog.text
    # a1 moves on and is never served that item again.
    assert claim_next(user=a1, study=study, now=later).item_id != held.item_id


def test_an_expired_lease_nobody_took_is_still_the_owners():
    study, (a1, *_) = make_study()
    now = timezone.now()
    held = claim_next(user=a1, study=study, now=now)
    late = now + 2 * lease_length()
    assert claim_next(user=a1, study=study, now=late).pk == held.pk  # renewed, not lost
    submit(user=a1, study=study, assignment_id=held.pk, answer=SUPPORTED, now=late)
    assert Assignment.objects.get(pk=held.pk).status == "submitted"


def test_an_unexpired_lease_is_not_reclaimed():
    study, (a1, a2, _) = make_study(items=1, n=1)
    now = timezone.now()
    claim_next(user=a1, study=study, now=now)
    assert claim_next(user=a2, study=study, now=now + lease_length() - timedelta(seconds=1)) is None


def test_no_item_gets_more_than_n_annotators():
    study, users = make_study(items=1, n=2, annotators=4)
    claimed = [claim_next(user=user, study=study) for user in users]
    assert [assignment is not None for assignment in claimed] == [True, True, False, False]
    assert sorted(assignment.slot for assignment in claimed[:2]) == [0, 1]


def test_a_counter_that_lags_behind_cannot_over_assign():
    """Even if `slots_taken` is wrong (a bug, a hand edit), the held slots decide, and other items are still served."""
    study, users = make_study(items=2, n=2, annotators=5)
    first = claim_next(user=users[0], study=study)
    assert claim_next(user=users[1], study=study).item_id == first.item_id  # breadth-first: both on one item
    Item.objects.filter(pk=first.item_id).update(slots_taken=0)
    served = [claim_next(user=user, study=study) for user in users[2:]]
    assert served[0].item_id != first.item_id and served[1].item_id != first.item_id
    assert served[2] is None  # the only item left for users[4] is the full one
    assert Assignment.objects.filter(item_id=first.item_id).count() == 2
    assert Item.objects.get(pk=first.item_id).slots_taken == 2  # repaired


def test_a_claim_that_keeps_losing_races_says_busy_not_finished(monkeypatch, caplog):
    """Lost races are retried; if they never stop, the answer is "try again" (503), never "nothing left" (204)."""
    from annotation.workbench import services as assignments

    study, (a1, *_) = make_study()
    monkeypatch.setattr(assignments, "_claim_alone", lambda *args: None)  # the transactional claim's retries
    real_claim, calls = assignments._claim, []

    def busy_once(*args):
        calls.append(1)
        if len(calls) == 1:
            raise assignments._Busy
        return real_claim(*args)

    monkeypatch.setattr(assignments, "_claim", busy_once)
    assert claim_next(user=a1, study=study) is not None and len(calls) == 2

    def always_busy(*args):
        raise assignments._Busy

    monkeypatch.setattr(assignments, "_claim", always_busy)
    monkeypatch.setattr(assignments, "CLAIM_ATTEMPTS", 3)
    caplog.clear()
    with (
        caplog.at_level(logging.DEBUG, logger="annotation.workbench.services"),
        pytest.raises(assignments.ClaimContention),
    ):
        claim_next(user=a1, study=study)
    levels = [record.levelname for record in caplog.records if record.name == "annotation.workbench.services"]
    assert levels == ["DEBUG"] * 3 + ["WARNING"]  # each lost race, then giving up
    assert "lost a race (attempt 3 of 3): _Busy" in caplog.text and "gave up after 3 lost races" in caplog.text


def test_gold_items_are_served_like_any_other_and_never_show_the_gold():
    study, (a1, *_) = make_study(items=3, item_overrides={"gold": "contradicted"})
    assert Item.objects.filter(study=study, gold_label="contradicted").count() == 3
    assignment = claim_next(user=a1, study=study)
    shown = json.dumps(display_payload(assignment))
    assert "contradicted" not in shown and "gold" not in shown
    assert len(answer_all(study, a1)) == 3


def test_progress_counts_what_the_user_did_and_can_still_do():
    study, (a1, a2, _) = make_study(items=4, n=1)
    assert annotator_progress(a1, study) == {"done": 0, "total": 4, "total_exact": True}
    first = claim_next(user=a1, study=study)
    submit(user=a1, study=study, assignment_id=first.pk, answer=SUPPORTED)
    claim_next(user=a2, study=study)  # someone else holds one item now
    assert annotator_progress(a1, study) == {"done": 1, "total": 3, "total_exact": True}


def test_progress_in_a_big_study_counts_open_items_only_up_to_a_limit(monkeypatch):
    from annotation.workbench import selectors as workbench

    monkeypatch.setattr(workbench, "PROGRESS_COUNT_LIMIT", 3)
    study, (a1, a2, _) = make_study(items=10, n=2)
    assert annotator_progress(a1, study) == {"done": 0, "total": 3, "total_exact": False}
    for _ in range(7):
        assignment = claim_next(user=a1, study=study)
        submit(user=a1, study=study, assignment_id=assignment.pk, answer=SUPPORTED)
    # a1 has had 7 of the 10 open items: the 3 others are counted exactly again.
    assert annotator_progress(a1, study) == {"done": 7, "total": 10, "total_exact": True}
    assert annotator_progress(a2, study) == {"done": 0, "total": 3, "total_exact": False}


# --- randomisation ---------------------------------------------------------------


def test_randomisation_is_stored_and_reproducible_from_the_seed():
    study, users = make_study(kind="preference", items=4, n=3)
    for user in users:
        answer_all(study, user, SubmittedAnswer(choice="tie"))
    assignments = Assignment.objects.filter(study=study).select_related("item")
    assert assignments.count() == 12
    for assignment in assignments:
        external_id = assignment.item.external_id
        assert assignment.queue_position == queue_position(study.seed, str(assignment.annotator_id), external_id)
        assert assignment.left_system == left_system_for(study.seed, external_id, assignment.slot, study.systems)


@pytest.mark.parametrize("n, split", [(2, [1, 1]), (3, [1, 2]), (4, [2, 2])])
def test_left_right_is_counterbalanced_across_an_items_annotators(n, split):
    study, users = make_study(kind="preference", items=5, n=n, annotators=n)
    for user in users:
        answer_all(study, user, SubmittedAnswer(choice="tie"))
    for item in Item.objects.filter(study=study):
        sides = list(Assignment.objects.filter(item=item).values_list("left_system", flat=True))
        assert len(sides) == n
        assert sorted(sides.count(system) for system in study.systems) == split


def test_among_items_at_the_same_stage_the_annotators_keyed_order_decides():
    """Untouched items are served in each annotator's own order (their queue position), not in import order."""
    study, users = make_study(items=30, n=1, annotators=6)  # 30 < CANDIDATES: every item is a candidate
    remaining = {item.external_id for item in Item.objects.filter(study=study)}
    for user in users:
        expected = min(remaining, key=lambda external_id: queue_position(study.seed, str(user.pk), external_id))
        assert claim_next(user=user, study=study).item.external_id == expected
        remaining.discard(expected)


# --- answers ---------------------------------------------------------------------------


def test_submit_is_idempotent():
    study, (a1, *_) = make_study()
    assignment = claim_next(user=a1, study=study)
    for _ in range(3):
        submit(user=a1, study=study, assignment_id=assignment.pk, answer=SUPPORTED)
    assert Annotation.objects.filter(assignment=assignment).count() == 1
    assert not AnnotationRevision.objects.exists()


def test_submitting_again_with_another_answer_is_a_revision():
    """The "back" flow: the user's own submitted assignment, answered again."""
    study, (a1, *_) = make_study()
    assignment = claim_next(user=a1, study=study)
    submit(user=a1, study=study, assignment_id=assignment.pk, answer=SUPPORTED)
    submit(
        user=a1,
        study=study,
        assignment_id=assignment.pk,
        answer=SubmittedAnswer(label="contradicted", justification="misread"),
    )
    annotation = Annotation.objects.get(assignment=assignment)
    assert (annotation.label, annotation.justification) == ("contradicted", "misread")
    revision = AnnotationRevision.objects.get(annotation=annotation)
    assert (revision.old_value["label"], revision.new_value["label"]) == ("supported", "contradicted")


def test_preference_answers_are_stored_in_system_space_for_both_placements():
    study, (a1, a2, _) = make_study(kind="preference", items=1, n=2)
    first = claim_next(user=a1, study=study)
    second = claim_next(user=a2, study=study)
    assert {first.left_system, second.left_system} == {"veriscore", "safe"}  # declared order: veriscore (A), safe (B)
    submit(user=a1, study=study, assignment_id=first.pk, answer=SubmittedAnswer(choice="left_strong"))
    submit(user=a2, study=study, assignment_id=second.pk, answer=SubmittedAnswer(choice="left_slight"))
    expected_label = {"veriscore": "a", "safe": "b"}
    for assignment, strength in ((first, "strong"), (second, "slight")):
        annotation = Annotation.objects.get(assignment=assignment)
        assert annotation.preferred_system == assignment.left_system
        assert (annotation.strength, annotation.choice) == (strength, f"left_{strength}")
        assert annotation.label == f"{expected_label[assignment.left_system]}_{strength}"
    rows = {row["choice"]: row for row in export_rows(study)}
    for assignment, choice in ((first, "left_strong"), (second, "left_slight")):
        row = rows[choice]
        assert row["left_system"] == assignment.left_system
        assert row["right_system"] == ({"veriscore", "safe"} - {assignment.left_system}).pop()
        assert row["preferred_system"] == assignment.left_system
        assert row["strength"] == choice.split("_")[1]


@pytest.mark.parametrize(
    "choice, preferred_side, label_kind",
    [
        ("right_strong", "right", "strong"),
        ("right_slight", "right", "slight"),
        ("tie", None, "tie"),
    ],
)
def test_preference_right_and_tie(choice, preferred_side, label_kind):
    study, (a1, *_) = make_study(kind="preference", items=1, n=1)
    assignment = claim_next(user=a1, study=study)
    submit(user=a1, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(choice=choice))
    annotation = Annotation.objects.get(assignment=assignment)
    right = "safe" if assignment.left_system == "veriscore" else "veriscore"
    if preferred_side is None:
        assert (annotation.label, annotation.preferred_system, annotation.strength) == ("tie", "", "")
        row = next(export_rows(study))
        assert (row["preferred_system"], row["strength"], row["choice"]) == ("", "", "tie")
    else:
        assert annotation.preferred_system == right
        assert annotation.label == ("a" if right == "veriscore" else "b") + "_" + label_kind


def test_verification_answer_with_evidence_and_rationale():
    study, (a1, *_) = make_study(
        evidence_judgements=True,
        item_overrides={"evidence": [{"text": "one"}, {"text": "two"}]},
    )
    assignment = claim_next(user=a1, study=study)
    submit(
        user=a1,
        study=study,
        assignment_id=assignment.pk,
        answer=SubmittedAnswer(
            label="contradicted",
            justification="passage 2 says otherwise",
            active_ms=4200,
            evidence=[
                {"index": 1, "judgement": "not_support", "useful": True},
                {"index": 0, "judgement": "irrelevant"},
            ],
        ),
    )
    annotation = Annotation.objects.get(assignment=assignment)
    assert annotation.evidence_judgements == [
        {"index": 0, "judgement": "irrelevant", "useful": False},
        {"index": 1, "judgement": "not_support", "useful": True},
    ]
    assert (annotation.label, annotation.active_ms, annotation.justification) == (
        "contradicted",
        4200,
        "passage 2 says otherwise",
    )


@pytest.mark.parametrize(
    "answer, message",
    [
        (SubmittedAnswer(label="true"), "label must be one of"),
        (SubmittedAnswer(label=""), "label must be one of"),
        (SubmittedAnswer(label="supported", evidence=[{"index": 5, "judgement": "support"}]), "evidence index"),
        (SubmittedAnswer(label="supported", evidence=[{"index": True, "judgement": "support"}]), "evidence index"),
        (SubmittedAnswer(label="supported", evidence=[{"index": 0, "judgement": "yes"}]), "evidence judgement must be"),
        (
            SubmittedAnswer(label="supported", evidence=[{"index": 0, "judgement": "support", "useful": "yes"}]),
            "'useful'",
        ),
        (SubmittedAnswer(label="supported", evidence=[{"index": 0, "judgement": "support"}] * 2), "judged twice"),
        (SubmittedAnswer(label="supported", evidence=["support"]), "must be an object"),
        (
            SubmittedAnswer(label="supported", evidence=[{"index": 0, "judgement": "support", "usefull": True}]),
            "unknown key",
        ),
        (SubmittedAnswer(label="supported", active_ms=-1), "active_ms"),
        (SubmittedAnswer(label="supported", active_ms=True), "active_ms"),
        (SubmittedAnswer(label="supported", justification="x" * 10_001), "limit"),
    ],
)
def test_bad_verification_answers_are_refused_and_change_nothing(answer, message):
    study, (a1, *_) = make_study(evidence_judgements=True)
    assignment = claim_next(user=a1, study=study)
    with pytest.raises(ServiceError, match=message):
        submit(user=a1, study=study, assignment_id=assignment.pk, answer=answer)
    assert Assignment.objects.get(pk=assignment.pk).status == "active"
    assert not Annotation.objects.exists()


TWO_PASSAGES = {"evidence": [{"text": "one"}, {"text": "two"}]}


@pytest.mark.parametrize(
    "overrides, evidence, message",
    [
        (TWO_PASSAGES, None, "judgement of every evidence passage: send 'evidence' with index 0..1"),
        (TWO_PASSAGES, [{"index": 1, "judgement": "support"}], "missing index 0 .the item has 2 passages"),
        ({"evidence": []}, [{"index": 0, "judgement": "support"}], "no evidence passages to judge"),
    ],
)
def test_a_study_that_asks_for_evidence_judgements_gets_one_per_passage(overrides, evidence, message):
    """The same rule as the web form: all passages judged, or the answer is refused (nothing stored)."""
    study, (a1, *_) = make_study(evidence_judgements=True, item_overrides=overrides)
    assignment = claim_next(user=a1, study=study)
    with pytest.raises(ServiceError, match=message):
        submit(
            user=a1,
            study=study,
            assignment_id=assignment.pk,
            answer=SubmittedAnswer(label="supported", evidence=evidence),
        )
    assert not Annotation.objects.exists()


def test_an_item_without_passages_needs_no_evidence_judgements():
    study, (a1, *_) = make_study(evidence_judgements=True, item_overrides={"evidence": []})
    assignment = claim_next(user=a1, study=study)
    submit(user=a1, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported"))
    assert Annotation.objects.get().evidence_judgements == []


def test_evidence_judgements_are_refused_when_the_study_does_not_ask_for_them():
    study, (a1, *_) = make_study()
    assignment = claim_next(user=a1, study=study)
    with pytest.raises(ServiceError, match="does not ask for evidence"):
        submit(
            user=a1,
            study=study,
            assignment_id=assignment.pk,
            answer=SubmittedAnswer(label="supported", evidence=[{"index": 0, "judgement": "support"}]),
        )


@pytest.mark.parametrize(
    "options, answer, message",
    [
        ({}, SubmittedAnswer(choice="left"), "choice must be one of"),
        ({}, SubmittedAnswer(label="a_strong"), "choice must be one of"),
        ({"tie_allowed": False}, SubmittedAnswer(choice="tie"), "does not allow a tie"),
        ({}, SubmittedAnswer(choice="both_bad"), "does not offer 'both bad'"),
        ({"justification_required": True}, SubmittedAnswer(choice="left_strong"), "asks for a justification"),
        (
            {"justification_required": True},
            SubmittedAnswer(choice="left_strong", justification="   "),
            "asks for a justification",
        ),
    ],
)
def test_bad_preference_answers_are_refused(options, answer, message):
    study, (a1, *_) = make_study(kind="preference", **options)
    assignment = claim_next(user=a1, study=study)
    with pytest.raises(ServiceError, match=message):
        submit(user=a1, study=study, assignment_id=assignment.pk, answer=answer)
    assert not Annotation.objects.exists()


def test_the_lease_length_is_a_setting(settings):
    settings.ANNOTATION_LEASE_SECONDS = 90
    study, (a1, *_) = make_study(items=1)
    now = timezone.now()
    assert claim_next(user=a1, study=study, now=now).lease_expires_at == now + timedelta(seconds=90)


def test_preference_labels_and_choices_split_and_join_in_one_place():
    for label in (*PREFERENCE_LABELS, PREFERENCE_BOTH_BAD):
        index, strength = preference_parts(label)
        if label != PREFERENCE_BOTH_BAD:
            assert preference_label(index, strength) == label
    assert preference_parts("b_strong") == (1, "strong") and preference_parts("tie") == (None, "")
    assert preference_choice_parts("left_slight") == (0, "slight") and preference_choice_parts("both_bad") == (None, "")
    assert [option.value for option in PREFERENCE_OPTIONS] == list(PREFERENCE_CHOICES)  # the page offers the vocabulary
    for bad in (
        lambda: preference_parts("a_strongest"),
        lambda: preference_choice_parts("a_strong"),
        lambda: preference_label(0, "very"),
        lambda: preference_label(2, "strong"),
    ):
        with pytest.raises(ValueError):
            bad()


def test_both_bad_when_the_study_offers_it():
    study, (a1, *_) = make_study(kind="preference", both_bad_allowed=True, justification_required=True)
    assignment = claim_next(user=a1, study=study)
    submit(
        user=a1,
        study=study,
        assignment_id=assignment.pk,
        answer=SubmittedAnswer(choice="both_bad", justification="both invent facts"),
    )
    annotation = Annotation.objects.get(assignment=assignment)
    assert (annotation.label, annotation.preferred_system, annotation.choice) == ("both_bad", "", "both_bad")


# --- who may do what ------------------------------------------------------------------


def test_a_closed_study_refuses_claims_and_answers():
    study, (a1, *_) = make_study()
    assignment = claim_next(user=a1, study=study)
    set_study_status(study=study, status=Study.Status.CLOSED)
    with pytest.raises(NotAllowed, match="closed"):
        claim_next(user=a1, study=study)
    with pytest.raises(NotAllowed, match="closed"):
        submit(user=a1, study=study, assignment_id=assignment.pk, answer=SUPPORTED)
    with pytest.raises(NotAllowed):
        skip(user=a1, study=study, assignment_id=assignment.pk)


def test_a_claim_that_read_the_study_open_before_it_closed_leaves_no_lease():
    """The close/claim race: the annotator's request read the study open, then it closed."""
    study, (a1, a2, _) = make_study()
    held = claim_next(user=a2, study=study)  # released by the close itself
    read_before_the_close = Study.objects.get(pk=study.pk)
    set_study_status(study=study, status=Study.Status.CLOSED)
    with pytest.raises(NotAllowed, match="closed"):
        claim_next(user=a1, study=read_before_the_close)
    assert not Assignment.objects.filter(study=study, status=Assignment.Status.ACTIVE).exists()
    assert set(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == {0}
    late = Assignment.objects.get(study=study, annotator=a1)
    assert (late.status, late.slot) == (Assignment.Status.SKIPPED, None)  # a late submit says the lease ended
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.SKIPPED


def test_a_claim_that_commits_while_the_close_runs_is_released_when_the_close_commits(
    django_capture_on_commit_callbacks,
):
    from django.db import transaction

    study, (a1, *_) = make_study()
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        set_study_status(study=study, status=Study.Status.CLOSED)  # its leases released, not committed yet
        item = Item.objects.filter(study=study).first()
        Assignment.objects.create(  # as a claim committing between the release and the close's commit
            study=study,
            item=item,
            annotator=a1,
            slot=0,
            max_slots=study.annotators_per_item,
            status=Assignment.Status.ACTIVE,
            lease_expires_at=timezone.now() + lease_length(),
        )
        Item.objects.filter(pk=item.pk).update(slots_taken=1)
    assert not Assignment.objects.filter(study=study, status=Assignment.Status.ACTIVE).exists()
    assert Item.objects.get(pk=item.pk).slots_taken == 0


def test_only_annotators_can_annotate(make_user):
    study, _ = make_study()
    researcher = make_user("res")
    add_members(study=study, usernames=["res"], role="researcher")
    staff = make_user("boss", is_staff=True)
    for user in (researcher, staff, make_user("stranger")):
        with pytest.raises(NotAllowed, match="annotators"):
            claim_next(user=user, study=study)
    assert not Assignment.objects.exists()


def test_someone_elses_assignment_cannot_be_answered_skipped_or_flagged():
    study, (a1, a2, _) = make_study()
    assignment = claim_next(user=a1, study=study)
    for action in (
        lambda: submit(user=a2, study=study, assignment_id=assignment.pk, answer=SUPPORTED),
        lambda: skip(user=a2, study=study, assignment_id=assignment.pk),
        lambda: flag(user=a2, study=study, assignment_id=assignment.pk, reason="x"),
    ):
        with pytest.raises(LeaseLost, match="not yours"):
            action()
    assert Assignment.objects.get(pk=assignment.pk).status == "active"


def test_an_assignment_of_another_study_is_not_found_through_this_one():
    study, (a1, *_) = make_study()
    other, _ = make_study(slug="o", annotators=0)
    assignment = claim_next(user=a1, study=study)
    add_members(study=other, usernames=[a1.username], role="annotator")
    with pytest.raises(LeaseLost, match="no such assignment"):
        submit(user=a1, study=other, assignment_id=assignment.pk, answer=SUPPORTED)


def test_skip_and_submit_do_not_undo_each_other():
    study, (a1, *_) = make_study()
    answered = claim_next(user=a1, study=study)
    submit(user=a1, study=study, assignment_id=answered.pk, answer=SUPPORTED)
    with pytest.raises(LeaseLost, match="already answered"):
        skip(user=a1, study=study, assignment_id=answered.pk)
    skipped = claim_next(user=a1, study=study)
    skip(user=a1, study=study, assignment_id=skipped.pk)
    with pytest.raises(LeaseLost, match="you skipped"):
        submit(user=a1, study=study, assignment_id=skipped.pk, answer=SUPPORTED)


def test_flag_keeps_the_reason_and_needs_one():
    study, (a1, *_) = make_study()
    assignment = claim_next(user=a1, study=study)
    with pytest.raises(ServiceError, match="say why"):
        flag(user=a1, study=study, assignment_id=assignment.pk, reason="  ")
    flag(user=a1, study=study, assignment_id=assignment.pk, reason="the evidence is empty")
    stored = Assignment.objects.get(pk=assignment.pk)
    assert (stored.flagged, stored.flag_reason, stored.status) == (True, "the evidence is empty", "active")
