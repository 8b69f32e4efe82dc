"""The planning tool's page, API and command, and the study page's precision card."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from metaeval.planning import study_precision
from metaeval.stats import planning

pytestmark = pytest.mark.django_db


def test_planning_page_answers_the_veriscore_style_question(client, demo_researcher):
    """Done-when of issue 14 §3: 80% power at p = 0.65 (exact sign test, checked in tests/stats)."""
    client.force_login(demo_researcher)
    page = client.get(reverse("metaeval:plan"), {"kind": "preference", "p": "0.65", "power": "0.8"})
    assert page.status_code == 200
    html = page.content.decode()
    assert '<p class="stat-value" id="sign-test-items">90 decisive items</p>' in html
    assert planning.sign_test_items(0.65, 0.8)["n_exact"] == 90


def test_planning_page_names_a_bad_value_and_still_answers(client, demo_researcher):
    client.force_login(demo_researcher)
    html = client.get(reverse("metaeval:plan"), {"p": "lots"}).content.decode()
    assert "p: p must be a number, got &#x27;lots&#x27;" in html
    assert 'value="lots"' in html and "decisive items" in html


def test_planning_page_needs_a_login(client):
    assert client.get(reverse("metaeval:plan")).status_code == 302


def test_plan_api_gives_the_same_numbers_and_400_naming_the_field(client, demo_researcher):
    client.force_login(demo_researcher)
    answer = client.get("/api/plan", {"kind": "verification", "kappa": "0.6", "kappa_b": "0.7", "width": "0.2"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["kappa_ci"]["items"] == planning.kappa_ci_items(0.2, 0.6, (0.6, 0.25, 0.15))
    assert body["verifier_difference"]["items"] == planning.verifier_difference_items(0.6, 0.7, (0.6, 0.25, 0.15))
    bad = client.get("/api/plan", {"kind": "verification", "distribution": "0.5,x"})
    assert bad.status_code == 400 and "distribution" in bad.json()["fields"]
    client.logout()
    assert client.get("/api/plan").status_code in (401, 403)


def test_plan_command_prints_the_plan_and_names_bad_options():
    out = io.StringIO()
    call_command("plan", "preference", "--p", "0.65", "--power", "0.8", stdout=out)
    assert json.loads(out.getvalue())["sign_test"]["n_exact"] == 90
    with pytest.raises(CommandError, match="--kappa-b"):
        call_command("plan", "verification", "--kappa-b", "0.6", stdout=io.StringIO())


def test_study_page_shows_the_width_reached_and_items_still_needed(client, demo_researcher, xsum_study):
    precision = study_precision(xsum_study, 0.1)
    assert precision["width"] is not None and precision["n"] > 100
    assert precision["items_needed"] == max(
        0, planning.kappa_ci_items(0.1, precision["kappa"], precision_distribution(xsum_study)) - precision["n"]
    )
    client.force_login(demo_researcher)
    page = client.get(reverse("annotation:study_detail", args=[xsum_study.slug])).content.decode()
    card_url = reverse("metaeval:precision_card", args=[xsum_study.slug])
    assert f'data-src="{card_url}"' in page  # loaded after the page: it reads every label
    html = client.get(card_url).content.decode()
    assert f'id="precision-width">{precision["width"]:.3f}<' in html
    assert f'id="precision-needed">{precision["items_needed"]}<' in html or "within the target" in html


def precision_distribution(study) -> list[float]:
    from metaeval import selectors
    from metaeval.reporting.agreement import agreement_table

    table, _ = agreement_table(selectors.label_frame(study, include_gold=study.gold_in_agreement), study)
    return [float(c) for c in table.counts.sum(axis=0) if c > 0]


def test_preference_study_precision_counts_decisive_items(db):
    """Decisive items = a strict majority for one system, counted here from the records themselves."""
    from collections import Counter

    from tests.support.factscore_pref import SYSTEMS, demo_items, human_records, make_study

    study = make_study(slug="plan-pref")
    directions: dict[str, list[str]] = {}
    for record in human_records(demo_items()):
        side = "tie" if record["preferred"] == "tie" else record["preferred"]
        directions.setdefault(record["item"], []).append(side)
    decisive = []
    for sides in directions.values():
        side, n = Counter(sides).most_common(1)[0]
        if 2 * n > len(sides) and side != "tie":
            decisive.append(side)
    share = decisive.count(SYSTEMS[0]) / len(decisive)
    precision = study_precision(study, 0.1)
    assert precision["measure"].startswith("preference share")
    assert precision["n"] == len(decisive)
    assert precision["share"] == pytest.approx(share)
    assert precision["width"] == pytest.approx(planning.preference_ci_width(len(decisive), share))
    assert precision["items_needed"] == planning.preference_ci_items(0.1, share) - len(decisive)


def test_the_precision_card_is_kept_until_the_study_changes(loaded_verification_study, monkeypatch):
    """Read back while nothing changed (no label read); recomputed, to the fresh value, after a new label."""
    from annotation.transfer.services.annotation_import import import_annotations
    from metaeval import selectors
    from metaeval.planning import cached_study_precision
    from tests.conftest import jsonl

    study = loaded_verification_study
    reads: list[int] = []
    real = selectors.label_rows

    def counted(*args, **kwargs):
        reads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(selectors, "label_rows", counted)
    first = cached_study_precision(study, 0.1)
    assert cached_study_precision(study, 0.1) == first and len(reads) == 1
    import_annotations(study=study, stream=jsonl({"item": "c-2", "annotator": "w3", "label": "supported"}), fmt="jsonl")
    after = cached_study_precision(study, 0.1)
    assert len(reads) == 2 and after != first
    assert after == study_precision(study, 0.1)


def test_the_ppi_plan_needs_fewer_human_labels_with_a_good_verifier_on_the_page_api_and_command(
    client, demo_researcher
):
    """The share's moments from a share, sensitivity and specificity equal a simulated population's; the plan's
    numbers are the planner's on them; a good verifier needs fewer human labels, a coin-flip one as many."""
    import numpy as np

    from metaeval import stats

    rng = np.random.default_rng(4)
    y = rng.random(2_000_000) < 0.4
    yhat = np.where(y, rng.random(y.size) < 0.9, rng.random(y.size) < 0.2)  # sensitivity 0.9, specificity 0.8
    var_y, var_h, cov = stats.share_moments(0.4, 0.9, 0.8)
    assert var_y == pytest.approx(y.var(), abs=1e-3) and var_h == pytest.approx(yhat.var(), abs=1e-3)
    assert cov == pytest.approx(np.cov(y, yhat)[0, 1], abs=1e-3)
    client.force_login(demo_researcher)
    query = {"kind": "verification", "width": "0.05", "share": "0.4", "sensitivity": "0.9", "specificity": "0.8"}
    body = client.get("/api/plan", query).json()["ppi"]
    expected = stats.labels_needed_from_moments(var_y, var_h, cov, n_unlabelled=10_000, width=0.05)
    assert (body["n_classical"], body["n_ppi"]) == (expected["n_classical"], expected["n_ppi"])
    assert body["n_ppi"] < 0.7 * body["n_classical"]
    coin = client.get("/api/plan", {**query, "sensitivity": "0.5", "specificity": "0.5"}).json()["ppi"]
    assert coin["n_ppi"] == coin["n_classical"]  # a verifier that knows nothing saves nothing
    half = client.get("/api/plan", {**query, "specificity": ""})
    assert half.status_code == 400 and "specificity" in half.json()["fields"]
    page = client.get(reverse("metaeval:plan"), query).content.decode()
    assert f'<strong id="ppi-labels">{body["n_ppi"]}</strong>' in page
    out = io.StringIO()
    call_command(
        "plan",
        "verification",
        "--width",
        "0.05",
        "--share",
        "0.4",
        "--sensitivity",
        "0.9",
        "--specificity",
        "0.8",
        stdout=out,
    )
    assert json.loads(out.getvalue())["ppi"]["n_ppi"] == body["n_ppi"]
