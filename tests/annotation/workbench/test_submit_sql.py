"""The common submit in one statement on PostgreSQL (workbench/submit_sql.py, issue 15 point 2).

It must write exactly what the step-by-step submit writes, and nothing at all when what the
answer was checked against (the side shown on the left, the number of evidence passages) is
not what the assignment holds: the step-by-step path then decides. Run on both databases;
SQLite always takes the step-by-step path.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import ANSWER_FIELDS, Annotation, Assignment, Item
from annotation.progress.selectors import study_counts
from annotation.progress.tally import counted, counted_from_rows
from annotation.workbench import submit_sql
from annotation.workbench.selectors import annotator_progress
from annotation.workbench.services import SubmittedAnswer, claim_next, submit, submit_with_progress
from tests.support.assignment_study import make_study

pytestmark = pytest.mark.django_db

THREE_PASSAGES = {"evidence": [{"text": "one"}, {"text": "two"}, {"text": "three"}]}
JUDGED = [{"index": k, "judgement": "support", "useful": k == 0} for k in range(3)]

#: (study kind, study options, item overrides, the answer)
CASES = {
    "verification": ("verification", {}, None, SubmittedAnswer(label="contradicted", active_ms=4200)),
    "evidence": (
        "verification",
        {"evidence_judgements": True, "justification_required": True},
        THREE_PASSAGES,
        SubmittedAnswer(label="supported", evidence=JUDGED, justification="  passage one says so ", active_ms=1),
    ),
    "preference": ("preference", {}, None, SubmittedAnswer(choice="left_strong", justification="fuller")),
}

#: Statements of one submit by database: PostgreSQL one; SQLite its transaction step by step (the
#: UPDATE ... RETURNING, the item, the annotation, the item's count, the counter, and for an answer
#: with an active time its bucket of the sketch), in a savepoint here.
STATEMENTS = {"postgresql": 1, "sqlite": 7}

ROW_FIELDS = (*ANSWER_FIELDS, "active_ms", "source", "study_id", "created_at", "updated_at")


def _stored(assignment_id: int) -> tuple[dict, tuple]:
    annotation = Annotation.objects.get(assignment_id=assignment_id)
    assignment = Assignment.objects.get(pk=assignment_id)
    return (
        {name: getattr(annotation, name) for name in ROW_FIELDS},
        (assignment.status, assignment.submitted_at, assignment.lease_expires_at),
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_common_submit_writes_in_one_statement_what_the_step_by_step_submit_writes(case, monkeypatch):
    kind, options, overrides, answer = CASES[case]
    study, (a1, a2, _) = make_study(kind, n=2, items=1, item_overrides=overrides, **options)
    first, second = claim_next(user=a1, study=study), claim_next(user=a2, study=study)
    assert first.item_id == second.item_id
    now = timezone.now()

    with CaptureQueriesContext(connection) as one:
        submitted = submit(
            user=a1, study=study, assignment_id=first.pk, answer=answer, now=now, shown_left=first.left_system
        )
    timed_bucket = int(connection.vendor == "sqlite" and answer.active_ms is not None)
    assert len(one) == STATEMENTS[connection.vendor] + timed_bucket, [query["sql"][:60] for query in one]
    assert (submitted.pk, submitted.status, submitted.lease_expires_at) == (first.pk, "submitted", None)

    # The same answer by the step-by-step path, on the other slot of the same item, counts it complete.
    monkeypatch.setattr(submit_sql, "submit_with_first_answer", lambda **kwargs: None)
    submit(user=a2, study=study, assignment_id=second.pk, answer=answer, now=now, shown_left=second.left_system)
    (row_1, state_1), (row_2, state_2) = _stored(first.pk), _stored(second.pk)
    if kind == "preference" and first.left_system != second.left_system:
        # "left" means the other system on the other slot: stored in system space, never as left/right
        assert row_1.pop("preferred_system") != row_2.pop("preferred_system")
        assert row_1.pop("label") != row_2.pop("label")
    assert row_1 == row_2
    assert state_1 == state_2 == ("submitted", now, None)
    assert Item.objects.get(pk=first.item_id).n_answers == 2
    assert counted(study) == counted_from_rows(study)
    assert study_counts(study)["items_complete"] == 1


def test_an_answer_checked_against_the_wrong_side_is_stored_as_the_assignment_shows_it():
    """A client that sends a stale or forged `left_system` cannot move the answer to the other system."""
    study, (a1, *_) = make_study("preference", n=1, items=1)
    assignment = claim_next(user=a1, study=study)
    other = next(system for system in study.systems if system != assignment.left_system)
    submit(
        user=a1,
        study=study,
        assignment_id=assignment.pk,
        answer=SubmittedAnswer(choice="left_slight"),
        shown_left=other,
    )
    annotation = Annotation.objects.get(assignment=assignment)
    assert annotation.preferred_system == assignment.left_system
    assert counted(study) == counted_from_rows(study)


def test_judgements_of_fewer_passages_than_the_item_has_are_refused_and_nothing_is_written():
    """Two complete-looking judgements (0 and 1) for an item of three passages: the one statement must
    not take them (it requires three), and the step-by-step path says which passage is missing."""
    study, (a1, *_) = make_study(evidence_judgements=True, n=1, items=1, item_overrides=THREE_PASSAGES)
    assignment = claim_next(user=a1, study=study)
    with pytest.raises(ServiceError, match="missing index 2"):
        submit(
            user=a1,
            study=study,
            assignment_id=assignment.pk,
            answer=SubmittedAnswer(label="supported", evidence=JUDGED[:2]),
        )
    assert not Annotation.objects.exists()
    assert Assignment.objects.get(pk=assignment.pk).status == "active"
    assert Item.objects.get(pk=assignment.item_id).n_answers == 0
    assert counted(study) == counted_from_rows(study)


def test_an_item_whose_evidence_is_not_a_list_is_left_to_the_step_by_step_path(monkeypatch):
    """What the one statement cannot count the same way as Python (here a string) makes it write nothing."""
    study, (a1, *_) = make_study(evidence_judgements=True, n=1, items=1, item_overrides={"evidence": []})
    assignment = claim_next(user=a1, study=study)
    Item.objects.filter(pk=assignment.item_id).update(payload={"claim": "c", "evidence": "ab"})
    taken = []
    real = submit_sql.submit_with_first_answer

    def in_one_statement(**kwargs):
        taken.append(real(**kwargs))
        return taken[-1]

    monkeypatch.setattr(submit_sql, "submit_with_first_answer", in_one_statement)
    with pytest.raises(ServiceError, match=r"index 0\.\.1"):
        submit(user=a1, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported"))
    assert taken == ([None] if connection.vendor == "postgresql" else [])
    assert not Annotation.objects.exists()


def test_the_progress_read_with_the_answer_is_the_progress_after_it():
    """`submit_with_progress` reads the counts as of before its own writes (PostgreSQL): they must equal
    a count made after the answer, with an item held ahead, on the item that finishes the annotator's
    share, and for an answer taken step by step (a revision)."""
    study, (a1, a2, _) = make_study(n=2, items=3)
    for _ in range(3):
        current = claim_next(user=a1, study=study)
        ahead = claim_next(user=a1, study=study, ahead_of=current.pk)
        answered = submit_with_progress(
            user=a1, study=study, assignment_id=current.pk, answer=SubmittedAnswer(label="supported")
        )
        assert answered.assignment.pk == current.pk
        assert answered.progress == annotator_progress(a1, study), ahead and ahead.pk
        other = claim_next(user=a2, study=study)
        if other is not None:
            submit(user=a2, study=study, assignment_id=other.pk, answer=SubmittedAnswer(label="inconclusive"))
    assert annotator_progress(a1, study) == {"done": 3, "total": 3, "total_exact": True}
    revised = submit_with_progress(
        user=a1, study=study, assignment_id=current.pk, answer=SubmittedAnswer(label="contradicted")
    )
    assert revised.progress == {"done": 3, "total": 3, "total_exact": True}


@pytest.mark.parametrize("evidence", [5, "0: support", {"index": 0, "judgement": "support"}])
def test_evidence_judgements_that_are_not_a_list_are_refused_by_name(evidence):
    """The service takes untrusted evidence: the one-statement path must not stumble on it (a count of
    something that is not a list) before the step-by-step path refuses it with a message."""
    study, (a1, *_) = make_study(evidence_judgements=True, n=1, items=1, item_overrides=THREE_PASSAGES)
    assignment = claim_next(user=a1, study=study)
    with pytest.raises(ServiceError, match="evidence judgements must be an array of objects"):
        submit(
            user=a1,
            study=study,
            assignment_id=assignment.pk,
            answer=SubmittedAnswer(label="supported", evidence=evidence),
        )
    assert not Annotation.objects.exists()
    assert Assignment.objects.get(pk=assignment.pk).status == "active"
