"""Extra questions: distributions against hand counts, agreement against the ``krippendorff``
package and scikit-learn, per-claim scores against hand counts, FActScore and a simulation.

Real data: Dawid & Skene's anaesthesia ratings (45 patients, 5 observers, a 1-4 scale) for
ordinal agreement, and FActScore's human labels for per-claim scores (tests/data/README.md).
"""

from __future__ import annotations

import itertools
import json

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from metaeval import stats
from metaeval.stats.questions import (
    NO_SHARED_UNIT,
    per_claim_scores,
    question_agreement,
    question_distribution,
)
from tests.datasets import TEST_DATA, read_jsonl

LIKERT = {"key": "confidence", "type": "likert", "scale": [1, 5], "target": "item"}
SINGLE_CLAIM = {"key": "supported", "type": "single", "options": ["yes", "no", "unsure"], "target": "claim"}
MULTI = {"key": "errors", "type": "multi", "options": ["date", "name", "number", "other"], "target": "item"}
NUMBER = {"key": "minutes", "type": "number", "target": "item"}
TEXT = {"key": "comment", "type": "text", "target": "item"}


def _frame(rows, question: str) -> pd.DataFrame:
    """Answers from (item, annotator, target, value[, extra columns]) tuples."""
    df = pd.DataFrame(rows)
    df.insert(2, "question", question)
    return df


def _reliability(df: pd.DataFrame, codes: dict | None = None) -> np.ndarray:
    """annotators x units (item, target) matrix for the ``krippendorff`` package, NaN where missing."""
    values = df["value"].map(codes) if codes is not None else df["value"]
    wide = df.assign(value=values.astype(float)).pivot(index=["item", "target"], columns="annotator", values="value")
    return wide.to_numpy(dtype=float).T


def _seeded_likert(seed: int, n_items: int = 60, annotators=("a", "b", "c", "d"), missing: float = 0.3):
    """Ratings that follow a latent item score, so that agreement is clearly non-zero; some missing."""
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(n_items):
        latent = rng.uniform(1, 5)
        for who in annotators:
            if rng.random() < missing:
                continue
            value = int(np.clip(np.rint(latent + rng.normal(0, 0.9)), 1, 5))
            rows.append({"item": f"i{item}", "annotator": who, "target": "", "value": value})
    return _frame(rows, "confidence")


# --- distributions ---------------------------------------------------------------------


def test_likert_distribution_counts_every_scale_point_overall_and_by_label():
    rows = [
        ("i1", "a", None, 1, "supported"),
        ("i1", "b", None, 1, "supported"),
        ("i2", "a", None, 2, "unsupported"),
        ("i2", "b", None, 4, "supported"),
        ("i3", "a", None, None, "unsupported"),  # unanswered
        ("i3", "b", None, 4.0, None),  # an integral float is a scale point; no label
    ]
    df = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value", "label"]), "confidence")
    out = question_distribution(df, LIKERT, by="label")
    overall = out["overall"]
    assert overall["counts"] == {1: 2, 2: 1, 3: 0, 4: 2, 5: 0}  # unused points 3 and 5 are there, as 0
    assert overall["shares"] == pytest.approx({1: 0.4, 2: 0.2, 3: 0.0, 4: 0.4, 5: 0.0})
    assert (overall["n_answers"], overall["n_unanswered"]) == (5, 1)
    assert overall["mean"] == pytest.approx(12 / 5)
    assert overall["median"] == 2.0
    assert list(out["groups"]) == ["supported", "unsupported"]
    assert out["groups"]["supported"]["counts"] == {1: 2, 2: 0, 3: 0, 4: 1, 5: 0}
    assert out["groups"]["unsupported"]["counts"] == {1: 0, 2: 1, 3: 0, 4: 0, 5: 0}
    assert out["groups"]["unsupported"]["n_unanswered"] == 1
    assert out["n_without_group"] == 1


def test_single_distribution_by_system_reads_the_system_from_claim_targets():
    rows = [
        ("i1", "a", "gpt#0", "yes"),
        ("i1", "a", "gpt#1", "no"),
        ("i1", "a", "llama#0", "yes"),
        ("i2", "a", "gpt#0", "yes"),
        ("i2", "a", "llama#0", "unsure"),
        ("i2", "a", "llama#1", "yes"),
    ]
    df = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "supported")
    out = question_distribution(df, SINGLE_CLAIM, by="system")
    assert out["overall"]["counts"] == {"yes": 4, "no": 1, "unsure": 1}
    assert out["groups"]["gpt"]["counts"] == {"yes": 2, "no": 1, "unsure": 0}
    assert out["groups"]["gpt"]["shares"] == pytest.approx({"yes": 2 / 3, "no": 1 / 3, "unsure": 0.0})
    assert out["groups"]["llama"]["counts"] == {"yes": 2, "no": 0, "unsure": 1}


