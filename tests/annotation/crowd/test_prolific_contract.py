"""Prolific from Claimlab (issue 34), as contract tests against a local fake that follows Prolific's documented
request and response shapes (tests/support/fake_prolific.py) and checks each request it receives: listing a
study's submissions matched to Claimlab's participants, approving, rejecting with Prolific's reasons, bonuses
with a preview and a confirmation, Prolific's errors, server errors, answers that are not JSON, timeouts,
network failures and retries. Never the real service.
"""

from __future__ import annotations

import json
import socket
from decimal import Decimal

import pytest
from django.test import override_settings

from annotation.crowd import prolific_client
from annotation.crowd.prolific_client import ProlificClient, ProlificError
from annotation.crowd.prolific_selectors import bonus_states
from annotation.crowd.prolific_services import (
    NotConnected,
    StaleConfirmation,
    bonus_preview,
    check_connection,
    check_rule,
    client_for,
    connect,
    disconnect,
    fetch_submissions,
    pay_bonuses,
    review,
)
from annotation.crowd.selectors import payment_rows
from annotation.errors import ServiceError
from annotation.models import ParticipantLink, ProlificCall
from tests.annotation.crowd.prolific_support import TOKEN, A, B, C, D, E, F, G, fake_prolific, label, scene
from tests.annotation.crowd_support import crowd_study

pytestmark = pytest.mark.django_db

REASON = (
    "Thank you for taking part. Your answers to the attention checks did not match the instructions twice, "
    "so this submission cannot be approved."
)


def token_nowhere() -> None:
    """The token is in no log row (request, answer, error) and in no stored field in clear."""
    for call in ProlificCall.objects.all():
        stored = json.dumps([call.path, call.request_body, call.response_body, call.error])
        assert TOKEN not in stored, call
    for link in ParticipantLink.objects.all():
        assert TOKEN not in link.prolific_token_encrypted


# --- connecting --------------------------------------------------------------------------------


def test_connecting_tests_the_token_and_stores_it_encrypted(fake, researcher):
    study, _link = crowd_study("connect", researcher=researcher.username)
    prolific = fake.add_study("Fact checking, wave 2")
    check = connect(study=study, user=researcher, study_id=prolific.id, token=TOKEN)
    assert (check.study_id, check.name, check.status) == (prolific.id, "Fact checking, wave 2", "ACTIVE")
    link = ParticipantLink.objects.get(study=study)
    assert link.prolific_study_id == prolific.id and link.prolific_token_encrypted
    client, _ = client_for(study, researcher)
    assert client.token == TOKEN  # decrypts to what was given
    seen = fake.calls("GET", f"/api/v1/studies/{prolific.id}/")
    assert len(seen) == 1 and seen[0].headers["authorization"] == f"Token {TOKEN}"
    assert check_connection(study=study, user=researcher).name == "Fact checking, wave 2"
    call = ProlificCall.objects.filter(study=study).first()
    assert (call.method, call.status_code, call.made_by) == ("GET", 200, researcher)
    disconnect(study=study)
    link.refresh_from_db()
    assert (link.prolific_study_id, link.prolific_token_encrypted) == ("", "")
    with pytest.raises(NotConnected):
        fetch_submissions(study=study, user=researcher)
    assert fake.problems == []
    token_nowhere()


def test_a_token_prolific_refuses_is_not_stored(fake, researcher):
    study, _link = crowd_study("refused", researcher=researcher.username)
    prolific = fake.add_study()
    with pytest.raises(ProlificError, match=r"refused the API token \(401\)") as refused:
        connect(study=study, user=researcher, study_id=prolific.id, token="Wrong_" + TOKEN[6:])
    assert refused.value.status_code == 401
    link = ParticipantLink.objects.get(study=study)
    assert (link.prolific_study_id, link.prolific_token_encrypted) == ("", "")
    with pytest.raises(ServiceError, match="study id is missing or malformed"):
        connect(study=study, user=researcher, study_id="../users/me", token=TOKEN)
    with pytest.raises(ServiceError, match="token is missing or malformed"):
        connect(study=study, user=researcher, study_id=prolific.id, token="two words")
    assert len(fake.seen) == 1  # the malformed ones never left Claimlab
    assert fake.problems == []


# --- listing -------------------------------------------------------------------------------------


