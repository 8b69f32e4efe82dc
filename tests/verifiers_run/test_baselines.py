"""The two baselines that need no LLM: pure functions, and runs that work end to end offline."""

from __future__ import annotations

import pytest

from annotation.errors import ServiceError
from annotation.studies.services import create_study
from metaeval.models import Prediction
from metaeval.verifiers.presets.baselines import content_words, default_sides, majority_label, overlap_score
from metaeval.verifiers.runner.orchestration import run_to_completion
from metaeval.verifiers.services import create_verifier, ensure_baselines, start_run
from metaeval.verifiers.tasks import run_verifier_chunk
from tests.verifiers_run.conftest import add_items, add_labels

pytestmark = pytest.mark.django_db


def test_content_words_drop_function_words_and_keep_numbers():
    assert content_words("The Eiffel Tower was finished in 1889, not 1890!") == {
        "eiffel",
        "tower",
        "finished",
        "1889",
        "1890",
    }


@pytest.mark.parametrize(
    ("claim", "evidence", "share"),
    [
        ("Marie Curie won two Nobel Prizes.", ["Curie received the Nobel Prize twice: physics and chemistry."], 2 / 6),
        ("Marie Curie won two Nobel Prizes.", ["Marie Curie won", "two Nobel Prizes"], 1.0),
        ("It was.", ["Anything at all"], 0.0),  # no content word in the claim
        ("Paris is big.", [], 0.0),
    ],
)
def test_overlap_is_the_share_of_claim_words_found(claim, evidence, share):
    assert overlap_score(claim, evidence) == pytest.approx(share)


def test_majority_label_breaks_ties_by_declared_order():
    order = ["supported", "contradicted", "inconclusive"]
    assert majority_label(["contradicted", "supported", "contradicted"], order) == ("contradicted", 2, 3)
    assert majority_label(["inconclusive", "contradicted"], order) == ("contradicted", 1, 2)
    assert majority_label([], order) is None


def test_overlap_sides_come_from_the_binary_map():
    labels = ["supported", "partially_supported", "not_supported"]
    binary = {"supported": "positive", "partially_supported": "negative", "not_supported": "negative"}
    assert default_sides(labels, binary) == ("supported", "not_supported")
    assert default_sides(["yes", "no"], {}) == ("yes", "no")


def test_majority_baseline_predicts_the_most_frequent_human_label_everywhere(claims_study):
    add_labels(
        claims_study,
        [
            ("c1", "w1", "contradicted"),
            ("c2", "w1", "contradicted"),
            ("c3", "w1", "supported"),
            ("c1", "w2", "inconclusive"),
        ],
    )
    majority, _ = ensure_baselines(study=claims_study)
    run = run_to_completion(start_run(verifier=majority, enqueue=False))
    predictions = Prediction.objects.filter(verifier=majority)
    assert (run.status, run.done, run.total) == ("succeeded", 6, 6)
    assert set(predictions.values_list("label", flat=True)) == {"contradicted"}  # 2 of the 4 labels
    assert (
        predictions.first().rationale == "always the most frequent of the study's human labels: contradicted (2 of 4)"
    )
    assert run.params["majority_source"] == "human labels"


def test_majority_baseline_falls_back_to_gold_and_refuses_without_any_label(db):
    study = create_study(slug="gold", name="Gold", kind="verification")
    add_items(
        study,
        [{"id": f"g{n}", "claim": f"Claim {n}.", "gold": "inconclusive" if n < 3 else "supported"} for n in range(5)],
    )
    verifier = create_verifier(study=study, name="maj", kind="baseline_majority")
    run_to_completion(start_run(verifier=verifier, enqueue=False))
    assert set(Prediction.objects.filter(verifier=verifier).values_list("label", flat=True)) == {"inconclusive"}
    bare = create_study(slug="bare", name="Bare", kind="verification")
    add_items(bare, [{"id": "b1", "claim": "Claim."}])
    with pytest.raises(ServiceError, match="no human labels and no gold labels"):
        start_run(verifier=create_verifier(study=bare, name="maj", kind="baseline_majority"), enqueue=False)


def test_overlap_baseline_labels_by_threshold_and_keeps_the_score(db):
    study = create_study(
        slug="wice-like",
        name="W",
        kind="verification",
        labels=["supported", "partially_supported", "not_supported"],
        binary_map={"supported": "positive", "partially_supported": "negative", "not_supported": "negative"},
    )
    add_items(
        study,
        [
            {
                "id": "match",
                "claim": "Ada Lovelace wrote the first program.",
                "evidence": [
                    {"text": "Lovelace wrote what is called the first program."},
                    {"text": "Ada was born in 1815."},
                ],
            },
            {
                "id": "half",
                "claim": "Ada Lovelace wrote the first program.",
                "evidence": [{"text": "Ada Lovelace was born."}],
            },
            {"id": "none", "claim": "Ada Lovelace wrote the first program."},
        ],
    )
    verifier = create_verifier(study=study, name="overlap", kind="baseline_overlap", options={"threshold": 0.5})
    result = run_verifier_chunk.call(start_run(verifier=verifier, enqueue=False).pk, 0)  # the worker's path, offline
    assert result["status"] == "succeeded" and result["asked"] == 0
    found = {p.item.external_id: p for p in Prediction.objects.filter(verifier=verifier).select_related("item")}
    assert (found["match"].label, found["match"].score) == ("supported", 1.0)
    assert (found["half"].label, found["half"].score) == ("not_supported", pytest.approx(2 / 5))
    assert (found["none"].label, found["none"].score) == ("not_supported", 0.0)
    assert "not above the threshold of 50%" in found["half"].rationale


def test_a_baseline_rerun_reuses_its_answers_until_the_labels_change(claims_study):
    add_labels(claims_study, [("c1", "w1", "supported")])
    majority, _ = ensure_baselines(study=claims_study)
    run_to_completion(start_run(verifier=majority, enqueue=False))
    again = run_to_completion(start_run(verifier=majority, enqueue=False))
    assert again.cached == 6
    add_labels(claims_study, [("c2", "w1", "inconclusive"), ("c3", "w1", "inconclusive")])
    changed = run_to_completion(start_run(verifier=majority, enqueue=False))
    assert changed.cached == 0 and changed.params["majority_label"] == "inconclusive"
    assert Prediction.objects.filter(verifier=majority).count() == 12  # both answers kept; the report reads the latest