def test_multi_distribution_counts_answers_that_ticked_each_option():
    rows = [
        ("i1", "a", "", ["date", "name"]),
        ("i1", "b", "", ("name",)),
        ("i2", "a", "", []),  # answered, ticked nothing
        ("i2", "b", "", ["name", "name", "other"]),  # a repeated tick counts once
        ("i3", "a", "", None),  # unanswered
    ]
    df = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "errors")
    block = question_distribution(df, MULTI)["overall"]
    assert block["counts"] == {"date": 1, "name": 3, "number": 0, "other": 1}
    assert block["shares"] == pytest.approx({"date": 0.25, "name": 0.75, "number": 0.0, "other": 0.25})
    assert (block["n_answers"], block["n_unanswered"], block["n_empty"]) == (4, 1, 1)
    assert block["mean_ticked"] == pytest.approx(5 / 4)


def test_number_and_text_distributions():
    numbers = _frame(
        pd.DataFrame(
            [
                ("i1", "a", "", 1.0),
                ("i1", "b", "", 2),
                ("i2", "a", "", 3.5),
                ("i2", "b", "", 4.5),
                ("i3", "a", "", None),
            ],
            columns=["item", "annotator", "target", "value"],
        ),
        "minutes",
    )
    block = question_distribution(numbers, NUMBER)["overall"]
    x = np.array([1.0, 2.0, 3.5, 4.5])
    assert (block["n_answers"], block["n_unanswered"]) == (4, 1)
    assert block["mean"] == pytest.approx(2.75)
    assert block["sd"] == pytest.approx(float(np.std(x, ddof=1)))
    assert block["median"] == pytest.approx(2.75)
    assert (block["q1"], block["q3"]) == pytest.approx((1.75, 3.75))
    assert (block["min"], block["max"]) == (1.0, 4.5)
    texts = _frame(
        pd.DataFrame(
            [("i1", "a", "", "looks fine"), ("i1", "b", "", "   "), ("i2", "a", "", None), ("i2", "b", "", "odd")],
            columns=["item", "annotator", "target", "value"],
        ),
        "comment",
    )
    block = question_distribution(texts, TEXT)["overall"]
    assert block == {"n_answers": 2, "n_unanswered": 2}  # a blank answer is no answer


def test_distribution_of_no_answers_has_no_shares_and_no_mean():
    df = _frame(pd.DataFrame([("i1", "a", "", 3)], columns=["item", "annotator", "target", "value"]), "other")
    block = question_distribution(df, LIKERT)["overall"]
    assert block["n_answers"] == 0
    assert block["counts"] == dict.fromkeys(range(1, 6), 0)
    assert all(share is None for share in block["shares"].values())
    assert block["mean"] is None and block["sd"] is None
    assert question_distribution(df, NUMBER)["overall"]["mean"] is None


# --- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "message"),
    [
        ({"type": "likert", "scale": [1, 5]}, "key"),
        ({"key": "q", "type": "slider"}, "'type' must be one of"),
        ({"key": "q", "type": "likert"}, "scale"),
        ({"key": "q", "type": "likert", "scale": [5, 1]}, "low < high"),
        ({"key": "q", "type": "single", "options": []}, "non-empty list 'options'"),
        ({"key": "q", "type": "multi", "options": ["a", "a"]}, "duplicates"),
        ({"key": "q", "type": "single", "options": ["a"], "target": "sentence"}, "'target' must be one of"),
    ],
)
def test_a_malformed_question_is_a_value_error_naming_it(question, message):
    df = _frame(pd.DataFrame([("i1", "a", "", 1)], columns=["item", "annotator", "target", "value"]), "q")
    with pytest.raises(ValueError, match=message):
        question_distribution(df, question)