def test_submissions_are_matched_to_participants_with_their_record_and_a_suggestion(fake, researcher):
    s = scene(fake, researcher)
    table = fetch_submissions(study=s.study, user=researcher)
    rows = {row.panel_id: row for row in table.rows}
    assert set(rows) == {A, B, C, D, E, F, G}
    suggested = {pid: (row.suggestion.action, row.suggestion.category) for pid, row in rows.items()}
    assert suggested == {
        A: ("approve", ""),
        B: ("reject", "FAILED_CHECK"),
        C: ("review", ""),  # a qualification screen-out: Prolific does not allow rejecting it
        D: ("review", ""),
        E: ("wait", ""),
        F: ("review", ""),
        G: ("none", ""),
    }
    assert rows[F].participant is None and rows[F].outcome_label == "No Claimlab participant"
    assert (rows[B].outcome, rows[B].attention_failed, rows[B].payment.checks_failed) == ("screened_out", 2, 2)
    payments = {row.panel_id: row for row in payment_rows(s.study, s.link)}
    for pid in (A, D, G):  # the payment table's own numbers
        assert rows[pid].payment.active_minutes == payments[pid].active_minutes
    assert rows[A].payment.pay == Decimal("1.20") and rows[D].payment.pay == Decimal("0.40")
    assert rows[A].submission_id == fake.submission(A)["id"] and rows[A].prolific_status == "AWAITING REVIEW"
    assert table.awaiting_review == 5 and table.unmatched == []
    listed = fake.calls("GET", "/submissions/")
    assert [seen.path for seen in listed] == [f"/api/v1/studies/{s.prolific.id}/submissions/"]
    assert fake.problems == []


def test_a_paged_list_is_followed_on_the_same_host(researcher):
    with fake_prolific(page_size=3) as fake:
        s = scene(fake, researcher)
        rows = fetch_submissions(study=s.study, user=researcher).rows
        assert sorted(row.panel_id for row in rows) == sorted([A, B, C, D, E, F, G])
        assert [seen.query for seen in fake.calls("GET", "/submissions/")] == ["", "page=2", "page=3"]
        assert fake.problems == []


# --- approving and rejecting ----------------------------------------------------------------------


def test_approving_sends_the_documented_transition(fake, researcher):
    s = scene(fake, researcher)
    submission = fake.submission(A)
    result = review(study=s.study, user=researcher, action="approve", submission_ids=[submission["id"]])
    assert result.done == [(submission["id"], "APPROVED")] and result.failed == []
    assert fake.submission(A)["status"] == "APPROVED"
    (sent,) = fake.calls("POST", "/transition/")
    assert sent.path == f"/api/v1/submissions/{submission['id']}/transition/"
    assert sent.body == {"action": "APPROVE"} and sent.headers["content-type"] == "application/json"
    call = ProlificCall.objects.get(study=s.study, path=sent.path)
    assert (call.request_body, call.status_code, call.response_body["status"]) == (
        {"action": "APPROVE"},
        200,
        "APPROVED",
    )
    assert fake.problems == []
    token_nowhere()


def test_rejecting_sends_the_category_and_message_prolific_requires(fake, researcher):
    s = scene(fake, researcher)
    ids = [fake.submission(B)["id"]]
    result = review(
        study=s.study, user=researcher, action="reject", submission_ids=ids, category="FAILED_CHECK", message=REASON
    )
    assert result.done == [(ids[0], "REJECTED")]
    (sent,) = fake.calls("POST", "/transition/")
    assert sent.body == {"action": "REJECT", "message": REASON, "rejection_category": "FAILED_CHECK"}
    assert fake.problems == []


