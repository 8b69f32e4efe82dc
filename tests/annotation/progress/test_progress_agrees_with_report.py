"""The progress page's count of labels in the report is the report's own count (issue 29: one rule).

The progress page counts what people did; the report leaves out labels by its rules (participants
who withdrew or were screened out, labels on items since made checks). The page says how many of
its labels the report counts and why the others are out, without reading every label
(annotation/lib/analysis_rules.left_out_of_analysis); this holds that number to the report's.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.crowd import services as crowd
from annotation.members.services import add_members
from annotation.models import Annotation, Study
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from metaeval.reporting import ReportOptions, build_report
from tests.annotation.crowd_support import crowd_study

pytestmark = pytest.mark.django_db


def _participant_labels(link, pid: str, labels: int):
    participant = crowd.arrive(link=link, ids=crowd.PanelIds(participant=pid, study="S1", session="X1"))
    crowd.accept_consent(participant=participant)
    crowd.start(participant=participant, link=link)
    for _ in range(labels):
        assignment = claim_next(user=participant.member.user, study=participant.study)
        assert assignment is not None
        submit(
            user=participant.member.user,
            study=participant.study,
            assignment_id=assignment.pk,
            answer=SubmittedAnswer(label="supported", active_ms=30_000),
        )
        crowd.after_item(participant=participant, link=link)
    participant.refresh_from_db()
    return participant


def _in_report(client, study: Study) -> int:
    context = client.get(reverse("annotation:study_progress", args=[study.slug])).context
    return context["in_report"]


def test_the_progress_page_counts_in_the_report_what_the_report_counts(client):
    study, link = crowd_study("agree", items=6, gold=2, n=3, researcher="agree-r", items_per_participant=5)
    client.force_login(study.members.get(role="researcher").user)
    add_members(study=study, usernames=["agree-a1"], role="annotator")
    annotator = study.members.get(user__username="agree-a1").user
    while (assignment := claim_next(user=annotator, study=study)) is not None:  # g-0 and g-1 among them
        submit(user=annotator, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported"))
    kept = _participant_labels(link, "kept", 2)
    gone = _participant_labels(link, "gone", 2)
    crowd.withdraw(participant=gone)
    # g-0 becomes an attention check after it was labelled as an ordinary item
    crowd.configure_link(study=study, changes={"attention_items": ["g-0"], "attention_every": 3})
    study.refresh_from_db()
    stored = Annotation.objects.filter(study=study).count()
    report = build_report(study, ReportOptions(n_resamples=0))
    assert report["n_annotations"] < stored  # both rules leave something out here
    assert _in_report(client, study) == report["n_annotations"]
    page = client.get(reverse("annotation:study_progress", args=[study.slug])).content.decode()
    on_check_by_others = (
        Annotation.objects.filter(study=study, assignment__item__external_id="g-0")
        .exclude(assignment__annotator=gone.member.user)
        .count()
    )
    assert on_check_by_others >= 1  # the annotator's label at least (the study's seed decides the rest)
    assert "2 by participants who withdrew or were screened out" in page
    assert f"{on_check_by_others} on items now used as checks" in page
    assert kept.status == "working"
    study.checks_in_agreement = True
    study.save(update_fields=["checks_in_agreement"])
    assert _in_report(client, study) == build_report(study, ReportOptions(n_resamples=0))["n_annotations"]