@pytest.mark.parametrize(
    ("question", "target", "value", "message"),
    [
        (LIKERT, "", 6, "integers on the scale"),
        (LIKERT, "", 2.5, "integers on the scale"),
        (LIKERT, "", True, "integers on the scale"),
        (MULTI, "", "date", "lists of options"),
        (MULTI, "", ["date", "typo"], "lists of options"),
        (NUMBER, "", float("inf"), "finite numbers"),
        (SINGLE_CLAIM, "gpt#x", "yes", "<system>#<claim index>"),
        (SINGLE_CLAIM, "gpt#0", "maybe", "one of the options"),
        (LIKERT, "gpt", 3, "empty"),
    ],
)
def test_an_answer_that_does_not_fit_the_question_is_a_value_error(question, target, value, message):
    df = pd.DataFrame({"item": ["i1"], "annotator": ["a"], "question": [question["key"]], "target": [target]})
    df["value"] = pd.Series([value], dtype=object)
    with pytest.raises(ValueError, match=message):
        question_distribution(df, question)


def test_agreement_refuses_two_answers_of_one_annotator_on_one_unit():
    df = _frame(
        pd.DataFrame([("i1", "a", "", 3), ("i1", "a", "", 4)], columns=["item", "annotator", "target", "value"]),
        "confidence",
    )
    with pytest.raises(ValueError, match="repeat an"):
        question_agreement(df, LIKERT)


# --- agreement: Krippendorff's alpha against the krippendorff package --------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_likert_alpha_ordinal_and_interval_equal_krippendorff_with_missing(seed):
    df = _seeded_likert(seed)
    out = question_agreement(df, LIKERT, n_resamples=0)
    data = _reliability(df)
    assert np.isnan(data).any()  # missing ratings are part of the test
    for key, level in (("alpha", "ordinal"), ("alpha_interval", "interval")):
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert out[key]["value"] == pytest.approx(expected, abs=1e-9)
        assert out[key]["level"] == level
    assert out["alpha"]["n_items"] == int((np.isfinite(data).sum(axis=0) >= 2).sum())
    assert 0.3 < out["alpha"]["value"] < 0.95  # the latent score shows: not a degenerate case


@pytest.mark.parametrize("seed", [3, 4])
def test_single_alpha_on_claims_equals_krippendorff_nominal(seed):
    """Units are (item, target): each claim is its own unit, with missing judgements."""
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(25):
        for system in ("gpt", "llama"):
            for claim in range(int(rng.integers(1, 6))):
                truth = rng.choice(["yes", "no", "unsure"], p=[0.6, 0.3, 0.1])
                for who in ("a", "b", "c"):
                    if rng.random() < 0.25:
                        continue
                    value = truth if rng.random() < 0.75 else rng.choice(["yes", "no", "unsure"])
                    rows.append((f"i{item}", who, f"{system}#{claim}", value))
    df = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "supported")
    out = question_agreement(df, SINGLE_CLAIM, n_resamples=0)
    expected = krippendorff.alpha(
        reliability_data=_reliability(df, {"yes": 0, "no": 1, "unsure": 2}), level_of_measurement="nominal"
    )
    assert out["alpha"]["value"] == pytest.approx(expected, abs=1e-9)
    assert out["level"] == "nominal"
    assert out["n_units"] == df[["item", "target"]].drop_duplicates().shape[0]


def test_number_alpha_equals_krippendorff_interval_with_missing():
    rng = np.random.default_rng(7)
    rows = []
    for item in range(50):
        true = rng.normal(100.0, 15.0)  # far from 0: the moments must not lose precision
        for who in ("a", "b", "c", "d"):
            if rng.random() < 0.35:
                continue
            rows.append((f"i{item}", who, "", float(true + rng.normal(0, 8.0))))
    rows.append(("lonely", "a", "", 1e6))  # a unit with one answer is not pairable and changes nothing
    df = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "minutes")
    out = question_agreement(df, NUMBER, n_resamples=0)
    expected = krippendorff.alpha(reliability_data=_reliability(df), level_of_measurement="interval")
    assert out["alpha"]["value"] == pytest.approx(expected, abs=1e-9)
    paired = int((np.isfinite(_reliability(df)).sum(axis=0) >= 2).sum())
    assert out["alpha"]["n_items"] == out["n_units_paired"] == paired < out["n_units"]
    without = question_agreement(df.loc[df["item"] != "lonely"], NUMBER, n_resamples=0)
    assert without["alpha"]["value"] == pytest.approx(out["alpha"]["value"], abs=1e-12)


