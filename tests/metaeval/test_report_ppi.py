"""The report's prediction-powered shares (issue 33): a verifier's predictions on every claim corrected by the
human labels on the claims annotators reached in the study's random order, equal to the reference package
ppi-python's PPI++ on the same claims, overall and per system; shown on the page and as a LaTeX table."""

from __future__ import annotations

import random

import numpy as np
import ppi_py  # the reference implementation, a dev dependency (requirements-dev.txt)
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Study
from annotation.studies.services import create_study
from annotation.transfer.services.item_import import import_items
from annotation.workbench.services import SubmittedAnswer, claim_next, submit
from metaeval.reporting import build_report
from metaeval.reporting.latex_format import report_tables, table_tex
from metaeval.verifiers.services.prediction_import import import_predictions
from tests.conftest import jsonl, verification_item

pytestmark = pytest.mark.django_db

ITEMS, LABELLED = 80, 36


def _study():
    rng = random.Random(5)
    study = create_study(slug="ppi", name="PPI", kind="verification", annotators_per_item=1)
    add_members(study=study, usernames=["ann"], role="annotator")
    truth, predicted = {}, {}
    records = []
    for number in range(ITEMS):
        item_id = f"c-{number}"
        truth[item_id] = "supported" if rng.random() < 0.45 else "contradicted"
        right = rng.random() < 0.85  # a good but imperfect verifier, biased towards "supported" when wrong
        predicted[item_id] = truth[item_id] if right else "supported"
        records.append(
            verification_item(
                item_id, system="sys-a" if number % 2 else "sys-b", response_id=f"r-{number % 2}-{number // 6}"
            )
        )
    import_items(study=study, stream=jsonl(*records), fmt="jsonl")
    rows = [{"item": item_id, "verifier": "judge", "label": label} for item_id, label in predicted.items()]
    import_predictions(study=study, stream=jsonl(*rows), fmt="jsonl")
    annotator = get_user_model().objects.get(username="ann")
    labelled = []
    for _ in range(LABELLED):  # the annotator stops part-way: the labelled claims follow the study's random order
        assignment = claim_next(user=annotator, study=study)
        item_id = assignment.item.external_id
        submit(user=annotator, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label=truth[item_id]))
        labelled.append(item_id)
    study.refresh_from_db()
    return study, truth, predicted, labelled


def _arrays(truth, predicted, labelled, within=None):
    keep = [i for i in truth if within is None or within(i)]
    is_labelled = set(labelled)
    y = np.array([truth[i] == "supported" for i in keep if i in is_labelled], dtype=float)
    yhat = np.array([predicted[i] == "supported" for i in keep if i in is_labelled], dtype=float)
    yhat_u = np.array([predicted[i] == "supported" for i in keep if i not in is_labelled], dtype=float)
    return y, yhat, yhat_u


def test_the_report_gives_ppi_shares_equal_to_ppi_python_overall_and_per_system():
    study, truth, predicted, labelled = _study()
    report = build_report(study)
    block = report["ppi"]["verifiers"]["judge"]
    assert (block["n_labelled"], block["n_unlabelled"]) == (LABELLED, ITEMS - LABELLED)
    assert "random sample" in report["ppi"]["random_sample"]
    cases = [
        (block["overall"], None),
        (block["by_system"]["sys-a"], lambda i: int(i.split("-")[1]) % 2 == 1),
        (block["by_system"]["sys-b"], lambda i: int(i.split("-")[1]) % 2 == 0),
    ]
    for fit, within in cases:
        y, yhat, yhat_u = _arrays(truth, predicted, labelled, within)
        point = float(np.asarray(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u)).ravel()[0])
        low, high = (float(np.asarray(b).ravel()[0]) for b in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
        assert fit["estimate"]["value"] == pytest.approx(point, abs=1e-9)
        assert fit["estimate"]["ci"] == pytest.approx([low, high], abs=1e-9)
        c_low, c_high = (float(np.asarray(b).ravel()[0]) for b in ppi_py.classical_mean_ci(y, alpha=0.05))
        assert fit["classical"]["value"] == pytest.approx(y.mean())
        assert fit["classical"]["ci"] == pytest.approx([c_low, c_high], abs=1e-9)
        assert fit["verifier_only"]["value"] == pytest.approx(np.concatenate([yhat, yhat_u]).mean())
        assert (fit["n"], fit["N"]) == (len(y), len(yhat_u))
    overall = block["overall"]
    assert overall["width_ratio"] < 1  # a good verifier narrows the interval (85 % right)
    # FActScore: the mean over responses of their share supported, i.e. claims weighted by 1 / claims per response
    sizes: dict[str, int] = {}
    for number in range(ITEMS):
        sizes[f"r-{number % 2}-{number // 6}"] = sizes.get(f"r-{number % 2}-{number // 6}", 0) + 1
    weight = {f"c-{number}": 1 / sizes[f"r-{number % 2}-{number // 6}"] for number in range(ITEMS)}
    y, yhat, yhat_u = _arrays(truth, predicted, labelled)
    w = np.array([weight[i] for i in truth if i in set(labelled)])
    w_u = np.array([weight[i] for i in truth if i not in set(labelled)])
    low, high = (float(np.ravel(b)[0]) for b in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, w=w, w_unlabeled=w_u))
    assert block["factscore"]["estimate"]["ci"] == pytest.approx([low, high], abs=1e-9)
    assert set(block["factscore_by_system"]) == {"sys-a", "sys-b"}


