"""Agreement coefficients against values printed in papers, R packages and
other libraries' own test suites (never against our own earlier output)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from metaeval import stats
from metaeval.stats.agreement import pattern_sums
from metaeval.stats.bootstrap import kernel_for

nan = np.nan

# Fleiss (1971), Table 1: 30 patients, 6 psychiatrists, 5 diagnoses (as in
# R irr's `diagnoses` and statsmodels' test_inter_rater.py). irr: 0.4302445.
DIAGNOSES = np.array(
    [
        [4, 4, 4, 4, 4, 4],
        [2, 2, 2, 5, 5, 5],
        [2, 3, 3, 3, 3, 5],
        [5, 5, 5, 5, 5, 5],
        [2, 2, 2, 4, 4, 4],
        [1, 1, 3, 3, 3, 3],
        [3, 3, 3, 3, 5, 5],
        [1, 1, 3, 3, 3, 4],
        [1, 1, 4, 4, 4, 4],
        [5, 5, 5, 5, 5, 5],
        [1, 4, 4, 4, 4, 4],
        [1, 2, 4, 4, 4, 4],
        [2, 2, 2, 3, 3, 3],
        [1, 4, 4, 4, 4, 4],
        [2, 2, 4, 4, 4, 5],
        [3, 3, 3, 3, 3, 5],
        [1, 1, 1, 4, 5, 5],
        [1, 1, 1, 1, 1, 2],
        [2, 2, 4, 4, 4, 4],
        [1, 3, 3, 5, 5, 5],
        [5, 5, 5, 5, 5, 5],
        [2, 4, 4, 4, 4, 4],
        [2, 2, 4, 5, 5, 5],
        [1, 1, 4, 4, 4, 4],
        [1, 4, 4, 4, 4, 5],
        [2, 2, 2, 2, 2, 4],
        [1, 1, 1, 1, 5, 5],
        [2, 2, 4, 4, 4, 4],
        [1, 3, 3, 3, 3, 3],
        [5, 5, 5, 5, 5, 5],
    ]
)

# Wikipedia "Fleiss' kappa" worked example: 10 subjects, 14 raters, 5 categories.
WIKIPEDIA_FLEISS = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)

# Krippendorff (2011) "Computing Krippendorff's Alpha-Reliability", p. 8:
# observers A-D (rows) x 12 units, missing values. Also Gwet (2014) p. 120,
# irrCAC's cac.raw4raters (transposed; unit 12's lone value sits with C there).
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
)

# Gwet (2014) / irrCAC datasets (units x raters), values from irrCAC's tests.
RAW_5OBSERVERS = np.array(
    [
        [1, 1, 2, nan, 2],
        [1, 1, 0, 1, nan],
        [2, 3, 3, 3, nan],
        [nan, 0, 0, nan, 0],
        [0, 0, 0, nan, 0],
        [0, 0, 0, nan, 0],
        [1, 0, 2, nan, 1],
        [1, nan, 2, 0, nan],
        [2, 2, 2, nan, 2],
        [2, 1, 1, 1, nan],
        [nan, 1, 0, 0, nan],
        [0, 0, 0, 0, nan],
        [1, 2, 2, 2, nan],
        [3, 3, 2, 2, 3],
        [1, 1, 1, nan, 1],
    ]
)
RAW_G1G2 = [
    ["a", "a", None, "a"],
    ["b", "b", "c", "b"],
    ["c", "c", "c", "c"],
    ["c", "c", "c", "c"],
    ["b", "b", "b", "b"],
    ["a", "b", "c", "d"],
    ["d", "d", "d", "d"],
    ["a", "a", "b", "a"],
    ["b", "b", "b", "b"],
    [None, "e", "e", "e"],
    [None, None, "a", "a"],
    [None, None, "c", None],
    ["b", "b", "c", "b"],
    ["b", "a", "c", "b"],
]
RAW_GENDER = list(
    zip(
        ["a", "a", "a", "a", "a", "b", "b", "b", "c", "a", "a", "a", "a", "a", "b"],
        ["a", "a", "a", "a", "b", "a", "b", "c", "c", "a", "a", "a", "a", "b", "a"],
        ["a", "b", "b", "c", "a", "a", "b", "b", "c", "a", "b", "b", "c", "a", "a"],
        ["c", "c", "c", "c", "a", "a", "b", "b", "c", "c", "c", "c", "c", "a", "a"],
        strict=False,
    )
)
RAW_BEN_GERRY = list(
    zip(
        ["a", "a", "b", "b", "d", "c", "c", "c", "e", "d", "d", "a"],
        ["b", "a", "b", "b", "b", "c", "c", "c", "e", None, "d", "d"],
        strict=False,
    )
)

# R irr's `anxiety` (20 subjects x 3 raters), as in statsmodels' tests.
ANXIETY = np.array(
    [
        3,
        3,
        3,
        4,
        5,
        5,
        2,
        3,
        5,
        2,
        2,
        6,
        1,
        5,
        2,
        2,
        1,
        2,
        4,
        3,
        3,
        6,
        4,
        6,
        2,
        4,
        2,
        4,
        3,
        3,
        2,
        3,
        3,
        3,
        2,
        2,
        1,
        3,
        3,
        4,
        2,
        1,
        4,
        4,
        3,
        2,
        1,
        6,
        1,
        1,
        1,
        2,
        3,
        3,
        1,
        1,
        3,
        3,
        2,
        2,
    ]
).reshape(20, 3, order="F")


def _table_from_confusion(conf, categories):
    rows = []
    item = 0
    for i, row in enumerate(conf):
        for j, n in enumerate(row):
            for _ in range(n):
                rows += [(item, "A", categories[i]), (item, "B", categories[j])]
                item += 1
    return pd.DataFrame(rows, columns=["item", "annotator", "label"])


def _raters(wide, long_from_wide, categories=None):
    frame = pd.DataFrame(wide, dtype=object).where(pd.notna(pd.DataFrame(wide)), None)
    long = long_from_wide(frame, [f"rater{j + 1}" for j in range(frame.shape[1])])
    if categories is not None and isinstance(categories[0], (int, np.integer)):
        long["label"] = long["label"].astype(float).astype(int)
    return stats.build_table(long, categories)


# --- Fleiss ---------------------------------------------------------------------------


def test_fleiss_1971_diagnoses(long_from_wide):
    table = _raters(DIAGNOSES, long_from_wide, [1, 2, 3, 4, 5])
    est = stats.fleiss_kappa(table)
    assert est.value == pytest.approx(0.4302445, abs=1e-7)  # R irr kappam.fleiss
    assert round(est.value, 3) == 0.430  # Fleiss (1971)
    assert est.n_items == 30 and est.extra["n_items_left_out"] == 0
    # With equal raters per item Gwet's generalisation is Fleiss' kappa.
    assert stats.fleiss_kappa_generalized(table).value == pytest.approx(est.value, abs=1e-12)


def test_fleiss_wikipedia_example(long_from_counts):
    table = stats.build_table(long_from_counts(WIKIPEDIA_FLEISS))
    est = stats.fleiss_kappa(table)
    assert round(est.value, 3) == 0.210
    assert round(est.extra["p_observed"], 3) == 0.378  # Wikipedia's P-bar
    assert round(est.extra["p_expected"], 3) == 0.213  # Wikipedia's P-bar_e
    assert est.extra["n_raters"] == 14


@pytest.mark.parametrize(
    "counts, fixed, free",
    [  # Randolph's online kappa calculator, quoted in statsmodels' test_fleis_randolph
        ([[7, 1], [3, 5]], 0.161905, 0.214286),
        ([[6, 1, 0], [0, 7, 0]], 0.708333, 0.785714),  # third category declared but unused
        ([[7, 0], [0, 7]], 1.0, 1.0),
    ],
)
def test_fleiss_and_randolph_free_marginal(long_from_counts, counts, fixed, free):
    table = stats.build_table(long_from_counts(counts), categories=range(len(counts[0])))
    assert stats.fleiss_kappa(table).value == pytest.approx(fixed, abs=6e-6)
    assert stats.randolph_kappa(table).value == pytest.approx(free, abs=6e-6)


def test_randolph_all_one_category_is_one_but_fleiss_undefined(long_from_counts):
    table = stats.build_table(long_from_counts([[7, 0], [7, 0]]), categories=[0, 1])
    assert stats.randolph_kappa(table).value == 1.0  # calculator: free-marginal 1
    fleiss = stats.fleiss_kappa(table)
    assert fleiss.value is None and "one category" in fleiss.reason


# --- Krippendorff ------------------------------------------------------------------------


@pytest.mark.parametrize("level, published", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_krippendorff_2011_example(long_from_wide, level, published):
    table = _raters(KRIPPENDORFF_2011.T, long_from_wide, [1, 2, 3, 4, 5])
    est = stats.krippendorff_alpha(table, level=level)
    assert round(est.value, 3) == published
    assert est.n_items == 11  # unit 12 has a single value: not pairable
    # The vectorised kernel behind the bootstrap gives the same number.
    name = {"nominal": "krippendorff_alpha"}.get(level, f"krippendorff_alpha_{level}")
    kernel = kernel_for(table, name)
    assert float(kernel.combine(pattern_sums(table, kernel))) == pytest.approx(est.value, abs=1e-12)


def test_krippendorff_docstring_example(long_from_wide):
    # krippendorff package docs (Wikipedia's example): 3 coders x 15 units.
    data = np.array(
        [
            [nan, nan, nan, nan, nan, 3, 4, 1, 2, 1, 1, 3, 3, nan, 3],
            [1, nan, 2, 1, 3, 3, 4, 3, nan, nan, nan, nan, nan, nan, nan],
            [nan, nan, 2, 1, 3, 4, 4, nan, 2, 1, 1, 3, 3, nan, 4],
        ]
    )
    table = _raters(data.T, long_from_wide, [1, 2, 3, 4])
    assert stats.krippendorff_alpha(table, level="nominal").value == pytest.approx(0.691358, abs=1e-6)
    assert stats.krippendorff_alpha(table, level="interval").value == pytest.approx(0.810845, abs=1e-6)


# --- Gwet's framework (irrCAC, Gwet 2014) ----------------------------------------------------

IRRCAC = {  # dataset: (categories, pa, fleiss, ac1, bp, alpha) from irrCAC's own tests (3 decimals)
    "raw_4raters": ([1, 2, 3, 4, 5], 0.818, 0.761, 0.775, 0.773, 0.743),
    "raw_5observers": ([0, 1, 2, 3], 0.616, 0.458, 0.497, 0.487, 0.481),
    "raw_g1g2": (list("abcde"), 0.744, 0.657, 0.685, 0.679, 0.632),
    "raw_gender": (list("abc"), 0.456, 0.129, 0.208, 0.183, 0.143),
    "raw_ben_gerry": (list("abcde"), 0.727, 0.649, 0.661, 0.659, 0.665),
}
IRRCAC_DATA = {
    "raw_4raters": KRIPPENDORFF_2011.T,
    "raw_5observers": RAW_5OBSERVERS,
    "raw_g1g2": RAW_G1G2,
    "raw_gender": RAW_GENDER,
    "raw_ben_gerry": RAW_BEN_GERRY,
}


@pytest.mark.parametrize("name", list(IRRCAC))
def test_irrcac_gwet_fleiss_bp_alpha(long_from_wide, name):
    cats, pa, fleiss, ac1, bp, alpha = IRRCAC[name]
    table = _raters(IRRCAC_DATA[name], long_from_wide, cats)
    assert round(stats.percent_agreement(table).value, 3) == pa
    assert round(stats.fleiss_kappa_generalized(table).value, 3) == fleiss
    assert round(stats.gwet_ac1(table).value, 3) == ac1
    assert round(stats.randolph_kappa(table).value, 3) == bp
    assert round(stats.krippendorff_alpha(table).value, 3) == alpha


def test_irrcac_raw4raters_chance_terms_and_r_value(long_from_wide):
    table = _raters(KRIPPENDORFF_2011.T, long_from_wide, [1, 2, 3, 4, 5])
    ac1 = stats.gwet_ac1(table)
    assert ac1.value == pytest.approx(0.77544, abs=5e-6)  # R irrCAC gwet.ac1.raw, printed 0.77544
    assert round(ac1.extra["p_expected"], 3) == 0.190
    assert round(stats.fleiss_kappa_generalized(table).extra["p_expected"], 3) == 0.239
    # Single-rated unit 12 feeds the chance term only, as in Gwet's formula.
    assert ac1.n_items == 11 and ac1.extra["n_items_chance"] == 12


# --- Cohen -------------------------------------------------------------------------------------


def test_cohen_sas_example_from_statsmodels():
    table = stats.build_table(_table_from_confusion([[0, 4, 1], [0, 8, 0], [0, 1, 5]], ["x", "y", "z"]))
    assert stats.cohen_kappa(table, "A", "B").value == pytest.approx(0.4842, abs=5e-5)
    assert stats.cohen_kappa(table, "A", "B", weights="linear").value == pytest.approx(0.4701, abs=5e-5)


@pytest.mark.parametrize(
    "y1, y2, weights, published",
    [  # scikit-learn test_cohen_kappa (Artstein & Poesio 2008, Tables 1 and 4)
        ([0] * 40 + [1] * 60, [0] * 20 + [1] * 20 + [0] * 10 + [1] * 50, None, 0.348),
        ([0] * 46 + [1] * 44 + [2] * 10, [0] * 52 + [1] * 32 + [2] * 16, None, 0.8013),
        ([0] * 46 + [1] * 44 + [2] * 10, [0] * 50 + [1] * 40 + [2] * 10, None, 0.9315),
        ([0] * 46 + [1] * 44 + [2] * 10, [0] * 50 + [1] * 40 + [2] * 10, "linear", 0.9412),
        ([0] * 46 + [1] * 44 + [2] * 10, [0] * 50 + [1] * 40 + [2] * 10, "quadratic", 0.9541),
    ],
)
def test_cohen_artstein_poesio(y1, y2, weights, published):
    n = len(y1)
    frame = pd.DataFrame({"item": list(range(n)) * 2, "annotator": ["A"] * n + ["B"] * n, "label": y1 + y2})
    est = stats.cohen_kappa(frame, "A", "B", categories=[0, 1, 2] if max(y1) == 2 else [0, 1], weights=weights)
    decimals = len(str(published).split(".")[1])
    assert round(est.value, decimals) == published
    assert est.n_items == n


@pytest.mark.parametrize("weights, irr_value", [(None, -0.006289308), ("linear", 0.1459075), ("quadratic", 0.2520325)])
def test_cohen_irr_anxiety_and_unused_category(weights, irr_value):
    r2, r3 = ANXIETY[:, 1], ANXIETY[:, 2]
    n = len(r2)
    frame = pd.DataFrame(
        {"item": list(range(n)) * 2, "annotator": ["r2"] * n + ["r3"] * n, "label": np.concatenate([r2, r3])}
    )
    # R irr kappa2(anxiety[, 2:3]) builds its scale from the levels present: 1, 2, 3, 4, 6.
    present = stats.cohen_kappa(frame, "r2", "r3", categories=[1, 2, 3, 4, 6], weights=weights)
    assert present.value == pytest.approx(irr_value, abs=1e-7)
    # Declaring the full 1..6 scale (5 unused) changes the weighted kappas, exactly as sklearn with labels=.
    full = stats.cohen_kappa(frame, "r2", "r3", categories=[1, 2, 3, 4, 5, 6], weights=weights)
    expected = cohen_kappa_score(r2, r3, labels=[1, 2, 3, 4, 5, 6], weights=weights)
    assert full.value == pytest.approx(expected, abs=1e-12)
    if weights is None:
        assert full.value == pytest.approx(present.value, abs=1e-12)
    else:
        assert abs(full.value - present.value) > 1e-3