def test_a_rejection_prolific_would_refuse_is_refused_before_anything_is_sent(fake, researcher):
    s = scene(fake, researcher)
    ids = [fake.submission(B)["id"]]
    with pytest.raises(ServiceError, match="at least 100 characters") as short:
        review(
            study=s.study, user=researcher, action="reject", submission_ids=ids, category="FAILED_CHECK", message="Bad."
        )
    assert "this one has 4" in str(short.value)
    with pytest.raises(ServiceError, match="rejection categories"):
        review(study=s.study, user=researcher, action="reject", submission_ids=ids, category="RUDE", message=REASON)
    with pytest.raises(ServiceError, match="awaiting review"):  # G is approved already
        review(
            study=s.study,
            user=researcher,
            action="reject",
            submission_ids=[fake.submission(G)["id"]],
            category="OTHER",
            message=REASON,
        )
    with pytest.raises(ServiceError, match="not submissions of the Prolific study"):
        review(study=s.study, user=researcher, action="approve", submission_ids=["0" * 24])
    with pytest.raises(ServiceError, match="not Prolific submission ids"):
        review(study=s.study, user=researcher, action="approve", submission_ids=["../../studies"])
    assert fake.calls("POST") == [] and fake.submission(B)["status"] == "AWAITING REVIEW"
    assert fake.problems == []


def test_approving_many_goes_on_past_a_refusal_and_names_it(fake, researcher):
    s = scene(fake, researcher)
    ids = [fake.submission(pid)["id"] for pid in (A, C, D)]
    fake.fail("400", path=f"/submissions/{ids[1]}/transition/")
    result = review(study=s.study, user=researcher, action="approve", submission_ids=ids)
    assert [done for done, _ in result.done] == [ids[0], ids[2]] and result.not_sent == []
    ((failed, why),) = result.failed
    assert failed == ids[1] and "Prolific refused POST" in why and "(400): study: Injected refusal" in why
    call = ProlificCall.objects.get(path=f"/api/v1/submissions/{ids[1]}/transition/")
    assert call.status_code == 400 and call.response_body["error"]["error_code"] == 140100
    assert call.error == why
    assert fake.problems == []


def test_a_server_error_stops_a_batch_after_its_retries(fake, researcher):
    s = scene(fake, researcher)
    ids = [fake.submission(pid)["id"] for pid in (A, C)]
    fake.fail("500", path="/transition/", times=3)
    result = review(study=s.study, user=researcher, action="approve", submission_ids=ids)
    assert result.done == [] and result.not_sent == [ids[1]]
    assert "server error (500)" in result.failed[0][1]
    tries = ProlificCall.objects.filter(path__endswith=f"{ids[0]}/transition/").order_by("id")
    assert [call.status_code for call in tries] == [500, 500, 500]  # one try and two retries, each logged
    assert tries[0].response_body == {"text": "<h1>Server Error (500)</h1>"}
    assert fake.submission(C)["status"] == "AWAITING REVIEW"


# --- errors, retries, timeouts ------------------------------------------------------------------------


def test_a_passing_server_error_or_throttle_is_retried(fake, researcher):
    s = scene(fake, researcher)
    fake.fail("500", path="/submissions/")
    fake.fail("429", path="/submissions/")
    rows = fetch_submissions(study=s.study, user=researcher).rows
    assert len(rows) == 7
    calls = ProlificCall.objects.filter(path__endswith="/submissions/", method="GET").order_by("id")
    assert [call.status_code for call in calls] == [500, 429, 200]
    assert "slow down (429)" in calls[1].error and calls[2].error == ""
    assert fake.problems == []


def test_an_answer_that_is_not_json_is_a_clear_error(fake, researcher):
    s = scene(fake, researcher)
    fake.fail("not-json", path="/submissions/")
    with pytest.raises(ProlificError, match=r"answered 200 to GET .* but not with JSON") as caught:
        fetch_submissions(study=s.study, user=researcher)
    assert caught.value.kind == "not_json"
    call = ProlificCall.objects.filter(path__endswith="/submissions/").latest("id")
    assert call.status_code == 200 and call.response_body == {"text": "<html><body>Down for maintenance</body></html>"}
    assert ProlificCall.objects.filter(path__endswith="/submissions/").count() == 1  # not repeated


def test_prolific_s_error_shape_is_read(fake, researcher):
    s = scene(fake, researcher)
    fake.fail("400", path="/submissions/")
    with pytest.raises(ProlificError) as caught:
        fetch_submissions(study=s.study, user=researcher)
    assert str(caught.value) == (
        f"Prolific refused GET /api/v1/studies/{s.prolific.id}/submissions/ (400): study: Injected refusal for the test."
    )
    assert caught.value.status_code == 400 and caught.value.kind == "refused"


