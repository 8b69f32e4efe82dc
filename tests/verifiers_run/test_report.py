"""verifier_report: each verifier against the human majority, checked against scikit-learn and scipy computed here."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import numpy as np
import pytest
from scipy import stats as scipy_stats
from sklearn.metrics import accuracy_score, balanced_accuracy_score, cohen_kappa_score, f1_score

from annotation.models import Item
from annotation.studies.services import create_study
from metaeval.models import Prediction, Verifier
from metaeval.stats.classification import classification_bootstrap
from metaeval.stats.system_correlation import spearman_rows, tau_b
from metaeval.verifiers.report import verifier_report
from metaeval.verifiers.services import create_verifier, import_predictions
from tests.conftest import jsonl
from tests.verifiers_run.conftest import add_items, add_labels, operator_endpoint

pytestmark = pytest.mark.django_db
LABELS = ["supported", "contradicted", "inconclusive"]
SYSTEMS = ["alpha", "beta", "gamma", "delta"]


def noisy(rng: random.Random, truth: str, keep: float) -> str:
    return truth if rng.random() < keep else rng.choice(LABELS)


@pytest.fixture
def rated(db):
    """120 claims from 4 systems (40 responses), 3 annotators each, and one imported verifier."""
    rng = random.Random(11)
    study = create_study(slug="rated", name="Rated", kind="verification")
    items, labels, predictions, truth = [], [], [], {}
    for s, system in enumerate(SYSTEMS):
        for r in range(10):
            for c in range(3):
                item = f"{system}-r{r}-c{c}"
                truth[item] = rng.choices(LABELS, weights=[0.35 + 0.15 * s, 0.4 - 0.1 * s, 0.25])[0]
                items.append({"id": item, "claim": f"Claim {item}.", "system": system, "response_id": f"{system}-r{r}"})
                labels += [(item, worker, noisy(rng, truth[item], 0.8)) for worker in ("w1", "w2", "w3")]
                predictions.append(
                    {
                        "item": item,
                        "verifier": "judge",
                        "label": noisy(rng, truth[item], 0.6),
                        "rationale": f"because of {item}",
                    }
                )
    add_items(study, items)
    add_labels(study, labels)
    import_predictions(study=study, stream=jsonl(*predictions), fmt="jsonl")
    return study, labels, {p["item"]: p["label"] for p in predictions}


def majorities(labels: list[tuple[str, str, str]]) -> dict[str, str]:
    per_item = defaultdict(list)
    for item, _, label in labels:
        per_item[item].append(label)
    out = {}
    for item, given in per_item.items():
        label, n = Counter(given).most_common(1)[0]
        if 2 * n > len(given):
            out[item] = label
    return out


def test_metrics_match_scikit_learn_on_the_same_items(rated):
    study, labels, predicted = rated
    section = verifier_report(study, n_resamples=200)["judge"]
    majority = majorities(labels)
    items = [item for item in predicted if item in majority]
    y_true, y_pred = [majority[i] for i in items], [predicted[i] for i in items]
    assert section["n"] == len(items) and section["coverage"]["value"] == 1.0
    assert section["accuracy"]["value"] == pytest.approx(accuracy_score(y_true, y_pred))
    assert section["balanced_accuracy"]["value"] == pytest.approx(balanced_accuracy_score(y_true, y_pred))
    assert section["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(y_true, y_pred, labels=LABELS))
    assert section["macro_f1"]["value"] == pytest.approx(f1_score(y_true, y_pred, average="macro"))
    for name in ("accuracy", "balanced_accuracy", "cohen_kappa", "macro_f1"):
        low, high = section[name]["ci"]
        assert low <= section[name]["value"] <= high and low < high
    confusion = section["confusion"]
    assert confusion["labels"] == LABELS and sum(map(sum, confusion["matrix"])) == len(items)
    assert section["per_class"]["supported"]["support"] == y_true.count("supported")
    assert section["reference"].startswith("human labels")


def test_disagreements_list_exactly_the_items_where_the_verifier_departs_from_the_majority(rated):
    study, labels, predicted = rated
    section = verifier_report(study, n_resamples=0, disagreements_limit=1000)["judge"]
    majority = majorities(labels)
    expected = {item for item, label in predicted.items() if item in majority and majority[item] != label}
    assert {row["item"] for row in section["disagreements"]} == expected
    assert section["n_disagreements"] == len(expected)
    row = section["disagreements"][0]
    assert row["verifier_label"] == predicted[row["item"]] and row["human_majority"] == majority[row["item"]]
    assert row["rationale"] == f"because of {row['item']}"
    assert len(verifier_report(study, n_resamples=0, disagreements_limit=3)["judge"]["disagreements"]) == 3


def test_the_human_ceiling_sits_beside_the_verifier(rated):
    study, _, _ = rated
    ceiling = verifier_report(study, n_resamples=0)["judge"]["human_ceiling"]
    assert ceiling["reason"] is None
    assert [entry["annotator"] for entry in ceiling["annotators"]] == ["w1", "w2", "w3"]
    human, machine = ceiling["human"]["cohen_kappa"]["value"], ceiling["verifier"]["cohen_kappa"]["value"]
    assert 0 < machine < human < 1  # 80% vs 60% faithful labels


def test_system_level_correlation_matches_scipy(rated):
    study, labels, predicted = rated
    section = verifier_report(study, n_resamples=300)["judge"]["system_correlation"]
    majority = majorities(labels)
    positive = {"supported": 1.0, "contradicted": 0.0, "inconclusive": 0.0}
    scores = {}
    for source in ("human", "verifier"):
        per_response = defaultdict(list)
        for item in predicted:
            label = majority.get(item) if source == "human" else predicted[item]
            if label is not None:
                per_response[item.rsplit("-", 1)[0]].append(positive[label])
        scores[source] = [
            round(np.mean([np.mean(v) for k, v in per_response.items() if k.startswith(system)]), 12)
            for system in sorted(SYSTEMS)
        ]
    assert [row["system"] for row in section["systems"]] == sorted(SYSTEMS)
    assert [row["human"] for row in section["systems"]] == pytest.approx(scores["human"])
    tau = scipy_stats.kendalltau(scores["human"], scores["verifier"]).statistic
    rho = scipy_stats.spearmanr(scores["human"], scores["verifier"]).statistic
    assert scores["verifier"][0] == scores["verifier"][1]  # alpha and beta tie at 14/30: tau-b, not tau-a
    assert section["kendall_tau"]["value"] == pytest.approx(tau)
    assert section["spearman"]["value"] == pytest.approx(rho)
    assert section["kendall_tau"]["ci"] is not None and section["n_systems"] == 4


def test_fewer_than_three_systems_give_no_correlation_and_say_why(claims_study):
    add_labels(claims_study, [("c1", "w1", "supported"), ("c2", "w1", "contradicted")])
    import_predictions(
        study=claims_study, stream=jsonl({"item": "c1", "verifier": "v", "label": "supported"}), fmt="jsonl"
    )
    section = verifier_report(claims_study, n_resamples=10)["v"]
    assert section["system_correlation"]["kendall_tau"]["value"] is None
    assert "at least 3 systems" in section["system_correlation"]["reason"]
    assert section["human_ceiling"]["reason"].startswith("the human ceiling needs items with at least two human labels")
    assert section["coverage"]["value"] == 0.5


def test_rates_tokens_cost_and_the_latest_prediction_per_item(claims_study):
    add_labels(claims_study, [(f"c{n}", "w1", "supported") for n in range(1, 7)])
    verifier = create_verifier(
        study=claims_study,
        name="llm",
        preset="veriscore_ternary",
        model="m",
        endpoint=operator_endpoint("http://127.0.0.1:9/v1"),
        price_input_per_1k="2",
        price_output_per_1k="10",
    )
    items = {item.external_id: item for item in Item.objects.filter(study=claims_study)}
    rows = [
        ("c1", "supported", "ok", ""),
        ("c2", "supported", "fallback", ""),
        ("c3", "contradicted", "ok", ""),
        ("c4", None, "unparseable", ""),
        ("c5", None, "", "HTTP 500 error"),
        ("c6", "supported", "ok", ""),
    ]
    for item, label, status, error in rows:
        Prediction.objects.create(
            verifier=verifier,
            item=items[item],
            label=label,
            parse_status=status,
            error=error,
            cache_key="old",
            tokens_in=1000,
            tokens_out=100,
        )
    Prediction.objects.create(
        verifier=verifier,
        item=items["c6"],
        label="inconclusive",
        parse_status="ok",
        cache_key="new",
        tokens_in=500,
        tokens_out=50,
    )  # the verifier as it is now
    section = verifier_report(claims_study, n_resamples=0)["llm"]
    assert section["n_predictions"] == 6 and section["n"] == 4
    assert section["parse_failure_rate"]["value"] == pytest.approx(1 / 5)
    assert section["error_rate"]["value"] == pytest.approx(1 / 6)
    assert section["tokens"] == {"in": 5500, "out": 550}
    assert section["estimated_cost"] == pytest.approx(5.5 * 2 + 0.55 * 10)
    assert section["accuracy"]["value"] == pytest.approx(2 / 4)  # c6 counts as inconclusive
    assert section["coverage"]["value"] == pytest.approx(4 / 6)


def test_gold_labels_are_the_reference_when_nobody_labelled(db):
    study = create_study(slug="goldref", name="G", kind="verification")
    add_items(
        study, [{"id": f"g{n}", "claim": "c", "gold": "supported" if n % 2 else "contradicted"} for n in range(6)]
    )
    import_predictions(
        study=study,
        stream=jsonl(*({"item": f"g{n}", "verifier": "v", "label": "supported"} for n in range(6))),
        fmt="jsonl",
    )
    section = verifier_report(study, n_resamples=0)["v"]
    assert section["reference"].startswith("gold labels") and section["accuracy"]["value"] == 0.5
    assert section["cohen_kappa"]["value"] == 0.0


def test_without_any_reference_every_number_is_undefined_with_a_reason(claims_study):
    Verifier.objects.create(study=claims_study, name="lonely", kind="baseline_majority")
    section = verifier_report(claims_study)["lonely"]
    assert section["accuracy"] == {
        "value": None,
        "reason": "the study has no human labels and no gold labels to compare with",
        "n_items": 0,
        "ci": None,
    }
    assert section["error_rate"]["value"] is None and section["n"] == 0
    assert verifier_report(create_study(slug="none", name="N", kind="verification")) == {}


def test_tau_b_and_spearman_rows_equal_scipy_with_ties():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 4, size=(50, 6)).astype(float)
    y = rng.integers(0, 4, size=(50, 6)).astype(float)
    ours_tau, ours_rho = tau_b(x, y), spearman_rows(x, y)
    for row in range(50):
        expected_tau = scipy_stats.kendalltau(x[row], y[row]).statistic
        if np.isnan(expected_tau):
            assert np.isnan(ours_tau[row])
        else:
            assert ours_tau[row] == pytest.approx(expected_tau)
            assert ours_rho[row] == pytest.approx(scipy_stats.spearmanr(x[row], y[row]).statistic)


def test_classification_bootstrap_equals_a_plain_loop():
    rng = np.random.default_rng(3)
    y_true, y_pred = rng.integers(0, 3, 80), rng.integers(0, 3, 80)
    intervals = classification_bootstrap(y_true, y_pred, 3, n_resamples=300, seed=9)
    draws = np.random.default_rng(9).integers(0, 80, size=(300, 80))
    kappas = [cohen_kappa_score(y_true[d], y_pred[d], labels=[0, 1, 2]) for d in draws]
    accuracies = [accuracy_score(y_true[d], y_pred[d]) for d in draws]
    assert intervals["cohen_kappa"]["ci"] == pytest.approx(tuple(np.quantile(kappas, [0.025, 0.975])))
    assert intervals["accuracy"]["ci"] == pytest.approx(tuple(np.quantile(accuracies, [0.025, 0.975])))
    assert classification_bootstrap(y_true[:1], y_pred[:1], 3) == {}
