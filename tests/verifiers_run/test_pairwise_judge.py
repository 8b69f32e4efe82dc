"""The pairwise judge end to end: the loopback server judges the real factscore-pref items in both orders,
and the report sets its agreement with the seeded human judgements beside the human ceiling.

Every expected number is computed here from the records (tests/support/factscore_pref.py) with
scikit-learn and scipy, never from Claimlab's own output.
"""

from __future__ import annotations

import io
from collections import Counter
from datetime import timedelta

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score

from annotation.errors import ServiceError
from annotation.models import Item
from metaeval.models import Prediction, Verifier
from metaeval.reporting import ReportOptions, build_report
from metaeval.reporting.csv_format import report_csv
from metaeval.reporting.html_format import report_html
from metaeval.verifiers.runner.orchestration import dry_run_prompt, run_chunk, run_to_completion
from metaeval.verifiers.runner.outcomes import combine_orders, pair_label
from metaeval.verifiers.services import create_verifier, resume_stale_runs, start_run
from metaeval.verifiers.services.verifiers import VerifierInvalid
from tests.support.factscore_pref import (
    SYSTEMS,
    demo_items,
    expected_order_labels,
    human_records,
    judge_answer,
    make_study,
    record_label,
)
from tests.verifiers_run.conftest import llm_verifier

pytestmark = pytest.mark.django_db
THREE = {"a_strong": "a", "a_slight": "a", "tie": "tie", "b_slight": "b", "b_strong": "b"}


def strict_majority(labels: list[str]) -> str | None:
    (top, count), *_ = Counter(labels).most_common(1)
    return top if 2 * count > len(labels) else None


@pytest.fixture
def judged(researcher, fake_server):
    fake_server.answer = judge_answer
    study = make_study(researcher=researcher)
    judge = llm_verifier(study, fake_server.base_url, name="judge", preset="pairwise_judge", concurrency=4)
    run = run_to_completion(start_run(verifier=judge, enqueue=False))
    return study, judge, run, fake_server


def test_each_item_is_asked_in_both_orders_and_combined_in_system_space(judged):
    _study, judge, run, server = judged
    items = {item["id"]: item for item in demo_items()}
    assert (run.status, run.done, run.total, run.errors, run.unparseable) == ("succeeded", 120, 120, 0, 0)
    assert server.requests == 240  # two orders per item
    predictions = {p.item.external_id: p for p in Prediction.objects.filter(verifier=judge).select_related("item")}
    for item_id, item in items.items():
        first, second = expected_order_labels(item)
        found = predictions[item_id]
        assert found.order_labels == [first, second], item_id
        assert found.label == combine_orders([first, second])
    equal = [
        item_id for item_id, item in items.items() if len(item["lists"][SYSTEMS[0]]) == len(item["lists"][SYSTEMS[1]])
    ]
    assert equal and all(predictions[item_id].label == "tie" for item_id in equal)  # the bias cancels out


def test_a_rerun_asks_nothing_again(judged):
    _study, judge, _run, server = judged
    before = server.requests
    again = run_to_completion(start_run(verifier=judge, enqueue=False))
    assert (again.status, again.cached, server.requests) == ("succeeded", 120, before)