def test_a_timeout_is_an_error_after_its_retries(researcher):
    with fake_prolific(slow_seconds=1.5) as fake, override_settings(PROLIFIC_API_TIMEOUT_SECONDS=0.25):
        s = scene(fake, researcher)
        fake.fail("slow", path="/submissions/", times=3)
        with pytest.raises(ProlificError, match=r"did not answer GET .* within 0.25 s") as caught:
            fetch_submissions(study=s.study, user=researcher)
        assert caught.value.kind == "timeout" and not caught.value.answered
        calls = ProlificCall.objects.filter(path__endswith="/submissions/").order_by("id")
        assert [(call.status_code, bool(call.error)) for call in calls] == [(None, True)] * 3


def test_a_network_failure_is_an_error(researcher):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    study, _link = crowd_study("offline", researcher=researcher.username)
    client = ProlificClient(token=TOKEN, study=study, made_by=researcher, base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(ProlificError, match="could not be reached") as caught:
        client.study_submissions("a" * 24)
    assert caught.value.kind == "network" and not caught.value.answered
    assert TOKEN not in str(caught.value)
    assert ProlificCall.objects.filter(study=study).count() == 3  # a read: tried again twice
    with pytest.raises(ProlificError, match="could not be reached"):
        client.get_study("a" * 24)
    assert ProlificCall.objects.filter(study=study).count() == 4  # the connection test: answered at once
    assert all(call.status_code is None and call.error for call in ProlificCall.objects.filter(study=study))


def test_the_token_never_reaches_a_log_row_or_a_message(fake, researcher):
    s = scene(fake, researcher)
    fake.fail("echo-token", path="/transition/")
    result = review(study=s.study, user=researcher, action="approve", submission_ids=[fake.submission(A)["id"]])
    ((_, why),) = result.failed
    assert "Bad header: Token [token]" in why and TOKEN not in why
    call = ProlificCall.objects.get(path__endswith="/transition/")
    assert "[token]" in json.dumps(call.response_body)
    token_nowhere()


# --- bonuses ------------------------------------------------------------------------------------------


def test_bonuses_are_previewed_confirmed_and_paid_once(fake, researcher):
    s = scene(fake, researcher)
    rule = check_rule("pay", "0.50")  # Prolific already pays a reward of 0.50; the rest of the pay is a bonus
    preview = bonus_preview(study=s.study, user=researcher, rule=rule)
    assert [(line.panel_id, line.amount) for line in preview.lines] == [(A, Decimal("0.70")), (G, Decimal("0.50"))]
    assert (preview.count, preview.total, preview.currency) == (2, Decimal("1.20"), "GBP")
    left_out = dict(preview.left_out)
    assert left_out[B] == "nothing owed beyond the reward" and left_out[E] == "submission active on Prolific"
    assert F not in left_out  # not a Claimlab participant: never in a bonus
    assert fake.calls("POST") == []  # a preview sends nothing

    payment = pay_bonuses(study=s.study, user=researcher, rule=rule, confirmation=preview.confirmation)
    assert payment.paid and payment.preview.total == Decimal("1.20")
    assert fake.paid_lines() == [f"{A},0.70", f"{G},0.50"]
    (set_up,) = fake.calls("POST", "/bonus-payments/")
    assert set_up.path == "/api/v1/submissions/bonus-payments/"
    assert set_up.body == {"study_id": s.prolific.id, "csv_bonuses": f"{A},0.70\n{G},0.50\n"}
    (paid,) = fake.calls("POST", "/pay/")
    assert paid.path == f"/api/v1/bulk-bonus-payments/{payment.bulk_id}/pay/" and paid.body is None
    assert payment.set_up["total_amount"] == pytest.approx(1.60) and payment.note.startswith("Successfully")
    assert {pid: state.state for pid, state in bonus_states(s.study).items()} == {A: "paid", G: "paid"}

    # The same confirmation again (a double click, a second tab): the set is no longer that set.
    with pytest.raises(StaleConfirmation, match="changed since the preview"):
        pay_bonuses(study=s.study, user=researcher, rule=rule, confirmation=preview.confirmation)
    again = bonus_preview(study=s.study, user=researcher, rule=rule)
    assert again.lines == [] and dict(again.left_out)[A] == "bonus already paid: 0.70 GBP"
    assert sum(fake.pays.values()) == 1 and fake.problems == []
    token_nowhere()


def test_a_changed_set_cannot_be_paid_by_a_stale_confirmation(fake, researcher):
    s = scene(fake, researcher)
    rule = check_rule("pay", "0")
    preview = bonus_preview(study=s.study, user=researcher, rule=rule)
    assert (preview.count, preview.total) == (3, Decimal("2.60"))  # A 1.20, D 0.40, G 1.00
    label(s.study.participants.get(panel_id=A), 60_000)  # one more minute of A's: their pay, so the set, changes
    with pytest.raises(StaleConfirmation, match=r"now 3 participant\(s\), 2.80 GBP"):
        pay_bonuses(study=s.study, user=researcher, rule=rule, confirmation=preview.confirmation)
    with pytest.raises(StaleConfirmation):  # another rule with the old code
        pay_bonuses(study=s.study, user=researcher, rule=check_rule("fixed", "1"), confirmation=preview.confirmation)
    assert fake.calls("POST") == [] and fake.pays == {}


def test_a_pay_call_without_an_answer_is_never_repeated(researcher):
    with fake_prolific(slow_seconds=1.5) as fake, override_settings(PROLIFIC_API_TIMEOUT_SECONDS=0.25):
        s = scene(fake, researcher)
        rule = check_rule("fixed", "0.25", [A])
        preview = bonus_preview(study=s.study, user=researcher, rule=rule)
        fake.fail("slow", path="/pay/")
        with pytest.raises(ProlificError, match="Whether the bonuses were paid is not known"):
            pay_bonuses(study=s.study, user=researcher, rule=rule, confirmation=preview.confirmation)
        assert len(fake.calls("POST", "/pay/")) == 1  # paying is not idempotent: never tried again
        assert bonus_states(s.study)[A].state == "unknown"
        with pytest.raises(ServiceError, match=r"cannot get this bonus: .*unknown outcome"):
            bonus_preview(study=s.study, user=researcher, rule=rule)


def test_a_refused_set_up_pays_nothing_and_leaves_the_participant_free(fake, researcher):
    s = scene(fake, researcher)
    rule = check_rule("fixed", "0.25", [A])
    preview = bonus_preview(study=s.study, user=researcher, rule=rule)
    fake.fail("400", path="/bonus-payments/")
    with pytest.raises(ProlificError, match=r"\(400\)"):
        pay_bonuses(study=s.study, user=researcher, rule=rule, confirmation=preview.confirmation)
    assert fake.pays == {} and bonus_states(s.study) == {}
    again = bonus_preview(study=s.study, user=researcher, rule=rule)
    assert again.confirmation == preview.confirmation  # the same set, so the same code
    pay_bonuses(study=s.study, user=researcher, rule=rule, confirmation=again.confirmation)
    assert fake.paid_lines() == [f"{A},0.25"]


def test_bad_bonus_rules_are_refused_with_their_reason(fake, researcher):
    s = scene(fake, researcher)
    with pytest.raises(ServiceError, match="basis"):
        check_rule("hours", "1")
    with pytest.raises(ServiceError, match="between 0 and 500"):
        check_rule("fixed", "30000")
    with pytest.raises(ServiceError, match="not a number"):
        check_rule("fixed", "lots")
    with pytest.raises(ServiceError, match="not Claimlab participants with a submission"):
        bonus_preview(study=s.study, user=researcher, rule=check_rule("fixed", "1", [F]))
    with pytest.raises(ServiceError, match=r"cannot get this bonus: .*rejected on Prolific"):
        fake.submission(B)["status"] = "REJECTED"
        bonus_preview(study=s.study, user=researcher, rule=check_rule("fixed", "1", [B]))


def test_an_answer_past_the_size_limit_is_not_read(fake, researcher, monkeypatch):
    s = scene(fake, researcher)
    monkeypatch.setattr(prolific_client, "MAX_ANSWER_BYTES", 500)  # the 7 submissions take ~2 KB
    with pytest.raises(ProlificError, match=r"is larger than 500 bytes; not read") as caught:
        fetch_submissions(study=s.study, user=researcher)
    assert caught.value.kind == "shape" and caught.value.status_code == 200
    call = ProlificCall.objects.filter(path__endswith="/submissions/").latest("id")
    assert call.status_code == 200 and len(call.response_body["text"]) == 500
