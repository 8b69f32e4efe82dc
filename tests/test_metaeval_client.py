"""The notebook client against the live test server: a token, the labels as a DataFrame, and
``metaeval.stats`` on that frame giving the report's Fleiss kappa (and statsmodels' own).

Outside tests/metaeval: these are `transaction=True` tests (the live server reads what they
commit), and the flush at their end would also empty the demo studies that package loads
once for all its tests."""

from __future__ import annotations

import pytest
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from accounts.services import issue_token
from annotation.models import ExportJob
from annotation.transfer.services.export_runner import run_export_job
from metaeval import client as client_module
from metaeval import stats
from metaeval.client import Claimlab, ClaimlabError
from tests.support.factscore_pref import SCALE, SLUG, demo_items, human_records, make_study, record_label

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lab(live_server, researcher):
    make_study(researcher=researcher)
    return Claimlab(live_server.url, issue_token(user=researcher, name="notebook").key)


def test_the_frame_gives_the_reports_fleiss_kappa(lab):
    labels = lab.labels(SLUG)
    records = human_records(demo_items())
    assert len(labels) == len(records) == 360
    assert sorted(zip(labels["item"], labels["annotator"], labels["label"], strict=True)) == sorted(
        (r["item"], r["annotator"], record_label(r)) for r in records
    )
    table = stats.build_table(labels, lab.study(SLUG)["labels"])
    kappa = stats.fleiss_kappa(table, n_raters=3)
    report = lab.report(SLUG)
    assert kappa.value == pytest.approx(report["agreement"]["fleiss_kappa"]["value"], abs=1e-12)
    by_item: dict[str, list[int]] = {}
    for record in records:
        by_item.setdefault(record["item"], []).append(SCALE.index(record_label(record)))
    counts, _ = aggregate_raters(list(by_item.values()), 5)
    assert kappa.value == pytest.approx(fleiss_kappa(counts), abs=1e-12)
    one = labels.drop_duplicates("item").set_index("item")["reference_label"]
    for item_id, codes in by_item.items():
        top = max(set(codes), key=codes.count)
        expected = SCALE[top] if 2 * codes.count(top) > len(codes) else None
        assert one[item_id] == expected, item_id


def test_a_big_study_comes_through_the_background_export(lab, settings, monkeypatch, tmp_path):
    settings.EXPORT_INLINE_MAX_ROWS = 10
    settings.VAR_DIR = tmp_path / "var"

    def worker_turn(seconds: float) -> None:  # the client waits: let "the worker" run what is queued
        for job in ExportJob.objects.filter(status=ExportJob.Status.QUEUED):
            run_export_job(job_id=job.pk)

    monkeypatch.setattr(client_module.time, "sleep", worker_turn)
    frame = lab.annotations(SLUG)
    assert len(frame) == 360 and {"item", "annotator", "label", "left_system"} <= set(frame.columns)
    assert ExportJob.objects.get().status == ExportJob.Status.SUCCEEDED


def test_errors_name_the_problem(lab, live_server):
    with pytest.raises(ClaimlabError) as missing:
        lab.labels("no-such-study")
    assert missing.value.status == 404
    with pytest.raises(ClaimlabError) as refused:
        Claimlab(live_server.url, "not-a-token").study(SLUG)
    assert refused.value.status == 401 and refused.value.detail
    with pytest.raises(ValueError, match="a token is needed"):
        Claimlab(live_server.url, "")


def test_the_extra_questions_answers_come_back_long_and_feed_the_statistics(live_server, researcher):
    """Issue 32: the notebook client reads every answer to a study's questions, per system for list and
    claim questions, in the shape metaeval.stats.questions takes; its distribution equals hand counts."""
    from django.test import Client
    from django.urls import reverse

    from annotation.members.services import add_members
    from tests.support.assignment_study import make_study as make_question_study

    questions = [
        {"key": "confidence", "type": "likert", "prompt": "How sure?"},
        {"key": "verifiable", "type": "check", "prompt": "Verifiable", "target": "claim"},
    ]
    study, users = make_question_study(kind="preference", slug="qs", items=3, n=2, annotators=2, questions=questions)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    browser = Client()
    given = []
    for number, user in enumerate(users):
        browser.force_login(user)
        while (response := browser.post(reverse("api-assignment-next", args=["qs"]))).status_code == 200:
            confidence = 1 + (len(given) + number) % 5
            given.append(confidence)
            browser.post(
                reverse("api-assignment-submit", args=[response.json()["assignment"]["id"]]),
                {
                    "choice": "tie",
                    "questions": {"confidence": confidence, "verifiable": {"list_1": [True], "list_2": [False]}},
                },
                content_type="application/json",
            )
    lab = Claimlab(live_server.url, issue_token(user=researcher, name="notebook").key)
    answers = lab.question_answers("qs")
    confidence = answers[answers["question"] == "confidence"]
    assert sorted(confidence["value"]) == sorted(given) and set(confidence["target"]) == {""}
    claims = answers[answers["question"] == "verifiable"]
    assert set(claims["target"]) == {"veriscore#0", "safe#0"} and len(claims) == 2 * len(given)
    distribution = stats.question_distribution(confidence, study.questions[0])  # stored complete (its scale)
    assert {int(k): v for k, v in distribution["overall"]["counts"].items()} == {p: given.count(p) for p in range(1, 6)}


def test_the_client_reads_the_leaderboard_and_plans_with_a_verifier(lab, researcher):
    from metaeval import stats as metaeval_stats

    board = lab.leaderboard()
    assert list(board.columns[:4]) == ["rank", "verifier", "mean", "n_studies"]  # no verification study yet: empty
    assert board.empty and lab.leaderboard_json()["rows"] == []
    plan = lab.plan(kind="verification", width=0.05, share=0.4, sensitivity=0.9, specificity=0.8)["ppi"]
    moments = metaeval_stats.share_moments(0.4, 0.9, 0.8)
    expected = metaeval_stats.labels_needed_from_moments(*moments, n_unlabelled=10_000, width=0.05)
    assert (plan["n_classical"], plan["n_ppi"]) == (expected["n_classical"], expected["n_ppi"])
    with pytest.raises(ClaimlabError, match="specificity"):
        lab.plan(kind="verification", sensitivity=0.9)