def test_the_report_has_the_judge_beside_the_human_ceiling_matching_sklearn(judged):
    study, _judge, _run, _ = judged
    items = {item["id"]: item for item in demo_items()}
    by_item: dict[str, list[str]] = {}
    for record in human_records(demo_items()):
        by_item.setdefault(record["item"], []).append(record_label(record))
    judge_label = {item_id: combine_orders(list(expected_order_labels(item))) for item_id, item in items.items()}

    report = build_report(study, ReportOptions(n_resamples=200))
    section = report["pairwise_judges"]["judge"]
    agreement = section["agreement"]

    majority5 = {i: strict_majority(labels) for i, labels in by_item.items()}
    used5 = [i for i, m in majority5.items() if m is not None]
    kappa5 = cohen_kappa_score([majority5[i] for i in used5], [judge_label[i] for i in used5], labels=list(THREE))
    assert agreement["five_point"]["n_items"] == len(used5)
    assert agreement["five_point"]["cohen_kappa"]["value"] == pytest.approx(kappa5, abs=1e-12)
    low, high = agreement["five_point"]["cohen_kappa"]["ci"]
    assert low < kappa5 < high

    majority3 = {i: strict_majority([THREE[label] for label in labels]) for i, labels in by_item.items()}
    used3 = [i for i, m in majority3.items() if m is not None]
    kappa3 = cohen_kappa_score(
        [majority3[i] for i in used3], [THREE[judge_label[i]] for i in used3], labels=["a", "tie", "b"]
    )
    assert agreement["three_way"]["cohen_kappa"]["value"] == pytest.approx(kappa3, abs=1e-12)
    decisive = [i for i in used3 if majority3[i] != "tie"]
    accuracy = np.mean([THREE[judge_label[i]] == majority3[i] for i in decisive])
    assert agreement["non_tie_accuracy"]["n_items"] == len(decisive)
    assert agreement["non_tie_accuracy"]["value"] == pytest.approx(accuracy, abs=1e-12)
    assert agreement["non_tie_accuracy"]["ci"] is not None

    # The human ceiling: each annotator against the majority of the other two (3-way), the judge on the same items.
    humans, judged_acc = [], []
    for worker_index in range(3):
        hits, judge_hits = [], []
        for item_id, labels in by_item.items():
            others = [THREE[label] for n, label in enumerate(labels) if n != worker_index]
            major = strict_majority(others)
            if major is None:
                continue
            hits.append(THREE[labels[worker_index]] == major)
            judge_hits.append(THREE[judge_label[item_id]] == major)
        humans.append(np.mean(hits))
        judged_acc.append(np.mean(judge_hits))
    ceiling = agreement["ceiling"]["three_way"]
    assert ceiling["human"]["accuracy"]["value"] == pytest.approx(np.mean(humans), abs=1e-12)
    assert ceiling["judge"]["accuracy"]["value"] == pytest.approx(np.mean(judged_acc), abs=1e-12)

    # Position: inconsistent exactly on the equal-length items; List 1 preferred by every verdict there.
    equal = [i for i, item in items.items() if len(item["lists"][SYSTEMS[0]]) == len(item["lists"][SYSTEMS[1]])]
    position = section["position"]
    assert position["position_inconsistency"]["value"] == pytest.approx(len(equal) / 120)
    decisive_verdicts = 2 * 120  # the rule never says tie: every single-order verdict prefers a list
    list_1 = len(equal) * 2 + (120 - len(equal))  # unequal items: the longer list is List 1 in one order of two
    assert position["list_1_preferred"]["value"] == pytest.approx(list_1 / decisive_verdicts)
    assert position["list_1_preferred"]["p_value"] == pytest.approx(binomtest(list_1, decisive_verdicts).pvalue)

    domains = set(Item.objects.filter(study=study).values_list("domain", flat=True))
    assert set(section["by_domain"]) == domains and len(domains) > 1
    for domain, block in section["by_domain"].items():
        in_domain = [i for i in used5 if items[i]["domain"] == domain]
        if len(in_domain) >= 2 and len({majority5[i] for i in in_domain} | {judge_label[i] for i in in_domain}) > 1:
            expected = cohen_kappa_score(
                [majority5[i] for i in in_domain], [judge_label[i] for i in in_domain], labels=list(THREE)
            )
            assert block["five_point"]["cohen_kappa"]["value"] == pytest.approx(expected, abs=1e-12), domain

    lines = [line.split(",") for line in report_csv(report).splitlines()]
    kappa_line = next(line for line in lines if line[:3] == ["pairwise_judge", "judge:judge", "cohen_kappa_5point"])
    assert float(kappa_line[3]) == pytest.approx(kappa5, abs=1e-9)
    page = report_html(study, report)
    assert (
        'id="pairwise-judges"' in page
        and "Human ceiling" in page
        and "List 1 preferred" in page
        and "Position inconsistency" in page
    )


def test_orders_map_back_to_systems():
    assert pair_label("left_strong", swapped=False) == "a_strong"
    assert pair_label("left_strong", swapped=True) == "b_strong"
    assert pair_label("right_slight", swapped=True) == "a_slight"
    assert pair_label("tie", swapped=True) == "tie"
    assert combine_orders(["a_strong", "b_strong"]) == "tie"
    assert combine_orders(["a_strong", "a_slight"]) == "a_strong"
    assert combine_orders(["a_slight", "tie"]) == "a_slight"
    assert combine_orders(["b_strong", "tie"]) == "b_slight"


def test_unreadable_order_makes_the_item_unparseable_not_half_judged(researcher, fake_server):
    study = make_study(researcher=researcher, with_labels=False)
    judge = llm_verifier(study, fake_server.base_url, name="judge", preset="pairwise_judge")
    fake_server.answer = lambda prompt: "Tie" if prompt.count("\n") % 2 else "No idea."
    run = run_to_completion(start_run(verifier=judge, enqueue=False, limit=10))
    for prediction in Prediction.objects.filter(verifier=judge):
        if None in prediction.order_labels:
            assert (prediction.label, prediction.parse_status) == (None, "unparseable")
        else:
            assert prediction.label == "tie"
    assert 0 < run.unparseable == Prediction.objects.filter(verifier=judge, label=None).count() < 10