def test_the_page_and_the_latex_table_show_the_ppi_shares(client):
    study, *_ = _study()
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(get_user_model().objects.get(username="boss"))
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'id="ppi"' in page and "Prediction-powered shares" in page and "random sample" in page
    report = build_report(study)
    tex = table_tex(report_tables(report)["ppi"])
    assert "PPI++" in tex and "sys-a" in tex and "Verifier only" in tex
    from metaeval.reporting.csv_format import report_csv

    lines = [line for line in report_csv(report).splitlines() if line.startswith("ppi,verifier:judge|all claims")]
    assert [line.split(",")[2] for line in lines] == [
        "ppi_share_supported",
        "human_only_share_supported",
        "verifier_only_share_supported",
    ]


def test_a_study_without_predictions_or_a_preference_study_has_no_ppi_section():
    study = create_study(slug="plain", name="plain", kind="verification", annotators_per_item=1)
    import_items(study=study, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    assert build_report(study)["ppi"] is None


def test_the_report_compares_every_pair_of_verifiers_with_mcnemar_and_holm(client):
    """Three verifiers on the same claims: per pair, b and c counted against the reference labels, the exact
    McNemar p equal to statsmodels', and the Holm-adjusted p equal to multipletests(method="holm")."""
    from statsmodels.stats.contingency_tables import mcnemar
    from statsmodels.stats.multitest import multipletests

    study, truth, predicted, labelled = _study()
    rng = random.Random(9)
    others = {
        "weak": {i: (t if rng.random() < 0.6 else "contradicted") for i, t in truth.items()},
        "strong": {i: (t if rng.random() < 0.95 else "contradicted") for i, t in truth.items()},
    }
    for name, labels in others.items():
        rows = [{"item": item_id, "verifier": name, "label": label} for item_id, label in labels.items()]
        import_predictions(study=study, stream=jsonl(*rows), fmt="jsonl")
    report = build_report(study)
    section = report["verifier_comparisons"]
    every = {"judge": predicted, **others}
    raw = []
    for pair in section["pairs"]:
        a, b = every[pair["a"]], every[pair["b"]]
        right_a = [a[i] == truth[i] for i in labelled]
        right_b = [b[i] == truth[i] for i in labelled]
        only_a = sum(x and not y for x, y in zip(right_a, right_b, strict=True))
        only_b = sum(y and not x for x, y in zip(right_a, right_b, strict=True))
        assert (pair["n_items"], pair["mcnemar"]["b"], pair["mcnemar"]["c"]) == (LABELLED, only_a, only_b)
        table = [[0, only_a], [only_b, 0]]
        assert pair["mcnemar"]["p_value"] == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
        raw.append(pair["mcnemar"]["p_value"])
    assert len(raw) == 3
    holm = multipletests(raw, method="holm")[1]
    assert [pair["mcnemar"]["p_holm"] for pair in section["pairs"]] == pytest.approx(list(holm), rel=1e-12)
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(get_user_model().objects.get(username="boss"))
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'id="verifier-comparisons"' in page and "Holm" in page
    assert "verifier_comparisons" in report_tables(report)


def test_the_wice_demo_with_half_its_human_labels_gets_a_narrower_ppi_interval_from_gpt4(demo, db):
    """Issue 33's check on real data: the WiCE demo (100 claims, one human label each, GPT-4 predictions on all),
    with a seeded random half of the human labels kept: PPI++ equals ppi-python on exactly those claims (read
    from the fixture files, not through Claimlab) and its interval is narrower than the human-only one."""
    import io
    import json

    from django.core.management import call_command

    from metaeval.reporting import ReportOptions
    from tests.metaeval.conftest import FIXTURES

    call_command("load_demo_verifiers", stdout=io.StringIO())  # as `make run` does; rolled back after the test
    study = Study.objects.get(slug="wice")
    report = build_report(study, ReportOptions(ppi_labelled_share=0.5))
    section = report["ppi"]
    gpt4 = section["verifiers"]["gpt-4-0613"]
    assert (gpt4["n_labelled"], gpt4["n_unlabelled"]) == (50, 50)
    assert "(50 of 100)" in section["labelled_share_rule"]
    human = {r["item"]: r["label"] for r in map(json.loads, (FIXTURES / "wice/annotations.jsonl").open())}
    predicted = {
        r["item"]: r["label"]
        for r in map(json.loads, (FIXTURES / "wice/predictions.jsonl").open())
        if r["verifier"] == "gpt-4-0613"
    }
    kept = sorted(np.random.default_rng(0).permutation(np.array(sorted(human), dtype=object))[:50])
    rest = [item for item in predicted if item not in set(kept)]
    y = np.array([human[i] == "supported" for i in kept], dtype=float)
    yhat = np.array([predicted[i] == "supported" for i in kept], dtype=float)
    yhat_u = np.array([predicted[i] == "supported" for i in rest], dtype=float)
    fit = gpt4["overall"]
    low, high = (float(np.asarray(b).ravel()[0]) for b in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
    assert fit["estimate"]["ci"] == pytest.approx([low, high], abs=1e-9)
    c_low, c_high = (float(np.asarray(b).ravel()[0]) for b in ppi_py.classical_mean_ci(y, alpha=0.05))
    assert fit["classical"]["ci"] == pytest.approx([c_low, c_high], abs=1e-9)
    assert fit["width"] < fit["width_classical"], (fit["width"], fit["width_classical"])
    print(f"WiCE, half the human labels: PPI++ width {fit['width']:.3f}, human-only {fit['width_classical']:.3f}")
