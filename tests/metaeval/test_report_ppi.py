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


def _study(labelled_claims: int = LABELLED):
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
    for _ in range(
        labelled_claims
    ):  # the annotator stops part-way: the labelled claims follow the study's random order
        assignment = claim_next(user=annotator, study=study)
        assert assignment is not None
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
    # 60 of 80 claims: about 11 of the 27 three-claim responses end fully labelled, whatever the random claim order
    # (with 36, about 2.5: F1@K, which needs two, was undefined in some orders)
    study, *_ = _study(60)
    add_members(study=study, usernames=["boss"], role="researcher")
    client.force_login(get_user_model().objects.get(username="boss"))
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'id="ppi"' in page and "Prediction-powered estimates" in page and "random sample" in page
    assert "F1@K (mean per response), all" in page and "random sample of the responses" in page
    report = build_report(study)
    tex = table_tex(report_tables(report)["ppi"])
    assert "PPI++" in tex and "sys-a" in tex and "Verifier only" in tex and "F1@K, system sys-b" in tex
    from metaeval.reporting.csv_format import report_csv

    lines = [line for line in report_csv(report).splitlines() if line.startswith("ppi,verifier:judge|all claims")]
    assert [line.split(",")[2] for line in lines] == [
        "ppi_share_supported",
        "human_only_share_supported",
        "verifier_only_share_supported",
    ]
    import csv
    import io

    cells = list(csv.reader(io.StringIO(report_csv(report))))
    f1 = [row for row in cells if row[:2] == ["ppi", "verifier:judge|F1@K (mean per response), all"]]
    assert [row[2] for row in f1] == ["ppi_f1_at_k", "human_only_f1_at_k", "verifier_only_f1_at_k"]
    fit = report["ppi"]["verifiers"]["judge"]["f1_at_k"]
    assert fit["estimate"]["value"] is not None, fit
    assert f1[0][6] == str(fit["n"] + fit["N"]) and "responses" in f1[0][7]
    assert float(f1[0][3]) == pytest.approx(fit["estimate"]["value"])


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
    # every WiCE claim is its own response, so K = 1 and a response's F1@K is 1 when its claim is supported:
    # F1@K by response is the share supported, and 50 of its 100 fully labelled responses are drawn
    assert section["k"] == {"wikipedia": 1}
    assert (gpt4["f1_at_k"]["n"], gpt4["f1_at_k"]["N"]) == (50, 50)
    assert gpt4["f1_at_k"]["estimate"]["ci"] == pytest.approx(fit["estimate"]["ci"], abs=1e-12)
    print(f"WiCE, half the human labels: PPI++ width {fit['width']:.3f}, human-only {fit['width_classical']:.3f}")


# --- VeriScore's F1@K by response (the third factuality score) ---------------------------------------


def _f1(labels, k):
    """VeriScore's F1@K of one response, written out: every label of these studies' binary maps is countable
    (supported the positive one; inconclusive a negative one), None is no label."""
    supported = sum(label == "supported" for label in labels)
    countable = sum(label in ("supported", "contradicted", "inconclusive") for label in labels)
    if not supported:
        return 0.0
    precision, recall = supported / countable, min(supported / k, 1.0)
    return 2 * precision * recall / (precision + recall)


