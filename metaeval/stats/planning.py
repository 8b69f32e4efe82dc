"""Planning a study before it runs: how many items a question needs.

* Preference studies: the **exact** power of the two-sided sign test
  (binomial test of the preference share against 0.5 on decisive items,
  ties excluded) and the smallest number of decisive items reaching a target
  power; the normal approximation beside it. The exact power of a discrete
  test is not monotone in n (a saw-tooth), so we also give the n from which
  every larger n reaches the target. And the Wilson interval width of the
  preference share.
* Verification studies: the large-sample variance of Cohen's kappa between
  two raters (a verifier and the reference, or two humans) by the delta
  method on the multinomial cell probabilities (the asymptotic variance of
  Fleiss, Cohen & Everitt 1969), for a joint table with the expected label
  distribution on both sides and the expected kappa:
  ``P(a, b) = (1 - kappa) p_a p_b + kappa p_a [a == b]``. From it the items
  for a CI of a given width, and the items to tell two verifiers apart at a
  kappa difference (two-sided z test on the difference, the two kappas'
  variances added: exact if the verifiers err independently, conservative when
  their agreements are positively correlated, as on the same items they
  usually are).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from types import ModuleType

import numpy as np

__all__ = [
    "kappa_ci_items",
    "kappa_ci_width",
    "kappa_item_variance",
    "preference_ci_width",
    "preference_ci_items",
    "sign_test_items",
    "sign_test_power",
    "verifier_difference_items",
]

_MAX_ITEMS = 1_000_000


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported when first needed. Why: importing it takes about 1.5 s, and this module
    is imported with the planning page's URLs at every start of a process (each manage.py command,
    worker and web worker), most of which never plan a study."""
    from scipy import stats

    return stats


def _check_probability(name: str, value: float, *, open_interval: bool = True) -> float:
    value = float(value)
    ok = 0 < value < 1 if open_interval else 0 <= value <= 1
    if not ok or math.isnan(value):
        raise ValueError(f"{name} must be between 0 and 1 (exclusive), got {value}")
    return value


def _items(count: Callable[[], float]) -> int:
    """The number of items ``count()`` works out, rounded up; ValueError when it is beyond any count.

    Why: a level or power a hair from 0 or 1 (alpha=1e-45) puts a z at infinity, or a width near 0
    overflows a square, and OverflowError was a server error where the inputs deserve an answer.
    """
    try:
        value = count()
        if math.isfinite(value):
            return math.ceil(value)
    except OverflowError:
        pass
    raise ValueError("no finite number of items reaches this; check power, alpha, width and the kappas")


def _z(level: float) -> float:
    return float(_scipy_stats().norm.ppf(level))


def _sign_test_criticals(ns: np.ndarray, alpha: float) -> np.ndarray:
    """For each n, the largest k with P(X <= k | n, 0.5) <= alpha / 2 (-1 when none): reject if X <= k or X >= n - k.

    From the binomial quantile, corrected to the exact definition where floating point puts it one off;
    a few vectorised calls for any number of n. Why: the search over every k of every n took time
    quadratic in n, and a share near 0.5 (p=0.5001 asks for about 100,000 items) held a request
    for minutes.
    """
    binom = _scipy_stats().binom
    half = alpha / 2
    k = np.nan_to_num(binom.ppf(half, ns, 0.5), nan=-1.0).astype(np.int64)
    for _ in range(8):  # the quantile is exact or one off; each pass moves k one step towards the definition
        too_high = (k >= 0) & (binom.cdf(k, ns, 0.5) > half)
        too_low = (k < ns) & (binom.cdf(k + 1, ns, 0.5) <= half)
        if not (too_high.any() or too_low.any()):
            break
        k = k - too_high + too_low
    return np.maximum(k, -1)


def _sign_test_critical(n: int, alpha: float) -> int:
    """Largest k with P(X <= k | n, 0.5) <= alpha / 2 (-1 when none): reject if X <= k or X >= n - k."""
    return int(_sign_test_criticals(np.array([n]), alpha)[0])


def _sign_test_powers(ns: np.ndarray, p: float, alpha: float) -> np.ndarray:
    """Exact power of the two-sided sign test for each number of decisive items in ``ns``."""
    k = _sign_test_criticals(ns, alpha)
    binom = _scipy_stats().binom
    power = binom.cdf(k, ns, p) + binom.sf(ns - k - 1, ns, p)
    return np.where(k < 0, 0.0, power)