def test_multi_alpha_per_option_equals_krippendorff_on_the_ticked_indicator():
    rng = np.random.default_rng(11)
    rows = []
    for item in range(40):
        true = {o for o in MULTI["options"] if rng.random() < 0.3}
        for who in ("a", "b", "c"):
            if rng.random() < 0.2:
                continue
            ticked = [o for o in MULTI["options"] if (o in true) != (rng.random() < 0.15)]
            rows.append((f"i{item}", who, "", ticked))
    df = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "errors")
    out = question_agreement(df, MULTI, n_resamples=0)
    assert set(out["per_option"]) == set(MULTI["options"])
    for option in MULTI["options"]:
        indicator = df.assign(value=[float(option in v) for v in df["value"]])
        expected = krippendorff.alpha(reliability_data=_reliability(indicator), level_of_measurement="nominal")
        assert out["per_option"][option]["alpha"]["value"] == pytest.approx(expected, abs=1e-9)


@pytest.fixture(scope="module")
def anaesthesia() -> pd.DataFrame:
    """Dawid & Skene's ratings as likert answers; observer 1 rated each patient three times: the first counts."""
    raw = pd.read_csv(TEST_DATA / "dawid_skene_1979" / "anaesthesia.csv")
    first = raw.drop_duplicates(["patient", "observer"], keep="first")
    return pd.DataFrame(
        {
            "item": first["patient"],
            "annotator": first["observer"],
            "question": "severity",
            "target": None,
            "value": first["rating"],
        }
    )


SEVERITY = {"key": "severity", "type": "likert", "scale": [1, 4], "target": "item"}


def test_real_ordinal_ratings_alpha_and_weighted_kappa_equal_the_reference_packages(anaesthesia):
    out = question_agreement(anaesthesia, SEVERITY, n_resamples=200, min_shared_units=10)
    assert (out["n_units"], out["n_annotators"], out["n_answers"]) == (45, 5, 225)
    data = anaesthesia.pivot(index="item", columns="annotator", values="value").to_numpy(dtype=float).T
    for key, level in (("alpha", "ordinal"), ("alpha_interval", "interval")):
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert out[key]["value"] == pytest.approx(expected, abs=1e-9)
        low, high = out[key]["ci"]
        assert low < out[key]["value"] < high
    wide = anaesthesia.pivot(index="item", columns="annotator", values="value")
    assert len(out["pairwise_cohen_kappa"]) == 10
    for pair in out["pairwise_cohen_kappa"]:
        a, b = pair["annotators"]
        for weights in ("quadratic", "linear"):
            expected = cohen_kappa_score(wide[a], wide[b], weights=weights, labels=[1, 2, 3, 4])
            assert pair[weights] == pytest.approx(expected, abs=1e-12)
    for weights in ("quadratic", "linear"):
        mean = out[f"mean_cohen_kappa_{weights}"]
        assert mean["value"] == pytest.approx(np.mean([p[weights] for p in out["pairwise_cohen_kappa"]]), abs=1e-12)
        assert mean["ci"][0] < mean["value"] < mean["ci"][1]
    # the quadratic weights forgive near misses on this scale more than the linear ones
    assert out["mean_cohen_kappa_quadratic"]["value"] > out["mean_cohen_kappa_linear"]["value"]


def test_weighted_kappa_equals_sklearn_over_the_full_scale_and_leaves_out_sparse_pairs():
    df = _seeded_likert(5, n_items=50, annotators=("a", "b", "c"), missing=0.1)
    # "sparse" rated only 6 items: it shares fewer than 10 units with anyone
    sparse = df.loc[df["annotator"] == "a"].head(6).assign(annotator="sparse")
    df = pd.concat([df, sparse], ignore_index=True)
    out = question_agreement(df, LIKERT, n_resamples=0, min_shared_units=10)
    wide = df.pivot(index="item", columns="annotator", values="value")
    in_mean = {w: [] for w in ("quadratic", "linear")}
    for pair in out["pairwise_cohen_kappa"]:
        a, b = pair["annotators"]
        both = wide[[a, b]].dropna()
        assert pair["n"] == len(both)
        for weights in ("quadratic", "linear"):
            expected = cohen_kappa_score(both[a], both[b], weights=weights, labels=[1, 2, 3, 4, 5])
            assert pair[weights] == pytest.approx(expected, abs=1e-12)
            if pair["in_mean"]:
                in_mean[weights].append(pair[weights])
        assert pair["in_mean"] == (pair["n"] >= 10)
        assert pair["in_mean"] == ("sparse" not in pair["annotators"])
    for weights in ("quadratic", "linear"):
        mean = out[f"mean_cohen_kappa_{weights}"]
        assert mean["value"] == pytest.approx(np.mean(in_mean[weights]), abs=1e-12)
        assert mean["n_pairs"] == 3 and mean["n_pairs_too_few_shared"] == 3


