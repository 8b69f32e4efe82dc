"""The vectorised bootstrap against a plain loop over resamples."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

import metaeval.stats.bootstrap as bootstrap_module
from metaeval import stats

B = 200


@pytest.fixture(scope="module")
def xsum_table(xsum):
    return stats.build_table(xsum, ["yes", "no"], item=["bbcid", "system"], annotator="worker_id")


def _wide_in_table_order(wide, table):
    keyed = wide.copy()
    keyed.index = [f"{i}|{c}" for i, c in keyed.index]
    return keyed.loc[list(table.item_index)]


def _naive(wide_rows: np.ndarray, seed: int, n_resamples: int) -> dict[str, np.ndarray]:
    """One resample at a time, with statsmodels / krippendorff / plain formulas."""
    n = len(wide_rows)
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    out: dict[str, list[float]] = {
        "fleiss_kappa": [],
        "krippendorff_alpha": [],
        "percent_agreement": [],
        "gwet_ac1": [],
        "randolph_kappa": [],
        "majority_agreement": [],
    }
    for b in range(n_resamples):
        sub = wide_rows[idx[b]]
        complete = sub[~np.isnan(sub).any(axis=1)].astype(int)
        out["fleiss_kappa"].append(sm_fleiss_kappa(aggregate_raters(complete, n_cat=2)[0]))
        out["krippendorff_alpha"].append(krippendorff.alpha(reliability_data=sub.T, level_of_measurement="nominal"))
        pa_items, pi_items, maj = [], [], []
        for row in sub:
            vals = row[~np.isnan(row)].astype(int)
            r = len(vals)
            c = np.bincount(vals, minlength=2)
            pi_items.append(c / r)
            if r >= 2:
                pa_items.append(sum(x * (x - 1) for x in c) / (r * (r - 1)))
                maj.append(c.max() * 2 > r)
        pa = np.mean(pa_items)
        pi = np.mean(pi_items, axis=0)
        pe_ac1 = (pi * (1 - pi)).sum() / (2 - 1)
        out["percent_agreement"].append(pa)
        out["gwet_ac1"].append((pa - pe_ac1) / (1 - pe_ac1))
        out["randolph_kappa"].append((pa - 0.5) / (1 - 0.5))
        out["majority_agreement"].append(np.mean(maj))
    return {k: np.array(v) for k, v in out.items()}


@pytest.mark.parametrize("dataset", ["pubmed", "arxiv"])
def test_vectorised_bootstrap_equals_naive_loop(longsci, longsci_long, dataset):
    wide = longsci[dataset]
    table = stats.build_table(longsci_long(wide), [0, 1])
    rows = _wide_in_table_order(wide, table).to_numpy(dtype=float)
    naive = _naive(rows, seed=11, n_resamples=B)
    ours = stats.bootstrap_distribution(table, list(naive), n_resamples=B, seed=11)
    for name, expected in naive.items():
        np.testing.assert_allclose(ours[name], expected, rtol=0, atol=1e-10, err_msg=name)
        ci = stats.bootstrap_ci(table, [name], n_resamples=B, seed=11)[name]["ci"]
        np.testing.assert_allclose(ci, np.quantile(expected, [0.025, 0.975]), atol=1e-12)


def test_chunked_resampling_is_the_same_stream(longsci, longsci_long, monkeypatch):
    table = stats.build_table(longsci_long(longsci["arxiv"]), [0, 1])
    whole = stats.bootstrap_distribution(table, ["fleiss_kappa", "krippendorff_alpha"], n_resamples=50, seed=5)
    monkeypatch.setattr(bootstrap_module, "_CHUNK_ELEMENTS", table.n_items * 7)  # chunks of 7 resamples
    chunked = stats.bootstrap_distribution(table, ["fleiss_kappa", "krippendorff_alpha"], n_resamples=50, seed=5)
    for name in whole:
        np.testing.assert_array_equal(whole[name], chunked[name])


def test_ci_contains_point_estimate_on_xsum(xsum_table):
    summary = stats.agreement_summary(xsum_table, ordinal=True, n_resamples=1000, seed=0)
    for name in stats.BOOTSTRAP_STATISTICS:
        est = summary[name]
        assert est["ci"] is not None, name
        assert est["ci"][0] <= est["value"] <= est["ci"][1], name
        assert est["n_resamples"] == 1000 and est["n_undefined"] == 0


def test_same_seed_same_interval_other_seed_differs(xsum_table):
    names = ["fleiss_kappa", "krippendorff_alpha", "gwet_ac1"]
    first = stats.bootstrap_ci(xsum_table, names, n_resamples=300, seed=42)
    again = stats.bootstrap_ci(xsum_table, names, n_resamples=300, seed=42)
    other = stats.bootstrap_ci(xsum_table, names, n_resamples=300, seed=43)
    for name in names:
        assert first[name]["ci"] == again[name]["ci"]
        assert first[name]["ci"] != other[name]["ci"]


def test_interval_width_shrinks_with_confidence(xsum_table):
    wide = stats.bootstrap_ci(xsum_table, ["fleiss_kappa"], confidence=0.99, seed=1)["fleiss_kappa"]["ci"]
    narrow = stats.bootstrap_ci(xsum_table, ["fleiss_kappa"], confidence=0.80, seed=1)["fleiss_kappa"]["ci"]
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


def test_unknown_statistic_is_an_error(xsum_table):
    with pytest.raises(ValueError, match="no bootstrap"):
        stats.bootstrap_ci(xsum_table, ["cohen_kappa"])


def _relabelled(xsum, share: float, seed: int):
    """The XSum labels with a share of them flipped: other count rows on the very same items."""
    flip = np.random.default_rng(seed).random(len(xsum)) < share
    labels = np.where(flip, xsum["label"].map({"yes": "no", "no": "yes"}), xsum["label"])
    return xsum.assign(label=labels)


def test_tables_bootstrapped_together_get_what_each_gets_alone(xsum, xsum_table):
    """Bit for bit: one draw of resamples for several tables of the same items changes none of them."""
    columns = {"item": ["bbcid", "system"], "annotator": "worker_id"}
    flipped = stats.build_table(_relabelled(xsum, 0.3, seed=3), ["yes", "no"], **columns)
    one_category = xsum_table.collapse({"yes": "any", "no": "any"})  # every coefficient undefined: NaN throughout
    assert flipped.item_index.equals(xsum_table.item_index) and one_category.item_index.equals(xsum_table.item_index)
    names = list(stats.BOOTSTRAP_STATISTICS)
    requests = [
        stats.BootstrapRequest(xsum_table, names, n_raters=3),
        stats.BootstrapRequest(flipped, ["fleiss_kappa", "gwet_ac1"], n_raters=3),
        stats.BootstrapRequest(one_category, ["krippendorff_alpha", "percent_agreement"]),
        stats.BootstrapRequest(flipped, []),
    ]
    together = stats.bootstrap_distributions(requests, n_resamples=120, seed=9)
    assert together[3] == {}
    assert np.isnan(together[2]["krippendorff_alpha"]).all()
    for request, joint in zip(requests[:3], together, strict=False):
        alone = stats.bootstrap_distribution(
            request.table, request.statistics, n_resamples=120, seed=9, n_raters=request.n_raters
        )
        assert list(joint) == list(alone)
        for name in alone:
            np.testing.assert_array_equal(joint[name], alone[name], err_msg=name)
    # the flipped table is not a function of the first: each drew other count rows, yet the same resamples
    assert not np.array_equal(together[0]["fleiss_kappa"], together[1]["fleiss_kappa"])


def test_tables_bootstrapped_together_must_hold_the_same_items(xsum_table):
    fewer = xsum_table.select_items(np.arange(xsum_table.n_items) % 2 == 0)
    requests = [stats.BootstrapRequest(xsum_table, ["fleiss_kappa"]), stats.BootstrapRequest(fewer, ["fleiss_kappa"])]
    with pytest.raises(ValueError, match="same items in the same order"):
        stats.bootstrap_distributions(requests, n_resamples=10)


def test_combinations_of_count_rows_are_the_same_by_key_or_by_rows():
    ids = [np.array([0, 2, 1, 2, 0, 2]), np.array([1, 0, 1, 0, 1, 1])]
    by_key = bootstrap_module._combinations(ids, [3, 2])
    by_rows = bootstrap_module._combinations(ids, [2**40, 2**40])  # a key space too big for one int64 key
    for combos, joint in (by_key, by_rows):
        assert combos.tolist() == [[0, 1], [1, 1], [2, 0], [2, 1]]
        assert joint.tolist() == [0, 2, 1, 2, 0, 3]
