"""Factuality scores (pure functions) against published numbers and hand-written formulas on real data.

* FActScore: Min et al. (2023), Table 1 reports FActScore 42.5 / 58.3 / 71.5,
  % responding 99.5 / 85.8 / 90.7 and 26.3 / 34.7 / 40.8 facts per response
  for InstructGPT / ChatGPT / PerplexityAI; their human S / NS / IR labels
  are in tests/data/factscore_labeled.
* VeriScore F1@K: the loop of VeriScore's own scoring script (K =
  sorted(claim counts)[n // 2] per domain), re-typed here, on the same data.
* RAGAS faithfulness and Facts&Evidence credibility: the formulas written
  out as plain loops, on Factcheck-GPT's gold claim labels and its 3,305
  claim-evidence stances.
"""

from __future__ import annotations

import json
from collections import defaultdict
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pytest

from metaeval import stats
from tests.datasets import TEST_DATA, read_jsonl
from tests.metaeval.conftest import FIXTURES

FACTSCORE_SYSTEMS = ("InstructGPT", "ChatGPT", "PerplexityAI")
PAPER_FACTSCORE = {"InstructGPT": 42.5, "ChatGPT": 58.3, "PerplexityAI": 71.5}
PAPER_RESPONDING = {"InstructGPT": 99.5, "ChatGPT": 85.8, "PerplexityAI": 90.7}
PAPER_FACTS_PER_RESPONSE = {"InstructGPT": 26.3, "ChatGPT": 34.7, "PerplexityAI": 40.8}