# --- agreement: the bootstrap over items --------------------------------------------------


def test_item_question_interval_is_the_existing_bootstrap_over_items():
    """One unit per item: the cluster bootstrap draws what ``stats.bootstrap_ci`` draws."""
    df = _seeded_likert(8)
    out = question_agreement(df, LIKERT, n_resamples=300, seed=4)
    table = stats.build_table(df.rename(columns={"value": "label"}), [1, 2, 3, 4, 5])
    ref = stats.bootstrap_ci(
        table, ["krippendorff_alpha_ordinal", "krippendorff_alpha_interval"], n_resamples=300, seed=4
    )
    assert out["alpha"]["ci"] == pytest.approx(list(ref["krippendorff_alpha_ordinal"]["ci"]), abs=1e-12)
    assert out["alpha_interval"]["ci"] == pytest.approx(list(ref["krippendorff_alpha_interval"]["ci"]), abs=1e-12)


def test_claim_question_interval_resamples_items_with_all_their_claims():
    """A plain loop: draw items, keep every claim of each drawn item, alpha by the krippendorff package."""
    rng = np.random.default_rng(21)
    rows = []
    for item in range(15):
        for claim in range(int(rng.integers(1, 5))):
            truth = rng.choice(["yes", "no"])
            for who in ("a", "b", "c"):
                if rng.random() < 0.2:
                    continue
                rows.append((f"i{item}", who, f"gpt#{claim}", truth if rng.random() < 0.8 else "unsure"))
    df = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "supported")
    n_resamples, seed = 40, 9
    out = question_agreement(df, SINGLE_CLAIM, n_resamples=n_resamples, seed=seed)
    items = list(pd.unique(df["item"]))
    draws = np.random.default_rng(seed).integers(0, len(items), size=(n_resamples, len(items)))
    alphas = []
    codes = {"yes": 0, "no": 1, "unsure": 2}
    for row in draws:
        parts = [df.loc[df["item"] == items[i]].assign(item=f"copy{j}") for j, i in enumerate(row)]
        sample = pd.concat(parts, ignore_index=True)
        alphas.append(krippendorff.alpha(reliability_data=_reliability(sample, codes), level_of_measurement="nominal"))
    assert out["alpha"]["ci"] == pytest.approx(list(np.quantile(alphas, [0.025, 0.975])), abs=1e-9)
    assert out["alpha"]["n_resamples"] == n_resamples


# --- agreement: undefined cases ------------------------------------------------------------


def test_agreement_is_undefined_with_a_reason_when_no_two_annotators_share_a_unit():
    rows = [("i1", "a", "", 1), ("i2", "b", "", 5), ("i3", "c", "", 3)]
    df = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "confidence")
    out = question_agreement(df, LIKERT)
    for key in (
        "alpha",
        "alpha_interval",
        "percent_agreement",
        "mean_cohen_kappa_quadratic",
        "mean_cohen_kappa_linear",
    ):
        assert out[key]["value"] is None
        assert out[key]["reason"] == NO_SHARED_UNIT
    assert out["pairwise_cohen_kappa"] == []
    number = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "minutes")
    assert question_agreement(number, NUMBER)["alpha"]["reason"] == NO_SHARED_UNIT
    multi = _frame(
        pd.DataFrame(
            [("i1", "a", "", ["date"]), ("i2", "b", "", [])], columns=["item", "annotator", "target", "value"]
        ),
        "errors",
    )
    for option in MULTI["options"]:
        assert question_agreement(multi, MULTI)["per_option"][option]["alpha"]["reason"] == NO_SHARED_UNIT


