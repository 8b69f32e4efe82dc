"""Crowd participants (issue 13): the link, panel IDs, consent, qualification, quota, checks, ends, payments."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotation.crowd import services as crowd
from annotation.errors import ServiceError
from annotation.models import Annotation, Assignment, Participant, ParticipantCheck, StudyMember
from annotation.transfer.selectors import export_rows
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from metaeval.reporting import build_report
from metaeval.reporting.options import ReportOptions
from metaeval.selectors import label_frame
from tests.annotation.crowd_support import arrival_url, at_items, crowd_study, gold_only_as_checks, step_url
from tests.support.streamed import streamed_json

pytestmark = pytest.mark.django_db
Status = Participant.Status


def ids(pid: str) -> crowd.PanelIds:
    return crowd.PanelIds(participant=pid, study="S1", session="X1")


def working(link, pid: str) -> Participant:
    participant = crowd.arrive(link=link, ids=ids(pid))
    crowd.accept_consent(participant=participant)
    crowd.start(participant=participant, link=link)
    return participant


def label_one(participant: Participant, link, label: str = "supported", active_ms: int = 60_000) -> Assignment | None:
    user = participant.member.user
    assignment = claim_next(user=user, study=participant.study)
    if assignment is None:
        return None
    submit(
        user=user,
        study=participant.study,
        assignment_id=assignment.pk,
        answer=SubmittedAnswer(label=label, active_ms=active_ms),
    )
    crowd.after_item(participant=participant, link=link)
    participant.refresh_from_db()
    return assignment


# --- services --------------------------------------------------------------------------


def test_the_same_panel_id_is_the_same_participant_and_another_study_is_another():
    _study, link = crowd_study()
    first = crowd.arrive(link=link, ids=ids("5f1a"))
    again = crowd.arrive(link=link, ids=ids("5f1a"))
    other = crowd.arrive(link=link, ids=ids("6b2c"))
    assert first.pk == again.pk != other.pk
    _, link2 = crowd_study("crowd-two")
    elsewhere = crowd.arrive(link=link2, ids=ids("5f1a"))
    assert elsewhere.pk != first.pk and elsewhere.member.user_id != first.member.user_id
    member = StudyMember.objects.get(pk=first.member_id)
    assert member.role == "annotator" and member.pseudonym.startswith("p-") and "5f1a" not in member.pseudonym
    assert not member.user.is_active and not member.user.has_usable_password()
    assert (first.panel_study_id, first.panel_session_id) == ("S1", "X1")


def test_panel_ids_are_read_from_the_configured_parameters_and_checked():
    _study, link = crowd_study(pid_param="workerId", study_param="hitId", session_param="assignmentId")
    found = crowd.panel_ids_from(link, {"workerId": "A1B2C3", "hitId": "H9", "assignmentId": "Z"})
    assert found == crowd.PanelIds("A1B2C3", "H9", "Z")
    with pytest.raises(crowd.BadPanelId, match="the link has no workerId"):
        crowd.panel_ids_from(link, {"PROLIFIC_PID": "x"})
    with pytest.raises(crowd.BadPanelId, match="workerId is not a valid ID"):
        crowd.panel_ids_from(link, {"workerId": "<script>"})
    with pytest.raises(crowd.BadPanelId, match="hitId is not a valid ID"):
        crowd.panel_ids_from(link, {"workerId": "ok", "hitId": "a" * 65})


def test_a_switched_off_link_refuses_newcomers_but_lets_people_back_in():
    study, link = crowd_study()
    known = crowd.arrive(link=link, ids=ids("known"))
    link = crowd.configure_link(study=study, changes={"enabled": False})
    with pytest.raises(crowd.LinkUnusable, match="switched off"):
        crowd.arrive(link=link, ids=ids("new"))
    assert crowd.arrive(link=link, ids=ids("known")).pk == known.pk


def test_the_participant_cap_admits_that_many_people():
    study, link = crowd_study(max_participants=2)
    crowd.arrive(link=link, ids=ids("a"))
    crowd.arrive(link=link, ids=ids("b"))
    with pytest.raises(crowd.LinkUnusable, match="all the participants it needs"):
        crowd.arrive(link=link, ids=ids("c"))
    assert Participant.objects.filter(study=study).count() == 2
    assert crowd.arrive(link=link, ids=ids("a")).panel_id == "a"  # a returning one still gets in


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"qualification_items": ["i-00"]}, "without a gold label cannot score anyone: i-00"),
        ({"attention_items": ["nope"]}, "no such item"),
        ({"qualification_items": ["g-0"], "qualification_pass": 2}, "only 1 qualification item"),
        ({"attention_every": 2, "attention_items": []}, "name the attention_items"),
        ({"redirect_url": "javascript:alert(1)"}, "an http(s) address"),
        ({"pid_param": "bad name"}, "pid_param: a URL parameter name"),
        ({"code_completed": "a b"}, "code_completed: letters, digits"),
        ({"items_per_participant": 0}, "must be at least 1"),
        ({"code_completed": "", "redirect_url": ""}, "needs a completion code or a redirect URL"),
        ({"colour": "red"}, "unknown setting(s): colour"),
        ({"attention_items": [f"x-{n}" for n in range(1001)]}, "attention_items: at most 1,000 items (got 1,001)"),
    ],
)
def test_bad_link_settings_are_refused_naming_the_problem_and_nothing_changes(changes, message):
    study, link = crowd_study()
    with pytest.raises(ServiceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        crowd.configure_link(study=study, changes=changes)
    link.refresh_from_db()
    assert link.code_completed == "DONE123" and link.qualification_items == [] and link.items_per_participant == 3


def test_rotating_makes_the_old_link_stop_working():
    study, link = crowd_study()
    old = link.token
    new = crowd.rotate_link(study=study)
    assert new.token != old and crowd.find_link(old) is None and crowd.find_link(new.token) == new


def test_the_quota_ends_the_session_as_completed_with_its_code_and_redirect():
    _study, link = crowd_study(items_per_participant=2)
    participant = working(link, "p1")
    label_one(participant, link)
    assert participant.status == Status.WORKING
    label_one(participant, link)
    assert participant.status == Status.COMPLETED and participant.finished_at is not None
    assert crowd.code_for(participant, link) == "DONE123"
    assert crowd.redirect_for(participant, link) == "https://app.prolific.com/submissions/complete?cc=DONE123"
    assert Assignment.objects.filter(annotator=participant.member.user, status="submitted").count() == 2


def test_a_time_budget_ends_the_session_after_the_item_that_reaches_it():
    """10 items allowed, 2 active minutes budgeted: 50 s + 50 s is under, the third item (150 s) completes."""
    _study, link = crowd_study(items_per_participant=10, budget_minutes=2)
    participant = working(link, "p-budget")
    label_one(participant, link, active_ms=50_000)
    label_one(participant, link, active_ms=50_000)
    assert participant.status == Status.WORKING and crowd.active_minutes(participant) == pytest.approx(100 / 60)
    label_one(participant, link, active_ms=50_000)
    assert participant.status == Status.COMPLETED
    assert crowd.code_for(participant, link) == "DONE123"
    assert label_one(participant, link) is None or participant.status == Status.COMPLETED


def test_a_time_budget_must_be_a_positive_number_of_minutes():
    study, _link = crowd_study()
    with pytest.raises(ServiceError, match="budget_minutes"):
        crowd.configure_link(study=study, changes={"budget_minutes": 0})
    assert crowd.configure_link(study=study, changes={"budget_minutes": ""}).budget_minutes is None


def test_failing_the_qualification_screens_out_and_frees_nothing_it_did_not_take():
    _study, link = crowd_study(qualification_items=["g-0", "g-1"], qualification_pass=2)
    participant = working(link, "q1")
    assert participant.status == Status.QUALIFYING
    first = crowd.next_check(participant, link)
    assert first is not None and first.external_id == "g-0"
    crowd.answer_check(participant=participant, link=link, item=first, answer=SubmittedAnswer(label="supported"))
    second = crowd.next_check(participant, link)
    assert second is not None and second.external_id == "g-1"
    crowd.answer_check(participant=participant, link=link, item=second, answer=SubmittedAnswer(label="contradicted"))
    participant.refresh_from_db()
    assert participant.status == Status.SCREENED_OUT and crowd.code_for(participant, link) == "SCREEN9"
    assert list(ParticipantCheck.objects.values_list("kind", "correct")) == [
        ("qualification", True),
        ("qualification", False),
    ]
    assert not Assignment.objects.filter(annotator=participant.member.user).exists()


def test_passing_the_qualification_starts_the_items():
    _study, link = crowd_study(qualification_items=["g-0"], qualification_pass=1)
    participant = working(link, "q2")
    item = crowd.next_check(participant, link)
    crowd.answer_check(participant=participant, link=link, item=item, answer=SubmittedAnswer(label="supported"))
    participant.refresh_from_db()
    assert participant.status == Status.WORKING and crowd.next_check(participant, link) is None
    assert label_one(participant, link) is not None


def test_a_check_item_is_never_served_as_a_regular_item_nor_a_regular_item_as_a_check():
    """Issue 29, finding 2: a check item is never handed out as an item, to the participant who answered
    it as a check or to anyone else; an item someone had as an item is no check for them later."""
    study, link = crowd_study(items=0, gold=3, n=2, items_per_participant=3, qualification_items=["g-0"])
    participant = working(link, "twice")
    g0 = crowd.next_check(participant, link)
    crowd.answer_check(participant=participant, link=link, item=g0, answer=SubmittedAnswer(label="supported"))
    participant.refresh_from_db()
    served = []
    while (assignment := crowd.claim_for(participant)) is not None:
        served.append(assignment.item.external_id)
        submit(
            user=participant.member.user,
            study=study,
            assignment_id=assignment.pk,
            answer=SubmittedAnswer(label="supported"),
        )
    assert sorted(served) == ["g-1", "g-2"]
    other = working(link, "someone-else")
    assert crowd.claim_for(other).item.external_id in {"g-1", "g-2"}  # the qualification item is not in the pool
    assert not Assignment.objects.filter(item=g0).exists()  # never handed out, so never given back either
    g0.refresh_from_db()
    assert (g0.slots_taken, g0.is_check) == (0, True)
    link = crowd.configure_link(study=study, changes={"attention_items": ["g-1", "g-2"], "attention_every": 1})
    participant.refresh_from_db()
    assert crowd.next_check(participant, link) is None  # both were regular items for this person


def test_attention_checks_are_interleaved_and_failing_k_screens_out_keeping_the_labels():
    study, link = crowd_study(
        items=8,
        items_per_participant=6,
        attention_items=["g-0", "g-1", "g-2"],
        attention_every=2,
        attention_fail_limit=2,
    )
    gold_only_as_checks(study)
    participant = working(link, "a1")
    assert crowd.next_check(participant, link) is None
    label_one(participant, link)
    assert crowd.next_check(participant, link) is None
    label_one(participant, link)
    check = crowd.next_check(participant, link)
    assert check is not None and check.external_id == "g-0"
    crowd.answer_check(participant=participant, link=link, item=check, answer=SubmittedAnswer(label="contradicted"))
    assert participant.status == Status.WORKING and crowd.next_check(participant, link) is None
    label_one(participant, link)
    label_one(participant, link)
    check = crowd.next_check(participant, link)
    assert check is not None and check.external_id == "g-1"
    held = claim_next(user=participant.member.user, study=study)  # an item in hand when screened out
    crowd.answer_check(participant=participant, link=link, item=check, answer=SubmittedAnswer(label="inconclusive"))
    participant.refresh_from_db()
    assert participant.status == Status.SCREENED_OUT and participant.checks_failed == 2
    held.refresh_from_db()
    assert held.status == "skipped" and held.slot is None  # its slot went back at once
    assert Annotation.objects.filter(assignment__annotator=participant.member.user).count() == 4  # kept


def test_the_report_leaves_out_screened_out_and_withdrawn_participants_and_counts_them(client, researcher):
    from annotation.crowd.selectors import exclusion_counts

    study, link = crowd_study(items=4, items_per_participant=2, n=3, researcher=researcher.username)
    kept, dropped, gone = working(link, "k"), working(link, "d"), working(link, "w")
    for participant in (kept, dropped, gone):
        label_one(participant, link)
    crowd.end(participant=dropped, status=Status.SCREENED_OUT)
    crowd.withdraw(participant=gone)
    frame = label_frame(study, include_gold=True)
    assert set(frame["annotator"]) == {kept.member.pseudonym}
    assert exclusion_counts(study) == {"screened_out": 1, "withdrawn": 1, "labels": 2}
    exported = {row["annotator"] for row in export_rows(study)}
    assert exported == {kept.member.pseudonym, dropped.member.pseudonym}  # withdrawn: gone from the export
    report = build_report(study)
    assert report["n_annotators"] == 1 and report["n_annotations"] == 1
    # the adjudication queue still counts every answer: the database counts it, not the report's labels
    from annotation.adjudication.selectors import queue_item_ids
    from metaeval.reporting.adjudication_queue import queue_size_with

    assert report["adjudication"]["queue"] == len(queue_item_ids(study))
    from annotation.adjudication.services import set_adjudication_settings

    set_adjudication_settings(study=study, user=None, rule="audit", audit_share=1.0)
    study.refresh_from_db()
    every_labelled_item = len(queue_item_ids(study))
    assert every_labelled_item > 0
    # the frame lacks the left-out participants' labels: trusted, it would count 0 items here
    assert queue_size_with(study, frame.iloc[:0], include_screened_out=False) == every_labelled_item
    assert report["participants_rule"] == (
        "crowd participants who were screened out (1) or withdrew (1) are left out of every number here, "
        "with their 2 label(s)"
    )
    client.force_login(researcher)
    page = client.get(reverse("metaeval:report", args=[study.slug]))
    assert b"Crowd participants who were screened out (1) or withdrew (1)" in page.content
    included = build_report(study, ReportOptions(include_screened_out=True))
    assert included["n_annotators"] == 2 and included["options"]["include_screened_out"] is True
    assert "screened out (1) are included" in included["participants_rule"]
    api = client.get(f"/api/studies/{study.slug}/report?include_screened_out=true")
    assert api.status_code == 200 and streamed_json(api)["n_annotations"] == 2
    for flags, n_annotations in (([], 1), (["--include-screened-out"], 2)):
        out = io.StringIO()
        call_command("report", study.slug, "--format", "json", *flags, stdout=out)
        assert json.loads(out.getvalue())["n_annotations"] == n_annotations


def test_the_time_limit_times_out_and_frees_the_held_item():
    study, link = crowd_study(time_limit_minutes=30)
    participant = working(link, "t1")
    held = claim_next(user=participant.member.user, study=study)
    later = timezone.now() + timedelta(minutes=31)
    assert crowd.time_is_up(participant, link, later) and not crowd.time_is_up(participant, link, timezone.now())
    crowd.end(participant=participant, status=Status.TIMED_OUT, now=later)
    participant.refresh_from_db()
    held.refresh_from_db()
    assert participant.status == Status.TIMED_OUT and crowd.code_for(participant, link) == "TIME77"
    assert held.status == "skipped" and held.slot is None
    crowd.end(participant=participant, status=Status.COMPLETED)  # an end is final
    participant.refresh_from_db()
    assert participant.status == Status.TIMED_OUT


def test_participants_away_past_the_time_limit_are_closed_as_timed_out():
    study, link = crowd_study(time_limit_minutes=30)
    away, back = working(link, "away"), working(link, "back")
    label_one(away, link)
    later = timezone.now() + timedelta(minutes=31)
    Participant.objects.filter(pk=back.pk).update(created_at=later - timedelta(minutes=5))
    assert crowd.close_overdue(study=study, link=link, now=later) == 1
    away.refresh_from_db()
    back.refresh_from_db()
    assert away.status == Status.TIMED_OUT and away.finished_at == away.created_at + timedelta(minutes=30)
    assert back.status == Status.WORKING
    assert crowd.close_overdue(study=study, link=link, now=later) == 0


def test_payment_rows_sum_active_time_and_pay_at_the_rate():
    from annotation.crowd.selectors import payment_rows, payment_summary

    study, link = crowd_study(items_per_participant=2, pay_per_hour="12.00")
    participant = working(link, "pay1")
    label_one(participant, link, active_ms=90_000)
    label_one(participant, link, active_ms=30_000)
    rows = payment_rows(study, link)
    assert len(rows) == 1
    row = rows[0]
    assert (row.panel_id, row.status, row.items_done, row.active_minutes, str(row.pay), row.code) == (
        "pay1",
        "completed",
        2,
        2.0,
        "0.40",
        "DONE123",
    )
    summary = payment_summary(study, link, rows)
    assert summary.median_active_minutes_per_item == 1.0 and str(summary.cost_so_far) == "0.40"
    assert str(summary.projected_total_cost) == "4.00"  # 10 items x N=2 labels at 0.20 each


# --- pages -----------------------------------------------------------------------------


def test_a_participant_goes_through_consent_instructions_items_and_back_to_the_panel(client):
    study, link = crowd_study(items_per_participant=2, consent="You agree to **label** texts.")
    response = client.get(arrival_url(link, "5f00aa"))
    step = reverse("annotation:participant_step", args=[study.slug])
    assert response.status_code == 302 and response["Location"] == step
    page = client.get(step)
    assert page.status_code == 200 and b"<strong>label</strong>" in page.content and b"consent-agree" in page.content
    refused = client.post(step, {"action": "consent"})
    assert refused.status_code == 400 and b"Tick the box" in refused.content
    client.post(step, {"action": "consent", "agree": "yes"})
    assert b"instructions-start" in client.get(step).content
    client.post(step, {"action": "start"})
    for _ in range(2):
        page = client.get(step)
        assert page.status_code == 200 and b'name="label"' in page.content
        assignment = page.context["assignment"]
        response = client.post(
            step, {"action": "answer", "assignment": assignment.pk, "label": "supported", "active_ms": "5000"}
        )
        assert response.status_code == 302
    end = client.get(step)
    assert b"DONE123" in end.content and b"https://app.prolific.com/submissions/complete?cc=DONE123" in end.content
    participant = Participant.objects.get(panel_id="5f00aa")
    assert participant.status == "completed"


def test_returning_with_the_same_id_resumes_and_another_id_is_another_participant(client):
    study, link = crowd_study()
    step = step_url(study)
    at_items(client, link, "one")
    held = client.get(step).context["assignment"]
    client.get(arrival_url(link, "two"))  # same browser, another panel ID
    assert b"consent-agree" in client.get(step).content
    assert Participant.objects.count() == 2
    client.get(arrival_url(link, "one"))  # back as the first person: the same item
    assert client.get(step).context["assignment"].pk == held.pk


@pytest.mark.parametrize(
    ("pid", "status", "text"),
    [(None, 400, b"the link has no PROLIFIC_PID"), ("bad id!", 400, b"PROLIFIC_PID is not a valid ID")],
)
def test_a_missing_or_malformed_id_gets_a_clear_page(client, pid, status, text):
    _, link = crowd_study()
    response = client.get(arrival_url(link, pid))
    assert response.status_code == status and text in response.content
    assert not Participant.objects.exists()


def test_a_switched_off_or_unknown_link_says_so(client):
    study, link = crowd_study()
    crowd.configure_link(study=study, changes={"enabled": False})
    response = client.get(arrival_url(link, "abc"))
    assert response.status_code == 410 and b"switched off" in response.content
    response = client.get("/p/not-a-token/?PROLIFIC_PID=abc")
    assert response.status_code == 404 and b"not valid" in response.content
    response = client.get(reverse("annotation:participant_step", args=[study.slug]))
    assert response.status_code == 404 and b"open the study link again" in response.content


def test_a_participant_sees_no_researcher_page_and_no_api(client):
    study, link = crowd_study()
    client.get(arrival_url(link, "nosy"))
    for url in (
        reverse("annotation:study_detail", args=[study.slug]),
        reverse("annotation:study_participants", args=[study.slug]),
        reverse("annotation:participant_payments_csv", args=[study.slug]),
        reverse("annotation:annotate", args=[study.slug]),
    ):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url
    assert client.get(f"/api/studies/{study.slug}/").status_code in (401, 403)
    assert client.get("/api/studies/").status_code in (401, 403)


def test_the_researcher_page_shows_the_link_and_the_payment_table_and_saves_settings(client, researcher):
    study, link = crowd_study(researcher=researcher.username, items_per_participant=1)
    participant = working(link, "PAYME1")
    label_one(participant, link, active_ms=120_000)
    client.force_login(researcher)
    url = reverse("annotation:study_participants", args=[study.slug])
    page = client.get(url)
    assert page.status_code == 200
    assert f"/p/{link.token}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}".encode() in page.content
    assert (
        b"PAYME1" in page.content and b"2.0" in page.content and b"1 participant \xc2\xb7 1 completed" in page.content
    )
    data = {
        **page.context["form"].initial,
        "items_per_participant": 7,
        "max_participants": "",
        "budget_minutes": "",
        "pay_per_hour": "9",
    }
    assert client.post(url, data).status_code == 302
    link.refresh_from_db()
    assert link.items_per_participant == 7 and str(link.pay_per_hour) == "9.00"
    bad = client.post(url, {**data, "currency": "XYZ"})  # check items: the picker (test_crowd_settings.py)
    assert bad.status_code == 400 and b"not an ISO 4217 code" in bad.content
    rows = list(csv.DictReader(io.StringIO(client.get(url + "payments.csv").content.decode())))
    assert rows[0]["panel_id"] == "PAYME1" and rows[0]["active_minutes"] == "2.0" and rows[0]["status"] == "completed"
    mapping = list(csv.DictReader(io.StringIO(client.get(url + "mapping.csv").content.decode())))
    assert mapping == [
        {
            "pseudonym": participant.member.pseudonym,
            "panel_id": "PAYME1",
            "panel_study_id": "S1",
            "panel_session_id": "X1",
            "status": "completed",
        }
    ]
    api = client.get(f"/api/studies/{study.slug}/participants").json()
    assert api["participants"][0]["panel_id"] == "PAYME1" and api["participants"][0]["active_minutes"] == 2.0
    assert api["summary"]["participants"] == 1 and api["summary"]["by_status"] == {"completed": 1}
    old = link.token
    client.post(url + "rotate/")
    link.refresh_from_db()
    assert link.token != old
    client.post(reverse("annotation:participant_withdraw", args=[study.slug, participant.pk]))
    participant.refresh_from_db()
    assert participant.status == "withdrawn" and participant.withdrawn_at is not None


def test_annotators_and_outsiders_do_not_get_the_participants_pages(client, annotator, make_user):
    study, _link = crowd_study()
    from annotation.members.services import add_members

    add_members(study=study, usernames=[annotator.username], role="annotator")
    for user in (annotator, make_user("outsider")):
        client.force_login(user)
        url = reverse("annotation:study_participants", args=[study.slug])
        assert client.get(url).status_code == 404
        assert client.get(url + "mapping.csv").status_code == 404


def test_the_admin_lists_links_participants_and_checks(client, make_user):
    _study, link = crowd_study(qualification_items=["g-0"], qualification_pass=1)
    participant = working(link, "ADM1")
    crowd.answer_check(
        participant=participant,
        link=link,
        item=crowd.next_check(participant, link),
        answer=SubmittedAnswer(label="supported"),
    )
    client.force_login(make_user("staff", is_staff=True, is_superuser=True))
    for model in ("participantlink", "participant", "participantcheck"):
        response = client.get(reverse(f"admin:annotation_{model}_changelist"), {"q": "ADM1"})
        assert response.status_code == 200, model
    page = client.get(reverse("admin:annotation_participant_changelist"), {"q": "ADM1"})
    assert b"ADM1" in page.content


def test_a_participant_can_withdraw_and_one_past_the_time_limit_gets_the_timed_out_code(client):
    study, link = crowd_study(time_limit_minutes=20)
    step = step_url(study)
    at_items(client, link, "leaver")
    held = client.get(step).context["assignment"]
    client.post(step, {"action": "withdraw"})
    page = client.get(step)
    assert b"You have withdrawn" in page.content and b"end-code" not in page.content
    held.refresh_from_db()
    assert held.status == "skipped" and Participant.objects.get(panel_id="leaver").withdrawn_at is not None

    client.get(arrival_url(link, "slow"))
    Participant.objects.filter(panel_id="slow").update(created_at=timezone.now() - timedelta(minutes=21))
    page = client.get(step)
    assert b"Time is up" in page.content and b"TIME77" in page.content and b"cc=TIME77" in page.content
    assert client.post(step, {"action": "start"}).status_code == 200  # an ended session takes no more steps
    assert Participant.objects.get(panel_id="slow").status == "timed_out"


def test_a_preference_study_works_through_the_link_too(client):
    from annotation.studies.services import create_study
    from annotation.transfer.services.item_import import import_items
    from tests.conftest import jsonl, preference_item

    study = create_study(slug="crowd-pref", name="Crowd pref", kind="preference", annotators_per_item=2)
    import_items(study=study, stream=jsonl(*(preference_item(f"p-{k}") for k in range(3))), fmt="jsonl")
    link = crowd.configure_link(
        study=study, changes={"enabled": True, "code_completed": "PREF1", "items_per_participant": 1}
    )
    step = step_url(study)
    at_items(client, link, "prefer")
    page = client.get(step)
    assert page.status_code == 200 and b'name="choice"' in page.content
    assignment = page.context["assignment"]
    client.post(step, {"action": "answer", "assignment": assignment.pk, "choice": "left_strong"})
    annotation = Annotation.objects.get(assignment=assignment)
    assert annotation.preferred_system == assignment.left_system and annotation.strength == "strong"
    assert b"PREF1" in client.get(step).content


def test_a_returning_participant_of_a_closed_study_is_told_why_there_is_no_item(client):
    from annotation.studies.services import set_study_status

    study, link = crowd_study()
    step = step_url(study)
    at_items(client, link, "late")
    set_study_status(study=study, status="closed")
    client.get(arrival_url(link, "late"))  # a returning one gets in; a newcomer would not
    page = client.get(step)
    assert page.status_code == 503 and b"annotation has ended" in page.content
    assert client.get(arrival_url(link, "newcomer")).status_code == 410


def test_an_answer_sent_after_the_session_ended_is_said_not_dropped(client):
    """Without JavaScript a page loaded before the time ran out still posts its answer: the end page says
    it was not saved (and why), instead of showing the end as if nothing had been sent."""
    study, link = crowd_study(time_limit_minutes=20)
    step = step_url(study)
    at_items(client, link, "late")
    shown = client.get(step).context["assignment"]
    Participant.objects.filter(panel_id="late").update(created_at=timezone.now() - timedelta(minutes=21))
    page = client.post(step, {"action": "answer", "assignment": shown.pk, "label": "supported"})
    assert page.status_code == 200 and b"Time is up" in page.content
    assert b"Your last answer was not saved: your time for this study ran out." in page.content
    assert not Annotation.objects.filter(assignment=shown).exists()
    assert b"not saved" not in client.get(step).content  # said once, for the answer it concerns
