"""A verification study with gold items and evidence judgements, end to end through the services."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from annotation.members.services import add_members
from annotation.models import Annotation, StudyMember
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval import selectors
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.build import GOLD_INCLUDED_RULE, GOLD_RULE
from metaeval.reporting.csv_format import report_csv
from tests.conftest import jsonl, verification_item
from tests.support.streamed import streamed_json

TYPES = ("news", "web", "wikipedia")


def _item(n: int, **extra) -> dict:
    evidence = [
        {"text": f"Passage {k}.", "title": f"T{k}", "url": f"https://example.org/{n}/{k}", "source_type": TYPES[k]}
        for k in range(3)
    ]
    return verification_item(
        f"c-{n}", response_id=f"r-{n // 3}", system="gpt" if n < 6 else "llama", evidence=evidence, **extra
    )


# (item, worker, label, evidence judgements as stored by different tools). Imports
# now refuse all but the canonical shape; rows stored before that, in these
# spellings, are still read, so the fixture writes them straight to the table.
LABELS = [
    ("c-0", "w1", "supported", [{"index": 0, "judgement": "support"}, {"index": 1, "judgement": "irrelevant"}]),
    ("c-0", "w2", "supported", [{"passage": 0, "label": "Supports"}, {"passage": 2, "label": "not support"}]),
    ("c-1", "w1", "contradicted", [{"stance": "refute"}, {"stance": "irrelevant"}, {"stance": "support"}]),
    ("c-1", "w2", "inconclusive", [{"index": 7, "judgement": "support"}, {"index": 0, "judgement": "maybe"}]),
    ("c-2", "w1", "supported", []),
    ("c-2", "w2", "supported", []),
    ("c-3", "w1", "contradicted", [{"index": 1, "judgement": "support", "useful": True}]),
    ("c-3", "w2", "contradicted", []),
    ("c-6", "w1", "supported", [{"index": 2, "judgement": "irrelevant"}]),
    ("c-6", "w2", "contradicted", []),
    ("c-7", "w1", "supported", []),
    ("c-7", "w2", "supported", []),
    ("c-8", "w1", "inconclusive", []),  # a gold item: out of agreement, in the scores
    ("c-8", "w2", "supported", []),
]


@pytest.fixture
def study(db, researcher):
    study = create_study(
        slug="verif-report",
        name="Verification report",
        kind="verification",
        annotators_per_item=2,
        evidence_judgements=True,
    )
    add_members(study=study, usernames=[researcher.username], role="researcher")
    items = [_item(n, gold="supported") if n == 8 else _item(n) for n in range(9)]
    import_items(study=study, stream=jsonl(*items), fmt="jsonl")
    import_annotations(
        study=study,
        stream=jsonl(*({"item": item, "annotator": who, "label": label} for item, who, label, _ in LABELS)),
        fmt="jsonl",
    )
    users = dict(StudyMember.objects.filter(study=study).values_list("pseudonym", "user_id"))
    for item, who, _, judgements in LABELS:
        Annotation.objects.filter(assignment__item__external_id=item, assignment__annotator_id=users[who]).update(
            evidence_judgements=judgements
        )
    return study


def test_gold_items_count_in_agreement_by_default(study):
    """Gold items are real items the annotators labelled: by default they are in agreement too."""
    assert study.gold_in_agreement
    report = build_report(study)
    assert report["gold_in_agreement"] and report["gold_rule"] == GOLD_INCLUDED_RULE
    assert report["agreement"]["n_items"] == 7  # c-0..3, c-6..8: the gold item c-8 too
    assert {d["item"] for d in report["disagreements"]} == {"c-1", "c-6", "c-8"}


def test_gold_items_stay_out_of_agreement_and_disagreements(study):
    """With the study setting off, gold items only score annotators (and the factuality scores)."""
    study.gold_in_agreement = False
    study.save(update_fields=["gold_in_agreement"])
    report = build_report(study)
    assert not report["gold_in_agreement"] and report["gold_rule"] == GOLD_RULE
    assert report["n_items_gold"] == 1
    assert report["agreement"]["n_items"] == 6  # c-0..3, c-6, c-7: not the gold item c-8, not unlabelled ones
    assert {d["item"] for d in report["disagreements"]} == {"c-1", "c-6"}
    assert report["n_annotations"] == len(LABELS)
    human = report["scores"]["human"]
    assert human["n_claims_labelled"] == 7  # the gold item's labels count for its verdict
    assert human["n_claims_without_majority"] == 3  # c-1, c-6, c-8 split 1-1


def test_scores_from_majority_and_gold(study):
    scores = build_report(study)["scores"]
    assert scores["labels"] == {
        "supported": ["supported"],
        "unsupported": ["contradicted", "inconclusive"],
        "excluded": [],
    }
    fact = scores["human"]["factscore"]["per_system"]
    # gpt: r-0 = c-0 S, c-1 none, c-2 S -> 1.0; r-1 = c-3 NS, c-4/c-5 unlabelled -> 0.0
    assert fact["gpt"]["factscore"]["value"] == pytest.approx(0.5)
    assert (fact["gpt"]["supported"], fact["gpt"]["not_supported"], fact["gpt"]["no_verdict"]) == (2, 1, 3)
    # llama: r-2 = c-6 none, c-7 S, c-8 none -> 1.0
    assert fact["llama"]["factscore"]["value"] == 1.0 and fact["llama"]["n_scored"] == 1
    gold = scores["gold"]
    assert gold["n_claims_with_gold"] == 1
    assert gold["factscore"]["per_system"]["llama"]["factscore"]["value"] == 1.0
    assert gold["factscore"]["per_system"]["gpt"]["factscore"]["value"] is None  # no gold claim: undefined


def test_credibility_pools_readable_judgements_and_counts_the_rest(study):
    evidence, unreadable = selectors.evidence_frame(study)
    assert unreadable == 2  # index 7 does not exist; "maybe" is not a verdict
    cred = build_report(study)["scores"]["credibility"]
    # support: c-0 x2, c-1, c-3 = 4; not support: c-0 (w2, passage 2), c-1 refute = 2; irrelevant: 3
    overall = cred["overall"]["value"]
    assert (overall["support"], overall["not_support"], overall["irrelevant"]) == (4, 2, 3)
    assert overall["value"] == pytest.approx(4 / 6)
    assert cred["include_irrelevant"] is False and cred["n_unreadable_judgements"] == 2
    # web = passage 1: c-0 w1 irrelevant, c-1 w1 irrelevant (by position), c-3 w1 support
    assert cred["by_source_type"]["web"] == {
        "support": 1,
        "not_support": 0,
        "irrelevant": 2,
        "denominator": 1,
        "n_judgements": 3,
        "value": 1.0,
        "selected": True,
    }
    assert set(evidence["source_type"]) == set(TYPES)


def test_credibility_counts_irrelevant_when_the_study_says_so(study):
    study.irrelevant_in_credibility = True
    study.save()
    overall = build_report(study)["scores"]["credibility"]["overall"]["value"]
    assert overall["value"] == pytest.approx(4 / 9)


def test_source_types_chosen_through_the_api_and_page(client, researcher, study):
    client.force_login(researcher)
    url = reverse("api-study-report", args=["verif-report"])
    only_news = streamed_json(client.get(url, {"source_type": "news"}))["scores"]["credibility"]
    assert only_news["source_types_included"] == ["news"]
    assert only_news["overall"]["value"]["value"] == pytest.approx(2 / 3)  # news: S c-0 x2, NS c-1
    no_news = streamed_json(client.get(url, {"exclude_source_type": "news,wikipedia"}))["scores"]["credibility"]
    assert no_news["source_types_included"] == ["web"] and no_news["overall"]["value"]["value"] == 1.0
    html = client.get(reverse("metaeval:report", args=["verif-report"]), {"source_type": "news"}).content.decode()
    assert 'name="source_type" value="news" checked' in html
    assert 'name="source_type" value="web">' in html  # offered, not selected


def test_study_without_a_binary_map_says_why_it_has_no_scores(db):
    study = create_study(slug="custom", name="Custom labels", kind="verification", labels=["good", "bad", "ugly"])
    import_items(study=study, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    report = build_report(study, ReportOptions(binary=True))
    assert report["scores"] == {
        "available": False,
        "reason": "the study has no binary map saying which labels count as supported",
    }
    assert report["binary"]["available"] is False and "binary" in report["binary"]["reason"]
    assert report["agreement"]["fleiss_kappa"]["value"] is None and report["agreement"]["fleiss_kappa"]["reason"]


def test_empty_study_page_renders_with_reasons(client, researcher, verification_study):
    client.force_login(researcher)
    response = client.get(reverse("metaeval:report", args=["verif"]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "no human labels yet" in html
    # nothing to compute yet: the agreement sections collapse into one line that says why
    assert "No labels yet: agreement, pairwise kappa, the human ceiling and the disagreement list appear" in html
    assert 'id="pairs"' not in html and 'id="disagreements"' not in html
    chart = client.get(reverse("metaeval:report_chart", args=["verif", "agreement", "svg"]))
    assert chart.status_code == 200 and b"<svg" in chart.content


def test_csv_carries_scores_and_credibility(study):
    rows = list(csv.DictReader(io.StringIO(report_csv(build_report(study)))))
    cred = next(r for r in rows if r["section"] == "credibility" and r["scope"] == "system:all")
    assert float(cred["value"]) == pytest.approx(4 / 6) and "news, web, wikipedia" in cred["note"]
    fact = next(
        r
        for r in rows
        if r["section"] == "scores_human" and r["scope"] == "system:gpt" and r["statistic"] == "factscore"
    )
    assert float(fact["value"]) == pytest.approx(0.5)
    assert any(r["section"] == "scores_gold" and r["statistic"] == "veriscore_k" for r in rows)


def test_binary_agreement_comes_from_the_same_resamples_and_equals_its_own(study, monkeypatch):
    """The collapse's intervals are drawn with the labels' own (one bootstrap), and are what they are alone."""
    import metaeval.stats.summary as summary_module
    from metaeval import stats
    from metaeval.reporting.agreement import agreement_table, binary_collapse

    def no_own_bootstrap(*args, **kwargs):
        raise AssertionError("a summary drew its own resamples")

    with monkeypatch.context() as patched:
        patched.setattr(summary_module, "bootstrap_ci", no_own_bootstrap)
        report = build_report(study, ReportOptions(binary=True))
    table, _ = agreement_table(selectors.label_frame(study, include_gold=True), study)
    mapping, categories = binary_collapse(study)
    collapsed = table.collapse(mapping, categories)
    assert collapsed.item_index.equals(table.item_index)  # no item left without a rating: one bootstrap for both
    alone = stats.agreement_summary(collapsed, n_raters=2, n_resamples=1000, seed=0)
    defined = [name for name in stats.summary_statistics() if alone[name]["value"] is not None]
    assert defined and all(alone[name]["ci"] is not None for name in defined)
    for name in stats.summary_statistics():
        shown = dict(report["binary"][name])
        shown.pop("left_out_causes", None)  # the report's note on Fleiss' kappa
        assert shown == alone[name], name
    assert report["binary"]["collapse"] == mapping


SCORE_KEYS = ("factscore", "veriscore", "ragas_faithfulness", "per_response")


def test_a_reference_that_is_the_human_majority_is_scored_once(study, monkeypatch):
    """Until something is adjudicated the reference is the human majority: the same block, not a second bootstrap."""
    import metaeval.reporting.scores as scores_module

    scored = []
    real = scores_module._score_block

    def counting(claims, *args, **kwargs):
        scored.append(claims["label"].tolist())
        return real(claims, *args, **kwargs)

    monkeypatch.setattr(scores_module, "_score_block", counting)
    scores = build_report(study, ReportOptions())["scores"]
    assert scores["reference"]["rule"] == "adjudicated_else_majority"
    assert len(scored) == 2  # the human majority (also the reference) and the gold labels
    for key in SCORE_KEYS:
        assert scores["reference"][key] == scores["human"][key]
    assert scores["gold"]["factscore"] != scores["human"]["factscore"]  # other labels, another block

    by_gold = build_report(study, ReportOptions(reference="gold"))["scores"]
    for key in SCORE_KEYS:
        assert by_gold["reference"][key] == by_gold["gold"][key]
    assert by_gold["reference"]["factscore"] != by_gold["human"]["factscore"]