def test_agreement_undefined_cases_say_why():
    same = [(f"i{i}", who, "", 4) for i in range(12) for who in ("a", "b")]
    out = question_agreement(
        _frame(pd.DataFrame(same, columns=["item", "annotator", "target", "value"]), "confidence"), LIKERT
    )
    assert out["alpha"]["value"] is None and "one category" in out["alpha"]["reason"]
    assert out["mean_cohen_kappa_quadratic"]["value"] is None
    assert "Cohen's kappa is undefined for every pair" in out["mean_cohen_kappa_quadratic"]["reason"]
    equal_numbers = _frame(pd.DataFrame(same, columns=["item", "annotator", "target", "value"]), "minutes")
    out = question_agreement(equal_numbers, NUMBER)
    assert out["alpha"]["value"] is None and "all pairable answers are equal" in out["alpha"]["reason"]
    few = _seeded_likert(2, n_items=6, annotators=("a", "b"), missing=0.0)
    out = question_agreement(few, LIKERT, min_shared_units=10)
    assert out["alpha"]["value"] is not None
    assert out["mean_cohen_kappa_linear"]["value"] is None
    assert "10 or more units" in out["mean_cohen_kappa_linear"]["reason"]
    assert out["pairwise_cohen_kappa"][0]["linear"] is not None and not out["pairwise_cohen_kappa"][0]["in_mean"]
    text = _frame(
        pd.DataFrame([("i1", "a", "", "ok"), ("i1", "b", "", "no")], columns=["item", "annotator", "target", "value"]),
        "comment",
    )
    out = question_agreement(text, TEXT)
    assert out["alpha"]["value"] is None and "free-text" in out["alpha"]["reason"]
    assert out["n_units_paired"] == 1


# --- per-claim scores ----------------------------------------------------------------------


def _claims_by_hand() -> pd.DataFrame:
    rows = [
        # item i1, gpt: claim 0 yes/yes/no (majority yes), claim 1 no/no (majority no)
        ("i1", "a", "gpt#0", "yes"),
        ("i1", "b", "gpt#0", "yes"),
        ("i1", "c", "gpt#0", "no"),
        ("i1", "a", "gpt#1", "no"),
        ("i1", "b", "gpt#1", "unsure"),
        # item i1, llama: claim 0 yes/no (tie), claim 1 yes (one judgement)
        ("i1", "a", "llama#0", "yes"),
        ("i1", "b", "llama#0", "no"),
        ("i1", "a", "llama#1", "yes"),
        # item i2, gpt: claim 0 yes/yes, claim 1 unsure/no/yes (majority not yes), claim 2 unanswered
        ("i2", "a", "gpt#0", "yes"),
        ("i2", "c", "gpt#0", "yes"),
        ("i2", "a", "gpt#1", "unsure"),
        ("i2", "b", "gpt#1", "no"),
        ("i2", "c", "gpt#1", "yes"),
        ("i2", "a", "gpt#2", None),
        # item i2, llama: claim 0 no/yes (tie) -> every claim of this response is tied
        ("i2", "a", "llama#0", "no"),
        ("i2", "b", "llama#0", "yes"),
    ]
    return _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "supported")