def _upper_median(values):
    return sorted(values)[len(values) // 2]


def _f1_arrays(responses, k, labelled):
    """(y, yhat, yhat_u) over responses: {response: (domain, [(reference, prediction), ...])}, None for none."""
    y, yhat, yhat_u = [], [], []
    for response, (domain, pairs) in responses.items():
        references, predictions = [r for r, _ in pairs], [p for _, p in pairs]
        if None in predictions:
            continue
        if response in labelled:
            y.append(_f1(references, k[domain]))
            yhat.append(_f1(predictions, k[domain]))
        else:
            yhat_u.append(_f1(predictions, k[domain]))
    return np.array(y), np.array(yhat), np.array(yhat_u)


def _ppi_py(y, yhat, yhat_u):
    point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u))[0])
    low, high = (float(np.ravel(b)[0]) for b in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
    return point, [low, high]


def _responses_study():
    """60 responses of 1-9 claims in two domains and two systems; gold labels on every claim of a random 70 % of
    the responses (the reference rule gold), on some claims of a few others; a verifier on every claim but one."""
    rng = random.Random(11)
    study = create_study(slug="ppi-f1", name="PPI F1", kind="verification", annotators_per_item=1)
    records, predictions, truth = [], [], {}
    for number in range(60):
        response, domain = f"resp-{number:02d}", ("bio" if number % 3 else "news")
        full, some = rng.random() < 0.7, rng.random() < 0.3
        share = rng.random()
        for claim in range(rng.randint(1, 9)):
            item_id = f"{response}-c{claim}"
            label = "supported" if rng.random() < share else "contradicted"
            gold = label if full or (some and rng.random() < 0.5) else None
            truth[item_id] = (response, domain, gold)
            records.append(
                verification_item(
                    item_id,
                    response_id=response,
                    system=f"sys-{number % 2}",
                    domain=domain,
                    **({"gold": gold} if gold else {}),
                )
            )
            said = label if rng.random() < 0.8 else "supported"
            if item_id != "resp-05-c0":
                predictions.append({"item": item_id, "verifier": "judge", "label": said})
    import_items(study=study, stream=jsonl(*records), fmt="jsonl")
    import_predictions(study=study, stream=jsonl(*predictions), fmt="jsonl")
    predicted = {row["item"]: row["label"] for row in predictions}
    responses: dict[str, tuple[str, list]] = {}
    for item_id, (response, domain, gold) in truth.items():
        responses.setdefault(response, (domain, []))[1].append((gold, predicted.get(item_id)))
    return study, responses


def test_the_report_gives_f1_at_k_by_ppi_over_whole_responses_equal_to_ppi_python():
    from metaeval.reporting import ReportOptions

    study, responses = _responses_study()
    full = {r for r, (_, pairs) in responses.items() if all(g is not None for g, _ in pairs)}
    # K as the report's factuality scores take it: per domain, the upper median of the countable reference labels
    k = {
        domain: _upper_median([sum(g is not None for g, _ in pairs) for d, pairs in responses.values() if d == domain])
        for domain in ("bio", "news")
    }
    report = build_report(study, ReportOptions(reference="gold"))
    section = report["ppi"]
    assert section["k"] == k == report["scores"]["veriscore_k"]["k"]
    assert "random sample of the responses" in section["random_responses"]
    assert section["n_responses"] == 60 and section["n_responses_fully_labelled"] == len(full)
    block = section["verifiers"]["judge"]
    y, yhat, yhat_u = _f1_arrays(responses, k, full)
    assert (block["n_responses_labelled"], block["n_responses_unlabelled"], block["n_responses_left_out"]) == (
        len(y),
        len(yhat_u),
        1,  # resp-05: the verifier did not label its first claim
    )
    fit = block["f1_at_k"]
    point, ci = _ppi_py(y, yhat, yhat_u)
    assert fit["estimate"]["value"] == pytest.approx(point, abs=1e-9)
    assert fit["estimate"]["ci"] == pytest.approx(ci, abs=1e-9)
    c_low, c_high = (float(np.ravel(b)[0]) for b in ppi_py.classical_mean_ci(y, alpha=0.05))
    assert fit["classical"]["ci"] == pytest.approx([c_low, c_high], abs=1e-9)
    assert fit["verifier_only"]["value"] == pytest.approx(np.concatenate([yhat, yhat_u]).mean())
    # the human-only mean on the fully labelled responses is the gold block's F1@K on those responses
    for system in ("sys-0", "sys-1"):
        mine = {r: v for r, v in responses.items() if int(r.split("-")[1]) % 2 == int(system[-1])}
        point, ci = _ppi_py(*_f1_arrays(mine, k, full))
        assert block["f1_at_k_by_system"][system]["estimate"]["ci"] == pytest.approx(ci, abs=1e-9)

    # ?k= fixes K, and ?ppi_labelled_share= draws among the fully labelled responses
    report = build_report(study, ReportOptions(reference="gold", k=3, ppi_labelled_share=0.5))
    section = report["ppi"]
    drawn = set(np.random.default_rng(0).permutation(np.array(sorted(full), dtype=object))[: round(len(full) / 2)])
    assert f"({len(drawn)} of {len(full)})" in section["responses_labelled_share_rule"]
    y, yhat, yhat_u = _f1_arrays(responses, {"bio": 3, "news": 3}, drawn)
    point, ci = _ppi_py(y, yhat, yhat_u)
    assert section["verifiers"]["judge"]["f1_at_k"]["estimate"]["ci"] == pytest.approx(ci, abs=1e-9)
    assert section["verifiers"]["judge"]["f1_at_k"]["n"] == len(drawn) - ("resp-05" in drawn)


def test_f1_at_k_by_ppi_on_the_factcheck_gpt_demo_equals_ppi_python(demo, db):
    """Real data: the factcheck-gpt demo's 244 ChatGPT claims in 30 responses, Factcheck-Bench's gold labels on
    221 of them (19 responses labelled in full) as the reference, and the lexical-overlap baseline's predictions
    on every claim. y and yhat are computed here from the fixture file and the stored predictions."""
    import io
    import json

    from django.core.management import call_command

    from metaeval.models import Prediction
    from metaeval.reporting import ReportOptions
    from tests.metaeval.conftest import FIXTURES

    call_command("load_demo_verifiers", stdout=io.StringIO())  # as `make run` does; rolled back after the test
    study = Study.objects.get(slug="factcheck-gpt")
    predicted = dict(
        Prediction.objects.filter(verifier__study=study, verifier__name="baseline-overlap").values_list(
            "item__external_id", "label"
        )
    )
    responses: dict[str, tuple[str, list]] = {}
    for record in map(json.loads, (FIXTURES / "factcheck_gpt/items.jsonl").open()):
        pair = (record.get("gold"), predicted.get(record["id"]))
        responses.setdefault(record["response_id"], (record["domain"], []))[1].append(pair)
    full = {r for r, (_, pairs) in responses.items() if all(g is not None for g, _ in pairs)}
    assert (len(responses), len(full), len(predicted)) == (30, 19, 244)
    k = {"open-domain QA": _upper_median([sum(g is not None for g, _ in pairs) for _, pairs in responses.values()])}
    section = build_report(study, ReportOptions(reference="gold"))["ppi"]
    assert section["k"] == k
    fit = section["verifiers"]["baseline-overlap"]["f1_at_k"]
    y, yhat, yhat_u = _f1_arrays(responses, k, full)
    assert (fit["n"], fit["N"]) == (19, 11)
    point, ci = _ppi_py(y, yhat, yhat_u)
    assert fit["estimate"]["value"] == pytest.approx(point, abs=1e-9)
    assert fit["estimate"]["ci"] == pytest.approx(ci, abs=1e-9)
    assert fit["classical"]["value"] == pytest.approx(y.mean(), abs=1e-12)
