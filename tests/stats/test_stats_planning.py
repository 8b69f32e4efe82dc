"""Planning numbers against independent computations (scipy's binomial test, statsmodels, simulation)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint, proportion_effectsize, samplesize_confint_proportion

from metaeval.stats import planning


def _binomtest_power(n: int, p: float, alpha: float) -> float:
    """Power by scipy's own exact binomial test: sum P(k) over the k it rejects."""
    reject = [k for k in range(n + 1) if st.binomtest(k, n, 0.5).pvalue <= alpha]
    return float(sum(st.binom.pmf(k, n, p) for k in reject))


def test_veriscore_style_preference_study_needs_90_decisive_items_for_80_percent_power_at_065():
    plan = planning.sign_test_items(0.65, power=0.8, alpha=0.05)
    assert plan["n_exact"] == 90
    # independent: scipy's binomtest decides rejection; 89 items fall short, 90 reach 80 %
    assert _binomtest_power(90, 0.65, 0.05) == pytest.approx(plan["power_at_n_exact"], abs=1e-12)
    assert _binomtest_power(90, 0.65, 0.05) >= 0.8 > _binomtest_power(89, 0.65, 0.05)
    assert all(_binomtest_power(n, 0.65, 0.05) < 0.8 for n in range(60, 90))
    # the normal approximations agree within a few items (statsmodels, arcsine effect size)
    sm = NormalIndPower().solve_power(proportion_effectsize(0.65, 0.5), alpha=0.05, power=0.8, ratio=0)
    assert plan["n_normal"] == 85 and round(sm) == 85
    assert plan["n_exact_stable"] >= plan["n_exact"]
    assert all(
        _binomtest_power(n, 0.65, 0.05) >= 0.8 for n in range(plan["n_exact_stable"], plan["n_exact_stable"] + 5)
    )


@pytest.mark.parametrize("p", [0.3, 0.6, 0.75])
def test_exact_sign_test_power_matches_scipy_binomtest(p):
    for n in (10, 25, 51):
        assert planning.sign_test_power(n, p) == pytest.approx(_binomtest_power(n, p, 0.05), abs=1e-12)


def test_preference_ci_width_is_statsmodels_wilson():
    lo, hi = proportion_confint(65, 100, method="wilson")
    assert planning.preference_ci_width(100, 0.65) == pytest.approx(hi - lo, abs=1e-12)
    n = planning.preference_ci_items(0.1, 0.5)
    assert planning.preference_ci_width(n, 0.5) <= 0.1 < planning.preference_ci_width(n - 1, 0.5)
    # Wilson needs a few items fewer than the Wald sample size for half-width 0.05 (statsmodels: 384.1)
    assert 0 < samplesize_confint_proportion(0.5, 0.05) - n < 5


def test_kappa_variance_matches_simulation_with_a_fixed_seed():
    marginals, kappa, n = np.array([0.7, 0.2, 0.1]), 0.6, 300
    joint = (1 - kappa) * np.outer(marginals, marginals) + kappa * np.diag(marginals)
    rng = np.random.default_rng(0)
    kappas = []
    for _ in range(3000):
        c = rng.multinomial(n, joint.ravel()).reshape(3, 3) / n
        po, pe = np.trace(c), c.sum(axis=1) @ c.sum(axis=0)
        kappas.append((po - pe) / (1 - pe))
    assert np.mean(kappas) == pytest.approx(kappa, abs=0.01)
    assert np.var(kappas) * n == pytest.approx(planning.kappa_item_variance(kappa, marginals), rel=0.08)


def test_binary_kappa_variance_is_the_textbook_closed_form():
    """Equal marginals p, 1-p: the delta method gives Bloch & Kraemer (1989, Biometrics 45, eq. for the intraclass kappa)."""
    p, k = 0.3, 0.5
    closed = (1 - k) * ((1 - k) * (1 - 2 * k) + k * (2 - k) / (2 * p * (1 - p)))
    assert planning.kappa_item_variance(k, [p, 1 - p]) == pytest.approx(closed, rel=1e-9)


def test_kappa_ci_items_reach_the_width_and_difference_items_grow_as_the_gap_shrinks():
    m = [0.6, 0.25, 0.15]
    n = planning.kappa_ci_items(0.2, 0.6, m)
    assert planning.kappa_ci_width(n, 0.6, m) <= 0.2 < planning.kappa_ci_width(n - 1, 0.6, m)
    wide = planning.verifier_difference_items(0.5, 0.7, m)
    narrow = planning.verifier_difference_items(0.5, 0.6, m)
    assert narrow > 3 * wide


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="null hypothesis"):
        planning.sign_test_items(0.5)
    with pytest.raises(ValueError, match="power"):
        planning.sign_test_items(0.6, power=1.2)
    with pytest.raises(ValueError, match="kappa"):
        planning.kappa_ci_items(0.1, -1.5, [0.5, 0.5])
    with pytest.raises(ValueError, match="label distribution"):
        planning.kappa_ci_items(0.1, 0.5, [1.0])
    with pytest.raises(ValueError, match="differ"):
        planning.verifier_difference_items(0.5, 0.5, [0.5, 0.5])