def test_per_claim_scores_against_hand_counts():
    out = per_claim_scores(_claims_by_hand(), SINGLE_CLAIM, "yes", n_resamples=200)
    assert out["n_unanswered"] == 1
    gpt, llama = out["systems"]["gpt"], out["systems"]["llama"]
    assert (gpt["n_responses"], gpt["n_claims"], gpt["n_judgements"]) == (2, 4, 10)
    # each judgement: i1 2 of 5, i2 3 of 5
    assert (gpt["each_judgement"]["k"], gpt["each_judgement"]["n"]) == (5, 10)
    assert gpt["each_judgement"]["value"] == pytest.approx(0.5)
    assert gpt["per_response_mean"]["value"] == pytest.approx((2 / 5 + 3 / 5) / 2)
    # majority: i1 yes, no; i2 yes, not-yes (1 yes of 3)
    assert (gpt["majority"]["k"], gpt["majority"]["n"], gpt["majority"]["n_ties"]) == (2, 4, 0)
    assert gpt["majority_per_response_mean"]["value"] == pytest.approx(0.5)
    assert (llama["each_judgement"]["k"], llama["each_judgement"]["n"]) == (3, 5)
    assert llama["per_response_mean"]["value"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    # majority: i1's claim 0 tied, claim 1 yes; i2's only claim tied
    assert (llama["majority"]["k"], llama["majority"]["n"], llama["majority"]["n_ties"]) == (1, 1, 2)
    assert llama["majority_per_response_mean"]["value"] == pytest.approx(1.0)
    assert llama["majority_per_response_mean"]["n_items"] == 1
    assert llama["majority_per_response_mean"]["n_responses_all_tied"] == 1
    # two positive options
    both = per_claim_scores(_claims_by_hand(), SINGLE_CLAIM, ["yes", "unsure"], n_resamples=0)
    assert (both["systems"]["gpt"]["each_judgement"]["k"], both["systems"]["gpt"]["each_judgement"]["n"]) == (7, 10)
    assert both["systems"]["gpt"]["each_judgement"]["ci"] is None


def test_per_claim_interval_is_a_bootstrap_over_responses():
    """A plain loop over resampled responses gives the same percentile interval."""
    df = _claims_by_hand()
    rng = np.random.default_rng(3)
    extra = [
        (f"j{item}", "a", f"gpt#{claim}", rng.choice(["yes", "no"]))
        for item in range(12)
        for claim in range(int(rng.integers(1, 6)))
    ]
    df = pd.concat([df, _frame(pd.DataFrame(extra, columns=["item", "annotator", "target", "value"]), "supported")])
    out = per_claim_scores(df, SINGLE_CLAIM, "yes", seed=5, n_resamples=60)["systems"]["gpt"]
    gpt = df.loc[df["target"].str.startswith("gpt") & df["value"].notna()]
    responses = list(pd.unique(gpt["item"]))
    k = np.array([(gpt.loc[gpt["item"] == r, "value"] == "yes").sum() for r in responses], dtype=float)
    n = np.array([(gpt["item"] == r).sum() for r in responses], dtype=float)
    draws = np.random.default_rng(5).integers(0, len(responses), size=(60, len(responses)))
    pooled = [k[d].sum() / n[d].sum() for d in draws]
    mean = [np.mean(k[d] / n[d]) for d in draws]
    assert out["each_judgement"]["ci"] == pytest.approx(list(np.quantile(pooled, [0.025, 0.975])), abs=1e-12)
    assert out["per_response_mean"]["ci"] == pytest.approx(list(np.quantile(mean, [0.025, 0.975])), abs=1e-12)


def test_per_claim_intervals_cover_the_truth_where_a_binomial_interval_does_not():
    """Claims of a response share its accuracy (p_r ~ Beta(1, 1.5), mean 0.4): the bootstrap over
    responses keeps its coverage; a Wald interval that treats claims as independent does not."""
    truth, seeds = 0.4, range(200)
    covered = {"each_judgement": 0, "per_response_mean": 0}
    wald_covered = 0
    for seed in seeds:
        rng = np.random.default_rng(1000 + seed)
        p = rng.beta(1.0, 1.5, size=40)
        n = 1 + rng.poisson(7, size=40)
        rows = [
            (f"r{r}", "a", f"sys#{c}", "yes" if rng.random() < p[r] else "no") for r in range(40) for c in range(n[r])
        ]
        df = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "supported")
        out = per_claim_scores(df, SINGLE_CLAIM, "yes", seed=seed, n_resamples=1000)["systems"]["sys"]
        for key in covered:
            low, high = out[key]["ci"]
            covered[key] += low <= truth <= high
        k, m = out["each_judgement"]["k"], out["each_judgement"]["n"]
        share = k / m
        half = 1.96 * np.sqrt(share * (1 - share) / m)
        wald_covered += share - half <= truth <= share + half
    for key, hits in covered.items():
        assert 0.90 <= hits / len(seeds) <= 0.99, (key, hits)
    assert wald_covered / len(seeds) < 0.85


@pytest.fixture(scope="module")
def factscore_answers() -> pd.DataFrame:
    """FActScore's human labels of ChatGPT and InstructGPT facts as answers to a per-claim question."""
    rows = []
    for system in ("ChatGPT", "InstructGPT"):
        for n, record in enumerate(read_jsonl(TEST_DATA / "factscore_labeled" / f"{system}.jsonl.gz")):
            labels = []
            for sentence in record["annotations"] or []:
                if sentence["human-atomic-facts"] is None:
                    labels += ["IR"] * len(sentence["model-atomic-facts"] or [])
                else:
                    labels += [fact["label"] for fact in sentence["human-atomic-facts"]]
            rows += [(f"{system}-{n}", "human", f"{system}#{c}", label) for c, label in enumerate(labels)]
    return _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "fact")


def test_per_response_mean_is_factscore_on_its_human_labels(factscore_answers):
    question = {"key": "fact", "type": "single", "options": ["S", "NS", "IR"], "target": "claim"}
    out = per_claim_scores(factscore_answers, question, "S", n_resamples=200)
    claims = factscore_answers.rename(columns={"item": "response_id", "value": "label"})
    claims["system"] = claims["target"].str.rpartition("#")[0]
    reference = stats.factscore(claims, supported={"S"}, unsupported={"NS", "IR"}, n_resamples=0)
    for system, paper in (("ChatGPT", 58.3), ("InstructGPT", 42.5)):
        ours, ref = out["systems"][system], reference["per_system"][system]
        assert ours["per_response_mean"]["value"] == pytest.approx(ref["factscore"]["value"], abs=1e-12)
        assert 100 * ours["per_response_mean"]["value"] == pytest.approx(paper, abs=0.15)
        assert ours["each_judgement"]["value"] == pytest.approx(ref["pooled_supported_fraction"], abs=1e-12)
        assert ours["each_judgement"]["k"] == ref["supported"]
        assert ours["majority"]["value"] == ours["each_judgement"]["value"]  # one annotator: majority = label
    assert out["systems"]["ChatGPT"]["each_judgement"]["k"] == 3194  # the dataset README's count


