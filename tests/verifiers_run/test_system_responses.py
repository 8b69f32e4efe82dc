"""ResponseGroups: the claims grouped by response once per report, against the pandas groupby it replaces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metaeval.stats import system_correlation
from metaeval.verifiers.system_responses import ResponseGroups

ROLE = {"supported": 1.0, "contradicted": 0.0}  # inconclusive: left out by the binary map
LABELS = np.array(["supported", "contradicted", "inconclusive"], dtype=object)


def grouped_by_pandas(items: pd.DataFrame, majority: pd.Series, labelled: pd.DataFrame) -> pd.DataFrame:
    """The per-verifier computation the report made before (verifiers/report.py, issue 35)."""
    named = set(items.loc[items["response_id"] != "", "response_id"])

    def own(item: str) -> str:
        """A claim without a response id: its own response, named by its item id, prefixed while that names one."""
        while item in named:
            item = "item:" + item
        return item

    claims = items[items["system"] != ""].copy()
    claims["response"] = [
        response or own(item) for response, item in zip(claims["response_id"], claims["item"], strict=True)
    ]
    claims["human"] = claims["item"].map(majority).map(ROLE).astype("float64")
    claims["verifier"] = claims["item"].map(labelled.set_index("item")["label"]).map(ROLE).astype("float64")
    return claims.groupby("response", sort=False).agg(
        system=("system", "first"), human=("human", "mean"), verifier=("verifier", "mean")
    )


def seeded_study(seed: int, n_items: int = 3_000) -> tuple[pd.DataFrame, pd.Series, pd.DataFrame]:
    """Claims in responses of 1-6 claims, shuffled (a response's claims far apart), some without a response id
    or a system; a human majority on part of them and a verifier's labels on another part."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 7, size=n_items)
    response = np.repeat(np.arange(n_items), sizes)[:n_items]
    order = rng.permutation(n_items)
    systems = np.array(["alpha", "beta", "gamma", "delta"], dtype=object)
    items = pd.DataFrame(
        {
            "item": [f"c{n}" for n in range(n_items)],
            "response_id": np.array([f"r{r}" for r in response], dtype=object)[order],
            "system": systems[response % 4][order],
        }
    )
    items.loc[rng.random(n_items) < 0.1, "response_id"] = ""  # their own response each
    items.loc[rng.random(n_items) < 0.03, "system"] = ""  # not in the correlation
    # claims without a response id whose item ids other claims give as response ids: each stays its own
    # response (c7's key clashes twice, c11's once), not one of those
    items.loc[5, "response_id"] = "item:" + items.loc[7, "item"]
    items.loc[13, "response_id"] = items.loc[7, "item"]
    items.loc[9, "response_id"] = items.loc[11, "item"]
    items.loc[[7, 11], "response_id"] = ""
    items.loc[[5, 7, 9, 11, 13], "system"] = "alpha"
    humans = rng.random(n_items) < 0.4
    majority = pd.Series(LABELS[rng.integers(0, 3, size=int(humans.sum()))], index=items["item"][humans].to_numpy())
    predicted = np.flatnonzero(rng.random(n_items) < 0.6)
    labelled = pd.DataFrame(
        {
            "item": items["item"].to_numpy()[rng.permutation(predicted)],
            "label": LABELS[rng.integers(0, 3, len(predicted))],
        }
    )
    return items, majority, labelled


def with_rows(items: pd.DataFrame, labelled: pd.DataFrame) -> pd.DataFrame:
    """``labelled`` with each item's row in ``items`` (``item_row``, as current_predictions gives it)."""
    return labelled.assign(item_row=pd.Index(items["item"]).get_indexer(labelled["item"]))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("by_row", [True, False], ids=["item_row", "item id"])
def test_the_same_responses_systems_and_means_as_the_groupby(seed, by_row):
    items, majority, labelled = seeded_study(seed)
    expected = grouped_by_pandas(items, majority, labelled)
    got = ResponseGroups(items, ROLE, majority).responses(with_rows(items, labelled) if by_row else labelled)
    assert list(got.index) == list(expected.index)  # in the order the responses first appear
    assert got["system"].tolist() == expected["system"].tolist()
    for column in ("human", "verifier"):
        np.testing.assert_array_equal(got[column].to_numpy(), expected[column].to_numpy())  # bit for bit, NaN too
    assert got["verifier"].isna().any() and got["human"].isna().any()  # responses without a call are kept
    own_keys = ["item:item:" + items.loc[7, "item"], "item:" + items.loc[11, "item"]]
    assert set(own_keys) <= set(got.index) and {"c7", "item:c7", "c11"} <= set(got.index)


@pytest.mark.parametrize("seed", [1, 5])
def test_the_responses_are_those_the_scores_group_by(seed):
    """One rule (stats.scores.response_keys): the system correlation's responses are the scores' and the
    estimates' (reporting/scores.claim_table), a claim without a response id its own response in both."""
    from metaeval.reporting.scores import claim_table

    items, majority, labelled = seeded_study(seed)
    items = items.assign(domain="d")
    got = ResponseGroups(items, ROLE, majority).responses(labelled)
    keys = claim_table(items)["response_id"][(items["system"] != "").to_numpy()]
    assert list(got.index) == list(pd.unique(keys))
    assert keys[(items["response_id"] == "").to_numpy()[(items["system"] != "").to_numpy()]].is_unique


def test_one_grouping_serves_every_verifier_with_the_same_correlation():
    items, majority, _ = seeded_study(4)
    groups = ResponseGroups(items, ROLE, majority)
    rng = np.random.default_rng(9)
    for _ in range(3):  # three verifiers, one grouping
        labelled = pd.DataFrame({"item": items["item"], "label": LABELS[rng.integers(0, 3, len(items))]})
        labelled.loc[rng.random(len(items)) < 0.2, "label"] = None  # no readable label
        ours = system_correlation(groups.responses(with_rows(items, labelled)), n_resamples=200, seed=0)
        theirs = system_correlation(grouped_by_pandas(items, majority, labelled), n_resamples=200, seed=0)
        for name in ("kendall_tau", "spearman"):
            assert ours[name].value == theirs[name].value
            assert ours[name].ci == theirs[name].ci
        assert ours["systems"] == theirs["systems"]


def test_a_verifier_with_two_labels_for_one_item_is_refused():
    items, majority, _ = seeded_study(5, n_items=50)
    labelled = pd.DataFrame({"item": ["c1", "c1"], "label": ["supported", "contradicted"]})
    groups = ResponseGroups(items, ROLE, majority)
    for given in (labelled, with_rows(items, labelled)):
        with pytest.raises(ValueError, match="one label per item"):
            groups.responses(given)


def test_no_claims_with_a_system_give_no_responses():
    items = pd.DataFrame({"item": ["a", "b"], "response_id": ["r", "r"], "system": ["", ""]})
    got = ResponseGroups(items, ROLE, pd.Series(["supported"], index=["a"])).responses(
        pd.DataFrame({"item": ["a"], "label": ["supported"]})
    )
    assert got.empty and list(got.columns) == ["system", "human", "verifier"]
