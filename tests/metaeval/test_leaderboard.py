"""The verifier leaderboard (issue 33): balanced accuracy per verifier and study across the studies a user leads,
each cell the study's own report number, a mean over studies and a rank; other people's studies never appear;
a study whose report is not built yet is pending (its build queued); CSV and LaTeX downloads; the API."""

from __future__ import annotations

import csv
import io
import random

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.members.services import add_members
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from metaeval.reporting import ReportOptions, cache
from metaeval.verifiers.services.prediction_import import import_predictions
from tests.conftest import jsonl, verification_item

pytestmark = pytest.mark.django_db

RATES = {"good": 0.9, "fair": 0.7}


def _study(slug: str, researcher: str, seed: int):
    rng = random.Random(seed)
    study = create_study(slug=slug, name=slug.title(), kind="verification", annotators_per_item=1)
    add_members(study=study, usernames=[f"{slug}-ann"], role="annotator")
    add_members(study=study, usernames=[researcher], role="researcher")
    labels = ["supported", "contradicted", "inconclusive"]
    truth = {f"c-{n}": rng.choice(labels) for n in range(40)}
    import_items(study=study, stream=jsonl(*(verification_item(i) for i in truth)), fmt="jsonl")
    for name, rate in RATES.items():
        rows = [
            {"item": i, "verifier": name, "label": t if rng.random() < rate else rng.choice(labels)}
            for i, t in truth.items()
        ]
        import_predictions(study=study, stream=jsonl(*rows), fmt="jsonl")
    annotator = get_user_model().objects.get(username=f"{slug}-ann")
    while (assignment := claim_next(user=annotator, study=study)) is not None:
        answer = SubmittedAnswer(label=truth[assignment.item.external_id])
        submit(user=annotator, study=study, assignment_id=assignment.pk, answer=answer)
    return study


def test_the_leaderboard_holds_each_studys_own_report_numbers_a_mean_and_a_rank(client):
    first, second = _study("alpha", "lead", 1), _study("beta", "lead", 2)
    _study("gamma", "someone-else", 3)
    client.force_login(get_user_model().objects.get(username="lead"))
    cold = client.get("/api/leaderboard").json()
    assert {s["slug"] for s in cold["pending"]} == {"alpha", "beta"} and cold["rows"] == []  # builds queued
    reports = {study.slug: cache.current_report(study, ReportOptions()).report for study in (first, second)}
    board = client.get("/api/leaderboard").json()
    assert board["columns"] == ["alpha", "beta"] and board["pending"] == []  # never gamma: not theirs
    for row in board["rows"]:
        values = []
        for slug in ("alpha", "beta"):
            expected = reports[slug]["verifiers"][row["verifier"]]["balanced_accuracy"]
            assert row["cells"][slug]["value"] == pytest.approx(expected["value"])
            assert row["cells"][slug]["ci"] == pytest.approx(expected["ci"])
            values.append(expected["value"])
        assert row["mean"] == pytest.approx(sum(values) / 2) and row["n_studies"] == 2
    means = [row["mean"] for row in board["rows"]]
    assert means == sorted(means, reverse=True) and [row["rank"] for row in board["rows"]] == [1, 2]
    assert board["rows"][0]["verifier"] == "good"

    page = client.get(reverse("metaeval:leaderboard"))
    assert page.status_code == 200 and 'id="leaderboard"' in page.content.decode()
    download = client.get(reverse("metaeval:leaderboard"), {"format": "csv"})
    rows = list(csv.reader(io.StringIO(download.content.decode())))
    assert rows[0][:4] == ["rank", "verifier", "mean", "n_studies"] and rows[1][1] == "good"
    tex = client.get(reverse("metaeval:leaderboard"), {"format": "tex"}).content.decode()
    assert "\\begin{tabular}" in tex and "good" in tex and "alpha" in tex
    assert client.get(reverse("metaeval:leaderboard"), {"format": "xlsx"}).status_code == 400


def test_annotators_and_strangers_see_no_study_and_anonymous_users_are_refused(client):
    _study("alpha", "lead", 1)
    client.force_login(get_user_model().objects.get(username="alpha-ann"))  # an annotator of the study
    assert client.get("/api/leaderboard").json()["rows"] == []
    assert client.get("/api/leaderboard").json()["pending"] == []
    client.logout()
    assert client.get("/api/leaderboard").status_code in (401, 403)
    assert client.get(reverse("metaeval:leaderboard")).status_code == 302
