"""Reference labels and per-annotator quality in the report, on the XSum demo (real labels)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from metaeval import stats
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.options import InvalidOption, options_from_query

pytestmark = pytest.mark.django_db


def _majority(labels: pd.DataFrame) -> pd.Series:
    """Strict majority per item, computed here with pandas alone."""
    counts = labels.groupby(["item", "label"]).size().unstack(fill_value=0)
    top = counts.max(axis=1)
    has = 2 * top > counts.sum(axis=1)
    return counts[has].idxmax(axis=1)


@pytest.fixture(scope="module")
def majority_report(demo, django_db_blocker):
    with django_db_blocker.unblock():
        return build_report(demo["xsum-factuality"], ReportOptions(n_resamples=200, reference="majority"))


def test_majority_reference_counts_items_per_source_and_none(majority_report, xsum_fixture_labels):
    majority = _majority(xsum_fixture_labels)
    n_items = xsum_fixture_labels["item"].nunique()
    ref = majority_report["reference"]
    assert ref["rule"] == "majority" and ref["sources"] == ["majority"]
    assert ref["n_items"] == n_items
    assert ref["counts"] == {"majority": len(majority), "none": n_items - len(majority)}
    assert ref["counts"]["none"] >= 1  # XSum has an item whose two ratings split


def test_each_annotator_against_the_reference_and_the_others_is_sklearns_kappa(majority_report, xsum_fixture_labels):
    majority = _majority(xsum_fixture_labels)
    wide = xsum_fixture_labels.pivot(index="item", columns="annotator", values="label")
    quality = majority_report["annotator_quality"]
    assert set(quality["annotators"]) == set(wide.columns)
    for who, entry in quality["annotators"].items():
        mine = wide[who].dropna()
        shared = mine.index.intersection(majority.index)
        expected = cohen_kappa_score(mine[shared], majority[shared])
        kappa = entry["kappa_reference"]
        assert kappa["value"] == pytest.approx(expected, abs=1e-12)
        assert kappa["n_items"] == len(shared)
        assert kappa["ci"][0] < kappa["value"] < kappa["ci"][1]
        others = _majority(xsum_fixture_labels[xsum_fixture_labels["annotator"] != who])
        common = mine.index.intersection(others.index)
        assert entry["kappa_others"]["value"] == pytest.approx(
            cohen_kappa_score(mine[common], others[common]), abs=1e-12
        )
        assert entry["gold_accuracy"]["value"] is None  # the XSum demo has no gold items
        assert 0.5 < entry["dawid_skene_accuracy"] <= 1
        assert np.allclose(np.sum(entry["dawid_skene_confusion"], axis=1), 1)
    mace = stats.mace(xsum_fixture_labels, ["factual", "not_factual"])
    assert {who: e["mace_competence"] for who, e in quality["annotators"].items()} == pytest.approx(
        mace.competence.to_dict()
    )
    assert not any(e["flagged"] for e in quality["annotators"].values())
    assert "median" in quality["flag_rule"]
    assert quality["dawid_skene"]["converged"]


def test_dawid_skene_reference_covers_every_item(demo, xsum_fixture_labels):
    report = build_report(demo["xsum-factuality"], ReportOptions(n_resamples=0, reference="dawid_skene"))
    n_items = xsum_fixture_labels["item"].nunique()
    assert report["reference"]["counts"] == {"dawid_skene": n_items, "none": 0}
    assert report["annotator_quality"]["reference_rule"] == "dawid_skene"
    assert report["annotator_quality"]["annotators"]["wid_0"]["kappa_reference"]["n_items"] == n_items


def test_gold_reference_without_gold_items_says_none_for_all(demo):
    report = build_report(demo["xsum-factuality"], ReportOptions(n_resamples=0, reference="gold"))
    assert report["reference"]["counts"]["gold"] == 0
    assert report["reference"]["counts"]["none"] == report["reference"]["n_items"]
    entry = report["annotator_quality"]["annotators"]["wid_0"]["kappa_reference"]
    assert entry["value"] is None and entry["reason"] == "no items in common"


def test_unknown_rules_are_named_and_no_rule_means_the_studys():
    with pytest.raises(InvalidOption, match="reference must be one of gold, majority, dawid_skene"):
        options_from_query({"reference": "vibes"})
    with pytest.raises(ValueError, match="reference must be one of"):
        ReportOptions(reference="vibes")
    assert options_from_query({"reference": "adjudicated_else_majority"}).reference == "adjudicated_else_majority"
    assert options_from_query({}).reference is None  # the study's Study.reference_rule


def test_api_refuses_a_bad_reference_naming_it(client, demo_researcher, demo):
    client.force_login(demo_researcher)
    answer = client.get("/api/studies/xsum-factuality/report", {"reference": "vibes"})
    assert answer.status_code == 400
    assert "reference" in answer.json()["fields"]


def test_csv_latex_page_and_chart_carry_the_annotator_quality(client, demo_researcher, majority_report):
    from metaeval.reporting.charts import annotator_rows
    from metaeval.reporting.csv_format import report_csv
    from metaeval.reporting.latex_format import report_tables

    quality = majority_report["annotator_quality"]["annotators"]
    csv_text = report_csv(majority_report)
    wid0 = quality["wid_0"]["kappa_reference"]
    assert f"annotator_quality,annotator:wid_0,kappa_reference,{wid0['value']}," in csv_text
    assert "reference,rule:majority,items[none],1,,,1858," in csv_text
    table = report_tables(majority_report)["annotators"]
    assert [row[0] for row in table.rows] == ["wid\\_0", "wid\\_1", "wid\\_2"]
    assert table.rows[0][2] == f"{wid0['value']:.3f}"
    client.force_login(demo_researcher)
    page = client.get("/studies/xsum-factuality/report/?reference=dawid_skene").content.decode()
    assert 'id="annotator-quality-table"' in page
    assert "Reference labels: <strong>dawid_skene</strong>" in page
    assert "/report/charts/annotators.svg?reference=dawid_skene" in page
    bad = client.get("/studies/xsum-factuality/report/?reference=vibes")
    assert bad.status_code == 400
    chart = client.get("/studies/xsum-factuality/report/charts/annotators.svg")
    assert chart.status_code == 200 and chart["Content-Type"].startswith("image/svg")
    rows, flagged = annotator_rows(majority_report["annotator_quality"])
    assert rows[0] == ("wid_0", wid0["value"], tuple(wid0["ci"]), quality["wid_0"]["kappa_others"]["value"])
    assert flagged == []


def test_verifiers_against_the_chosen_reference_are_sklearns_numbers(db):
    from annotation.studies.services import create_study
    from annotation.transfer.services.annotation_import import import_annotations
    from annotation.transfer.services.item_import import import_items
    from metaeval.verifiers.services import import_predictions
    from tests.conftest import jsonl, verification_item

    study = create_study(slug="ref-verifiers", name="Ref", kind="verification", annotators_per_item=3)
    import_items(study=study, stream=jsonl(*(verification_item(f"c-{n}") for n in range(30))), fmt="jsonl")
    labels = ["supported", "contradicted", "inconclusive"]
    rows = [
        {"item": f"c-{n}", "annotator": who, "label": labels[(n + (k == 2) * (n % 4 == 0)) % 3]}
        for n in range(30)
        for k, who in enumerate(("w1", "w2", "w3"))
    ]
    rows = [r for r in rows if not (r["item"] == "c-1" and r["annotator"] == "w3")]
    rows[3]["label"] = "inconclusive" if rows[3]["label"] != "inconclusive" else "supported"  # c-1: w1, w2 split
    import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl")
    predicted = {f"c-{n}": labels[(n * 7 // 5) % 3] for n in range(30)}
    preds = ({"item": item, "verifier": "v", "label": label} for item, label in predicted.items())
    import_predictions(study=study, stream=jsonl(*preds), fmt="jsonl")
    frame = pd.DataFrame(rows)
    majority = _majority(frame)
    report = build_report(study, ReportOptions(n_resamples=100, reference="majority"))
    entry = report["verifiers_vs_reference"]["v"]
    assert entry["reference_rule"] == "majority"
    assert entry["n"] == len(majority) == 29 and entry["n_without_reference"] == 1
    items = list(majority.index)
    assert entry["cohen_kappa"]["value"] == pytest.approx(
        cohen_kappa_score([predicted[i] for i in items], majority[items].tolist())
    )
    assert entry["accuracy"]["value"] == pytest.approx(np.mean([predicted[i] == majority[i] for i in items]))
    assert report["reference"]["counts"] == {"majority": 29, "none": 1}


def test_the_studys_rule_applies_without_an_option_and_adjudications_feed_it(demo, demo_researcher):
    """No `reference` option: the study's rule (adjudicated_else_majority by default, the majority
    until something is adjudicated); an adjudication then takes its item over; dawid_skene as the
    study's rule reaches the verifier reference too."""
    from annotation.models import Adjudication, Item, Study
    from metaeval.study_frame import study_frame

    # a copy of its own: the shared object would keep the rule set below after the rollback
    study = Study.objects.get(pk=demo["xsum-factuality"].pk)
    before = build_report(study, ReportOptions(n_resamples=0))["reference"]
    assert before["rule"] == "adjudicated_else_majority"
    assert before["counts"].get("adjudicated", 0) == 0 and before["counts"]["none"] == 1  # the majority's tie
    tied = Item.objects.filter(study=study).order_by("position").first()
    assert tied is not None
    Adjudication.objects.create(study=study, item=tied, adjudicator=demo_researcher, label="factual", note="")
    after = build_report(study, ReportOptions(n_resamples=0))["reference"]
    assert after["counts"]["adjudicated"] == 1
    assert (
        after["counts"]["majority"] + after["counts"]["none"]
        == before["counts"]["majority"] + before["counts"]["none"] - 1
    )
    study.reference_rule = "dawid_skene"
    study.save(update_fields=["reference_rule"])
    assert build_report(study, ReportOptions(n_resamples=0))["reference"]["rule"] == "dawid_skene"
    frame, sentence = study_frame(study).verifier_reference()
    assert "Dawid-Skene" in sentence and set(frame["annotator"]) == {"dawid_skene"}


def test_factuality_scores_are_also_computed_from_the_reference_labels(demo):
    """Under the majority rule the reference block equals the human-majority block; under
    dawid_skene it counts the claims the model labelled and every claim is accounted for."""
    from annotation.models import Item

    study = demo["xsum-factuality"]
    by_majority = build_report(study, ReportOptions(n_resamples=0, reference="majority"))["scores"]
    assert by_majority["reference"]["rule"] == "majority"
    assert by_majority["reference"]["factscore"] == by_majority["human"]["factscore"]
    by_model = build_report(study, ReportOptions(n_resamples=0, reference="dawid_skene"))
    block = by_model["scores"]["reference"]
    assert block["rule"] == "dawid_skene"
    assert block["n_claims_with_reference"] == by_model["reference"]["counts"]["dawid_skene"]
    overall = block["factscore"]["overall"]
    assert overall["supported"] + overall["not_supported"] + overall["excluded"] + overall["no_verdict"] == len(
        Item.objects.filter(study=study)
    )