def test_the_dry_run_shows_both_orders_without_system_names(researcher):
    study = make_study(researcher=researcher, with_labels=False)
    judge = create_verifier(
        study=study, name="judge", preset="pairwise_judge", model="m", base_url="", endpoint=_endpoint()
    )
    item, requests, key = dry_run_prompt(judge)
    assert item is not None and len(requests) == 2 and key
    first, second = (request[-1]["content"] for request in requests)
    a, b = item.payload["lists"][SYSTEMS[0]], item.payload["lists"][SYSTEMS[1]]
    assert first.index("List 1:\n1. " + a[0]) < first.index("List 2:\n1. " + b[0])
    assert second.index("List 1:\n1. " + b[0]) < second.index("List 2:\n1. " + a[0])
    for name in SYSTEMS:
        assert name not in first and name not in second


def _endpoint() -> str:
    from tests.verifiers_run.conftest import operator_endpoint

    return operator_endpoint("http://127.0.0.1:9/v1")


def test_preference_studies_take_only_the_pairwise_judge_and_verification_studies_never(researcher, claims_study):
    study = make_study(researcher=researcher, with_labels=False)
    with pytest.raises(ServiceError, match="pairwise_judge"):
        create_verifier(study=study, name="v", preset="veriscore_ternary", model="m", endpoint=_endpoint())
    with pytest.raises(VerifierInvalid, match="preference studies"):
        create_verifier(study=claims_study, name="p", preset="pairwise_judge", model="m", endpoint=_endpoint())


def test_the_verifiers_page_of_a_preference_study_adds_a_pairwise_judge(client, researcher, claims_study):
    study = make_study(researcher=researcher, with_labels=False)
    client.force_login(researcher)
    url = reverse("verifiers:list", args=[study.slug])
    page = client.get(url).content.decode()
    assert 'id="pairwise-judge-form"' in page and "List 1" in page
    assert 'id="pairwise-judge-form"' not in client.get(reverse("verifiers:list", args=["claims"])).content.decode()
    add = reverse("verifiers:add_pairwise_judge", args=[study.slug])
    fields = {"name": "judge-4o", "model": "m", "endpoint": _endpoint(), "temperature": 0, "max_tokens": 256}
    fields |= {"concurrency": 2, "timeout": 30, "retries": 1, "preset": "veriscore_ternary"}  # a tampered preset
    response = client.post(add, fields)
    assert response.status_code == 302
    judge = Verifier.objects.get(study=study)
    assert (judge.name, judge.preset, judge.max_tokens) == ("judge-4o", "pairwise_judge", 256)
    refused = client.post(add, {**fields, "model": ""})
    assert refused.status_code == 400 and "This field is required" in refused.content.decode()
    assert Verifier.objects.filter(study=study).count() == 1
    assert client.post(reverse("verifiers:add_pairwise_judge", args=["claims"]), fields).status_code == 400


def test_the_command_runs_the_judge_and_its_dry_run_shows_both_orders(researcher, fake_server):
    fake_server.answer = judge_answer
    study = make_study(researcher=researcher, with_labels=False)
    llm_verifier(study, fake_server.base_url, name="judge", preset="pairwise_judge")
    out = io.StringIO()
    call_command("run_verifier", study.slug, "judge", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "## request 1 of 2 (one per order of the two lists)" in text and "## request 2 of 2" in text
    assert fake_server.requests == 0
    call_command("run_verifier", study.slug, "judge", "--limit", "5", stdout=io.StringIO(), stderr=io.StringIO())
    assert Prediction.objects.filter(verifier__name="judge").exclude(label=None).count() == 5
    assert fake_server.requests == 10


def test_a_run_cut_off_after_one_chunk_resumes_without_asking_twice(researcher, fake_server, settings):
    settings.VERIFIER_CHUNK_SIZE = 30
    fake_server.answer = judge_answer
    study = make_study(researcher=researcher, with_labels=False)
    judge = llm_verifier(study, fake_server.base_url, name="judge", preset="pairwise_judge")
    run = start_run(verifier=judge, enqueue=False)
    first = run_chunk(run.pk, run.generation)
    assert (first.items, first.more, fake_server.requests) == (30, True, 60)
    # The worker dies here; recovery resumes the run under a new generation.
    assert [resumed.pk for resumed in resume_stale_runs(older_than=timedelta(0))] == [run.pk]
    assert run_chunk(run.pk, run.generation).ran is False  # the old chain of tasks stops
    done = run_to_completion(run)
    assert (done.status, done.done, done.errors) == ("succeeded", 120, 0)
    assert fake_server.requests == 240  # every item asked once, in both orders
    assert Prediction.objects.filter(verifier=judge).count() == 120
    assert not Prediction.objects.filter(verifier=judge, order_labels=[]).exists()