def test_per_claim_scores_validate_the_question():
    df = _claims_by_hand()
    with pytest.raises(ValueError, match="not of each claim"):
        per_claim_scores(df, {**SINGLE_CLAIM, "target": "list"}, "yes")
    with pytest.raises(ValueError, match="single-choice"):
        per_claim_scores(df, {**SINGLE_CLAIM, "type": "multi"}, "yes")
    with pytest.raises(ValueError, match="not options"):
        per_claim_scores(df, SINGLE_CLAIM, "supported")
    with pytest.raises(ValueError, match="repeat an"):
        per_claim_scores(pd.concat([df, df.head(1)]), SINGLE_CLAIM, "yes")


def test_per_claim_scores_undefined_cases():
    rows = [("i1", "a", "gpt#0", "yes"), ("i1", "b", "gpt#0", "no")]
    df = _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "supported")
    gpt = per_claim_scores(df, SINGLE_CLAIM, "yes")["systems"]["gpt"]
    assert gpt["majority"]["value"] is None and "tied" in gpt["majority"]["reason"]
    assert gpt["majority_per_response_mean"]["value"] is None
    assert gpt["each_judgement"]["value"] == 0.5
    assert gpt["each_judgement"]["ci"] is None and "fewer than 2 items" in gpt["each_judgement"]["ci_unavailable"]
    assert per_claim_scores(df.iloc[:0], SINGLE_CLAIM, "yes")["systems"] == {}


def test_outputs_hold_no_nan_and_pairs_are_listed_once():
    df = _seeded_likert(6)
    out = question_agreement(df, LIKERT, n_resamples=50)
    pairs = [tuple(sorted(p["annotators"])) for p in out["pairwise_cohen_kappa"]]
    assert sorted(pairs) == list(itertools.combinations(sorted(df["annotator"].unique()), 2))
    json.dumps(out, allow_nan=False)
    json.dumps(question_distribution(df, LIKERT), allow_nan=False)
    json.dumps(per_claim_scores(_claims_by_hand(), SINGLE_CLAIM, "yes", n_resamples=50), allow_nan=False)


# --- check (tick box) questions ----------------------------------------------------------

CHECK_CLAIM = {"key": "verifiable", "type": "check", "target": "claim", "prompt": "Verifiable?", "required": False}


def _check_answers(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(30):
        for system in ("gpt", "llama"):
            for claim in range(int(rng.integers(1, 5))):
                truth = bool(rng.random() < 0.6)
                for who in ("a", "b", "c"):
                    if rng.random() < 0.2:
                        continue
                    rows.append((f"i{item}", who, f"{system}#{claim}", truth if rng.random() < 0.8 else not truth))
    return _frame(pd.DataFrame(rows, columns=["item", "annotator", "target", "value"]), "verifiable")


def test_check_question_distribution_agreement_and_per_claim_scores():
    df = _check_answers(13)
    dist = question_distribution(df, CHECK_CLAIM, by="system")
    assert dist["overall"]["counts"] == {True: int(df["value"].sum()), False: int((~df["value"]).sum())}
    gpt = df.loc[df["target"].str.startswith("gpt#")]
    assert dist["groups"]["gpt"]["counts"][True] == int(gpt["value"].sum())
    out = question_agreement(df, CHECK_CLAIM, n_resamples=0)
    expected = krippendorff.alpha(reliability_data=_reliability(df), level_of_measurement="nominal")
    assert out["alpha"]["value"] == pytest.approx(expected, abs=1e-9)
    scores = per_claim_scores(df, CHECK_CLAIM, True, n_resamples=100)["systems"]["gpt"]
    assert (scores["each_judgement"]["k"], scores["each_judgement"]["n"]) == (int(gpt["value"].sum()), len(gpt))
    with pytest.raises(ValueError, match="true or false"):
        question_distribution(df.assign(value="yes"), CHECK_CLAIM)