def sign_test_power(n: int, p: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided sign test on ``n`` decisive items when the true share is ``p``."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    _check_probability("alpha", alpha)
    p = _check_probability("p", p)
    return float(_sign_test_powers(np.array([n]), p, alpha)[0])


def sign_test_items(p: float, power: float = 0.8, alpha: float = 0.05, max_items: int = 100_000) -> dict:
    """Decisive items for the sign test to detect share ``p`` vs 0.5 at ``power`` and ``alpha``.

    ``n_exact``: smallest n whose exact power reaches ``power``; ``n_exact_stable``:
    smallest n from which every larger n (checked up to twice it) reaches it;
    ``n_normal``: the normal approximation (Lachin 1981 for one proportion).
    """
    p = _check_probability("p", p)
    power = _check_probability("power", power)
    alpha = _check_probability("alpha", alpha)
    if p == 0.5:
        raise ValueError("p must differ from 0.5: a share of exactly 0.5 is the null hypothesis")
    za, zb = _z(1 - alpha / 2), _z(power)
    n_normal = _items(lambda: ((za * 0.5 + zb * math.sqrt(p * (1 - p))) / (p - 0.5)) ** 2)
    limit = min(max(4 * n_normal + 50, 100), max_items)
    powers = _sign_test_powers(np.arange(1, limit + 1), p, alpha)
    reached = np.flatnonzero(powers >= power)
    if not len(reached):
        raise ValueError(f"more than {limit} decisive items are needed; check p, power and alpha")
    n_exact = int(reached[0]) + 1
    failing = np.flatnonzero(powers < power)
    n_stable = int(failing[-1]) + 2 if len(failing) else 1
    return {
        "p": p,
        "power": power,
        "alpha": alpha,
        "test": "two-sided exact sign (binomial) test vs 0.5, ties excluded",
        "n_exact": n_exact,
        "power_at_n_exact": float(powers[n_exact - 1]),
        "n_exact_stable": n_stable,
        "n_normal": n_normal,
    }


def preference_ci_width(n: int, p: float, confidence: float = 0.95) -> float:
    """Width of the Wilson interval of a preference share ``p`` observed on ``n`` decisive items."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    p = _check_probability("p", p, open_interval=False)
    z = _z(1 - (1 - _check_probability("confidence", confidence)) / 2)
    return float(2 * z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n))


def preference_ci_items(width: float, p: float = 0.5, confidence: float = 0.95) -> int:
    """Smallest n whose Wilson interval at share ``p`` is at most ``width`` wide."""
    width = _check_probability("width", width)
    n = 1
    while preference_ci_width(n, p, confidence) > width:
        n *= 2
        if n > _MAX_ITEMS:
            raise ValueError(f"more than {_MAX_ITEMS} items are needed for a width of {width}")
    lo, hi = n // 2, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if preference_ci_width(mid, p, confidence) <= width else (mid, hi)
    return hi


def _joint(kappa: float, marginals: Sequence[float]) -> np.ndarray:
    m = np.asarray(marginals, dtype=float)
    if m.ndim != 1 or len(m) < 2 or (m <= 0).any():
        raise ValueError("the label distribution needs at least two labels, each with a positive share")
    m = m / m.sum()
    pe = float((m * m).sum())
    kappa = float(kappa)
    low = -pe / (1 - pe)
    if not low <= kappa <= 1 or math.isnan(kappa):
        raise ValueError(f"kappa must be between {low:.3f} and 1 for this label distribution, got {kappa}")
    joint = (1 - kappa) * np.outer(m, m) + kappa * np.diag(m)
    if (joint < -1e-12).any():
        raise ValueError(f"kappa {kappa} is impossible with this label distribution")
    return np.clip(joint, 0, None)


def kappa_item_variance(kappa: float, marginals: Sequence[float]) -> float:
    """n x Var(kappa-hat) for two raters: the delta method on the multinomial cells."""
    p = _joint(kappa, marginals)
    k = len(p)
    po = float(np.trace(p))
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    pe = float(rows @ cols)
    if pe >= 1:
        raise ValueError("kappa is undefined when both raters always give one label")
    # d kappa / d p_ab = ([a == b](1 - pe) - (1 - po)(rows_b + cols_a)) / (1 - pe)^2
    grad = (np.eye(k) * (1 - pe) - (1 - po) * (cols[:, None] + rows[None, :])) / (1 - pe) ** 2
    g = grad.ravel()
    cells = p.ravel()
    return float(cells @ (g * g) - (cells @ g) ** 2)


def kappa_ci_width(n: int, kappa: float, marginals: Sequence[float], confidence: float = 0.95) -> float:
    """Expected width of the Wald interval of Cohen's kappa on ``n`` items."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    z = _z(1 - (1 - _check_probability("confidence", confidence)) / 2)
    return 2 * z * math.sqrt(kappa_item_variance(kappa, marginals) / n)


def kappa_ci_items(width: float, kappa: float, marginals: Sequence[float], confidence: float = 0.95) -> int:
    """Items for a kappa CI at most ``width`` wide (large-sample approximation)."""
    width = float(width)
    if not 0 < width <= 2:
        raise ValueError(f"width must be in (0, 2], got {width}")
    z = _z(1 - (1 - _check_probability("confidence", confidence)) / 2)
    return max(1, _items(lambda: (2 * z / width) ** 2 * kappa_item_variance(kappa, marginals)))


def verifier_difference_items(
    kappa_a: float, kappa_b: float, marginals: Sequence[float], power: float = 0.8, alpha: float = 0.05
) -> int:
    """Items to tell two verifiers apart (two-sided z test on the kappa difference)."""
    if kappa_a == kappa_b:
        raise ValueError("the two kappas must differ: equal kappas cannot be told apart")
    power = _check_probability("power", power)
    alpha = _check_probability("alpha", alpha)
    v = kappa_item_variance(kappa_a, marginals) + kappa_item_variance(kappa_b, marginals)
    za, zb = _z(1 - alpha / 2), _z(power)
    return max(1, _items(lambda: (za + zb) ** 2 * v / (kappa_a - kappa_b) ** 2))