@pytest.fixture(scope="module")
def factscore_data() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(claims, responses) of the FActScore human annotations.

    A sentence the annotators marked irrelevant has no human fact list; the
    paper counts its facts as IR, so the model-made list stands in for them.
    """
    claims, responses = [], []
    for system in FACTSCORE_SYSTEMS:
        for n, record in enumerate(read_jsonl(TEST_DATA / "factscore_labeled" / f"{system}.jsonl.gz")):
            rid = f"{system}-{n}"
            responses.append(
                {
                    "response_id": rid,
                    "system": system,
                    "domain": record["cat"][0],
                    "answered": record["annotations"] is not None,
                }
            )
            for sentence in record["annotations"] or []:
                if sentence["human-atomic-facts"] is None:
                    labels = ["IR"] * len(sentence["model-atomic-facts"] or [])
                else:
                    labels = [fact["label"] for fact in sentence["human-atomic-facts"]]
                claims += [
                    {"response_id": rid, "system": system, "domain": record["cat"][0], "label": label}
                    for label in labels
                ]
    return pd.DataFrame(claims), pd.DataFrame(responses)


@pytest.fixture(scope="module")
def factscore_result(factscore_data):
    claims, responses = factscore_data
    return stats.factscore(claims, supported={"S"}, unsupported={"NS", "IR"}, responses=responses)


@pytest.mark.parametrize("system", FACTSCORE_SYSTEMS)
def test_factscore_reproduces_the_papers_table(factscore_result, system):
    entry = factscore_result["per_system"][system]
    assert 100 * entry["factscore"]["value"] == pytest.approx(PAPER_FACTSCORE[system], abs=0.15)
    assert round(100 * entry["share_answered"], 1) == PAPER_RESPONDING[system]
    # The released data differs slightly from the paper's in fact counts (PerplexityAI: 41.5 here).
    assert entry["mean_claims_per_response"] == pytest.approx(PAPER_FACTS_PER_RESPONSE[system], abs=1.0)
    assert entry["n_responses"] == 183
    low, high = entry["factscore"]["ci"]
    assert low < entry["factscore"]["value"] < high


def test_factscore_counts_match_the_datasets_readme(factscore_data, factscore_result):
    claims, _ = factscore_data
    human_only = claims.loc[claims["label"].isin(["S", "NS"])]
    chat = factscore_result["per_system"]["ChatGPT"]
    assert (chat["supported"], chat["n_answered"]) == (3194, 157)  # README: S 3194, 26 abstained
    assert (human_only["system"] == "ChatGPT").sum() == 3194 + 1692


def test_factscore_per_response_equals_a_plain_loop(factscore_data, factscore_result):
    claims, responses = factscore_data
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for rid, label in zip(claims["response_id"], claims["label"], strict=True):
        counts[rid][0] += label == "S"
        counts[rid][1] += 1
    answered = dict(zip(responses["response_id"], responses["answered"], strict=True))
    by_system = defaultdict(list)
    for record in factscore_result["per_response"]:
        rid = record["response_id"]
        if not answered[rid] or counts[rid][1] == 0:
            assert record["score"] is None
            continue
        expected = counts[rid][0] / counts[rid][1]
        assert record["score"] == pytest.approx(expected)
        by_system[record["system"]].append(expected)
    for system, values in by_system.items():
        assert factscore_result["per_system"][system]["factscore"]["value"] == pytest.approx(np.mean(values))


def test_ir_excluded_instead_of_counted_as_not_supported(factscore_data):
    claims, responses = factscore_data
    out = stats.factscore(claims, supported={"S"}, unsupported={"NS"}, excluded={"IR"}, responses=responses)
    chat = out["per_system"]["ChatGPT"]
    assert chat["excluded"] == (claims.loc[claims["system"] == "ChatGPT", "label"] == "IR").sum()
    assert chat["factscore"]["value"] > 0.6  # higher than 0.583: IR no longer counts against the response
    assert chat["mean_claims_per_response"] > chat["mean_countable_claims_per_response"]


def _veriscore_script(claims: pd.DataFrame, responses: pd.DataFrame) -> dict[tuple[str, str], tuple[int, float]]:
    """VeriScore's scoring loop: triplets (supported, claims) per response, K median per domain;
    (domain, system) -> (K, mean F1@K)."""
    answered = responses.loc[responses["answered"]]
    per_response = claims.groupby("response_id")["label"].agg(supported=lambda s: int((s == "S").sum()), total="size")
    triplets: defaultdict[str, defaultdict[str, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for rid, system, domain in zip(answered["response_id"], answered["system"], answered["domain"], strict=True):
        s, total = per_response.loc[rid] if rid in per_response.index else (0, 0)
        triplets[domain][system].append((int(s), int(total)))
    out = {}
    for domain, systems in triplets.items():
        claim_num_lst = sorted(t[1] for lst in systems.values() for t in lst)
        k_median = claim_num_lst[len(claim_num_lst) // 2]
        for system, lst in systems.items():
            prec = [s / t for s, t in lst]
            rec = [min(s / k_median, 1) for s, _ in lst]
            f1 = [2 * p * r / (p + r) if r > 0 else 0 for p, r in zip(prec, rec, strict=True)]
            out[(domain, system)] = (k_median, sum(f1) / len(f1))
    return out


def test_veriscore_equals_its_scoring_script(factscore_data):
    claims, responses = factscore_data
    out = stats.veriscore_f1_at_k(claims, supported={"S"}, unsupported={"NS", "IR"}, responses=responses)
    expected = _veriscore_script(claims, responses)
    assert set(out["k"]) == {domain for domain, _ in expected}
    for (domain, system), (k, f1) in expected.items():
        entry = out["by_domain"][domain]
        assert entry["k"] == k and entry["k_source"] == "median"
        assert entry["systems"][system]["f1_at_k"]["value"] == pytest.approx(f1, abs=1e-12)


def test_veriscore_k_can_be_frozen(factscore_data):
    claims, responses = factscore_data
    first = stats.veriscore_f1_at_k(claims, supported={"S"}, unsupported={"NS", "IR"}, responses=responses)
    again = stats.veriscore_f1_at_k(
        claims, supported={"S"}, unsupported={"NS", "IR"}, responses=responses, k=first["k"]
    )
    assert again["per_system"] == first["per_system"]
    assert {e["k_source"] for e in again["by_domain"].values()} == {"given"}
    bigger = stats.veriscore_f1_at_k(claims, supported={"S"}, unsupported={"NS", "IR"}, responses=responses, k=100)
    assert bigger["per_system"]["ChatGPT"]["recall"] < first["per_system"]["ChatGPT"]["recall"]


def test_claim_scores_agree_with_the_three_functions(factscore_data):
    claims, responses = factscore_data
    roles = {"supported": {"S"}, "unsupported": {"NS", "IR"}}
    together = stats.claim_scores(claims, responses=responses, **roles)
    assert together["factscore"]["per_system"] == stats.factscore(claims, responses=responses, **roles)["per_system"]
    assert (
        together["veriscore"]["by_domain"] == stats.veriscore_f1_at_k(claims, responses=responses, **roles)["by_domain"]
    )
    assert len(together["per_response"]) == 3 * 183


def test_bootstrap_interval_matches_plain_resampling(factscore_result):
    """The multinomial shortcut gives the interval that resampling responses gives."""
    values = np.array(
        [r["score"] for r in factscore_result["per_response"] if r["system"] == "ChatGPT" and r["score"] is not None]
    )
    claims = pd.DataFrame(
        {
            "response_id": np.repeat(np.arange(len(values)), 1000),
            "system": "x",
            "label": np.concatenate([["S"] * round(v * 1000) + ["NS"] * (1000 - round(v * 1000)) for v in values]),
        }
    )
    ours = stats.factscore(claims, supported={"S"}, unsupported={"NS"}, n_resamples=20000, seed=1)
    rng = np.random.default_rng(7)
    plain = np.array([rng.choice(values, len(values)).mean() for _ in range(20000)])
    expected = np.quantile(plain, [0.025, 0.975])
    assert ours["overall"]["factscore"]["ci"] == pytest.approx(expected, abs=0.004)


# --- RAGAS faithfulness and credibility on Factcheck-GPT --------------------------------------


@pytest.fixture(scope="module")
def factcheck_claims() -> pd.DataFrame:
    rows = [json.loads(line) for line in open(FIXTURES / "factcheck_gpt" / "items.jsonl", encoding="utf-8")]
    return pd.DataFrame(
        {
            "response_id": [r["response_id"] for r in rows],
            "system": [r["system"] for r in rows],
            "label": [r.get("gold") for r in rows],
        }
    )


def test_ragas_faithfulness_equals_a_plain_loop(factcheck_claims):
    out = stats.ragas_faithfulness(
        factcheck_claims, supported={"supported"}, unsupported={"contradicted"}, excluded={"inconclusive"}
    )
    per_response = defaultdict(list)
    for rid, label in zip(factcheck_claims["response_id"], factcheck_claims["label"], strict=True):
        if label in ("supported", "contradicted"):
            per_response[rid].append(label == "supported")
    expected = {rid: sum(v) / len(v) for rid, v in per_response.items()}
    got = {r["response_id"]: r["faithfulness"] for r in out["per_response"]}
    assert {rid: v for rid, v in got.items() if v is not None} == pytest.approx(expected)
    assert out["overall"]["faithfulness"]["value"] == pytest.approx(np.mean(list(expected.values())))
    assert out["overall"]["n_zero_claim"] == sum(v is None for v in got.values())
    assert out["overall"]["no_verdict"] == int(factcheck_claims["label"].isna().sum()) == 23


def _source_type(url: str) -> str:
    host = urlparse(url).netloc.lower()
    if "wikipedia.org" in host:
        return "wikipedia"
    if host.endswith(".gov") or ".gov." in host:
        return "government"
    if host.endswith(".edu") or ".ac." in host:
        return "academic"
    return "web"


@pytest.fixture(scope="module")
def stances() -> pd.DataFrame:
    """One row per (claim, evidence passage) stance of Factcheck-GPT, mapped as its README says."""
    mapping = {
        "completely-support": "support",
        "partially-support": "not_support",
        "refute": "not_support",
        "irrelevant": "irrelevant",
    }
    rows = []
    for n, record in enumerate(read_jsonl(TEST_DATA / "factcheck_gpt" / "factcheck-GPT-benchmark.jsonl.gz")):
        for key, sentence in record["sentences"].items():
            if (
                not len(sentence["claims"])
                == len(sentence["stance_claim_autoEvid"])
                == len(sentence["auto_evidence_url"])
            ):
                continue
            for c, (labels, urls) in enumerate(
                zip(sentence["stance_claim_autoEvid"], sentence["auto_evidence_url"], strict=True)
            ):
                if len(labels) != len(urls):
                    continue
                rows += [
                    {
                        "claim": f"{n}-{key}-{c}",
                        "system": "ChatGPT",
                        "judgement": mapping[label],
                        "source_type": _source_type(url),
                    }
                    for label, url in zip(labels, urls, strict=True)
                ]
    return pd.DataFrame(rows)


def _pooled(frame: pd.DataFrame, include_irrelevant: bool) -> float:
    support = (frame["judgement"] == "support").sum()
    den = support + (frame["judgement"] == "not_support").sum()
    if include_irrelevant:
        den += (frame["judgement"] == "irrelevant").sum()
    return support / den


@pytest.mark.parametrize("include_irrelevant", [False, True])
def test_credibility_equals_the_formula_on_factcheck_gpt(stances, include_irrelevant):
    assert len(stances) > 3000 and set(stances["judgement"]) == {"support", "not_support", "irrelevant"}
    out = stats.credibility(stances, include_irrelevant=include_irrelevant)
    assert out["overall"]["value"]["value"] == pytest.approx(_pooled(stances, include_irrelevant))
    assert out["overall"]["value"]["support"] == (stances["judgement"] == "support").sum()
    for source_type, rows in stances.groupby("source_type"):
        assert out["by_source_type"][source_type]["value"] == pytest.approx(_pooled(rows, include_irrelevant))
    per_claim = []
    for _, rows in stances.groupby("claim"):
        den = rows["judgement"].isin(["support", "not_support"] + (["irrelevant"] if include_irrelevant else [])).sum()
        if den:
            per_claim.append((rows["judgement"] == "support").sum() / den)
    assert out["overall"]["mean_of_claims"]["value"] == pytest.approx(np.mean(per_claim))
    assert out["overall"]["n_claims_without_counted_evidence"] == stances["claim"].nunique() - len(per_claim)


def test_credibility_source_type_selection(stances):
    only_wiki = stats.credibility(stances, source_types=["wikipedia"])
    assert only_wiki["source_types_included"] == ["wikipedia"]
    assert only_wiki["overall"]["value"]["value"] == pytest.approx(
        _pooled(stances.loc[stances["source_type"] == "wikipedia"], False)
    )
    no_web = stats.credibility(stances, exclude_source_types=["web"])
    assert "web" in no_web["source_types_excluded"]
    assert no_web["n_judgements_left_out_by_source_type"] == (stances["source_type"] == "web").sum()
    assert no_web["by_source_type"]["web"]["selected"] is False
    nothing = stats.credibility(stances, source_types=["no-such-type"])
    assert nothing["overall"]["value"]["value"] is None and nothing["overall"]["value"]["reason"]


# --- rules for edge cases -------------------------------------------------------------------


def _claims(rows: list[tuple[str, str, str | None]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["response_id", "system", "label"])


def test_zero_claim_responses_follow_each_papers_rule():
    claims = _claims([("r1", "m", "S"), ("r1", "m", "NS"), ("r2", "m", "IR"), ("r3", "m", None)])
    roles = {"supported": {"S"}, "unsupported": {"NS"}, "excluded": {"IR"}}
    fact = stats.factscore(claims, **roles)
    assert fact["overall"]["factscore"]["value"] == 0.5 and fact["overall"]["n_zero_claim"] == 2
    assert "zero countable claims has no score" in fact["rule"]
    veri = stats.veriscore_f1_at_k(claims, **roles, k=2)
    f1 = {r["response_id"]: r["f1_at_k"] for r in veri["per_response"]}
    assert f1 == {"r1": pytest.approx(2 * 0.5 * 0.5 / 1.0), "r2": 0.0, "r3": 0.0}  # zero-claim scores 0
    assert veri["overall"]["f1_at_k"]["value"] == pytest.approx(0.5 / 3)
    ragas = stats.ragas_faithfulness(claims, **roles)
    assert ragas["overall"]["n_scored"] == 1 and ragas["overall"]["n_zero_claim"] == 2


def test_abstentions_are_left_out_and_reported():
    claims = _claims([("r1", "m", "S"), ("r1", "m", "S")])
    responses = pd.DataFrame({"response_id": ["r1", "r2", "r3"], "system": "m", "answered": [True, False, True]})
    out = stats.factscore(claims, supported={"S"}, unsupported={"NS"}, responses=responses)
    entry = out["per_system"]["m"]
    assert entry["share_answered"] == pytest.approx(2 / 3) and entry["n_zero_claim"] == 1
    assert entry["factscore"]["value"] == 1.0 and out["abstentions_known"] is True
    bad = pd.DataFrame({"response_id": ["r1"], "system": "m", "answered": [False]})
    with pytest.raises(ValueError, match="not answered have claims"):
        stats.factscore(claims, supported={"S"}, unsupported={"NS"}, responses=bad)


def test_k_of_zero_makes_f1_undefined_with_a_reason():
    claims = _claims([("r1", "m", "IR"), ("r2", "m", "IR"), ("r3", "m", "S")])
    out = stats.veriscore_f1_at_k(claims, supported={"S"}, unsupported={"NS"}, excluded={"IR"})
    entry = out["by_domain"]["(all)"]
    assert entry["k"] == 0 and "K is 0" in entry["k_undefined_reason"]
    assert entry["all_systems"]["f1_at_k"]["value"] is None and "K is 0" in entry["all_systems"]["f1_at_k"]["reason"]


def test_labels_must_have_exactly_one_role():
    claims = _claims([("r1", "m", "S"), ("r1", "m", "typo")])
    with pytest.raises(ValueError, match=r"no role.*typo"):
        stats.factscore(claims, supported={"S"}, unsupported={"NS"})
    with pytest.raises(ValueError, match="more than one role"):
        stats.factscore(claims, supported={"S"}, unsupported={"S", "typo"})
    with pytest.raises(ValueError, match="more than one system"):
        stats.factscore(_claims([("r1", "a", "S"), ("r1", "b", "S")]), supported={"S"}, unsupported={"NS"})


def test_empty_claim_table_gives_undefined_scores_not_zero():
    out = stats.factscore(_claims([]), supported={"S"}, unsupported={"NS"})
    assert out["overall"]["factscore"]["value"] is None and out["overall"]["factscore"]["reason"]
    assert out["per_system"] == {}


def test_lazy_response_rows_read_as_the_list_does(factscore_data):
    """The report cache's columnar per-response rows (stats.scores.lazy_response_rows) give the very records
    of the list, NaN as None included (scores undefined for zero-claim responses), by slice and by index."""
    from metaeval.stats.scores import ResponseRows, lazy_response_rows

    claims, responses = factscore_data
    roles = {"supported": {"S"}, "unsupported": {"NS", "IR"}}
    listed = stats.claim_scores(claims, responses=responses, **roles)["per_response"]
    with lazy_response_rows():
        lazy = stats.claim_scores(claims, responses=responses, **roles)["per_response"]
    assert isinstance(listed, list) and isinstance(lazy, ResponseRows)
    assert len(lazy) == len(listed) == 3 * 183
    assert lazy[:] == listed and lazy[100:250] == listed[100:250] and lazy[500:9999] == listed[500:]
    assert lazy[0] == listed[0] and lazy[-1] == listed[-1]
    assert any(row["factscore"] is None for row in lazy[:])  # a response without countable claims
    assert json.dumps(lazy[:], allow_nan=False) == json.dumps(listed, allow_nan=False)
    with pytest.raises(IndexError):
        lazy[len(listed)]
    assert isinstance(stats.claim_scores(claims, responses=responses, **roles)["per_response"], list)  # reset after


@pytest.mark.parametrize("seed", range(4))
def test_first_rows_are_each_codes_first_row(seed):
    """first_rows against a plain loop: first-appearance codes (the fast path), sorted codes
    (the fallback), missing claims (-1) skipped, and a code with no row refused."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 300, size=2_000).astype(str).astype(object)
    keys[rng.random(len(keys)) < 0.05] = None
    for sort in (False, True):
        codes, uniques = pd.factorize(keys, sort=sort, use_na_sentinel=True)
        expected: dict[int, int] = {}
        for row, code in enumerate(codes):
            if code >= 0:
                expected.setdefault(int(code), row)
        got = stats.scores.first_rows(codes, len(uniques))
        assert got.tolist() == [expected[code] for code in range(len(uniques))]
    with pytest.raises(ValueError, match="each with a row"):
        stats.scores.first_rows(np.array([0, 2, 0]), 3)
    assert stats.scores.first_rows(np.array([], dtype=np.int64), 0).tolist() == []


def test_response_keys_keep_a_claim_without_a_response_id_its_own_response():
    """An item id that is also a response id is prefixed (again while it clashes), never merged into that
    response; other claims keep their response id, and a claim without one its bare item id."""
    from metaeval.stats.scores import response_keys

    response_ids = np.array(["r1", "r1", "", "", "", "item:x"], dtype=object)
    items = np.array(["a", "b", "r1", "c", "x", "d"], dtype=object)
    assert response_keys(response_ids, items).tolist() == ["r1", "r1", "item:r1", "c", "x", "item:x"]
    response_ids[1] = "x"  # now "x" and "item:x" are both response ids: x's own key is prefixed twice
    assert response_keys(response_ids, items).tolist() == ["r1", "x", "item:r1", "c", "item:item:x", "item:x"]
    named = np.array(["r1", "r2"], dtype=object)
    assert response_keys(named, np.array(["a", "b"], dtype=object)).tolist() == ["r1", "r2"]
