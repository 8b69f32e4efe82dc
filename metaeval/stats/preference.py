"""Preference analysis on the 5-point scale a_strong ... b_strong.

A and B are the study's two systems in declared order; labels are stored in
system space (never "left"/"right"), so counting wins needs no display
information, while the position-bias test takes the stored display order.
Tests are exact binomial tests with ties excluded and counted.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .estimate import Estimate

__all__ = [
    "PREFERENCE_LABELS",
    "PREFERENCE_3WAY",
    "preference_counts",
    "preference_counts_by",
    "winners",
    "sign_test",
    "position_bias",
]

PREFERENCE_LABELS = ("a_strong", "a_slight", "tie", "b_slight", "b_strong")
#: The 3-way collapse used for agreement on direction only.
PREFERENCE_3WAY = {"a_strong": "a", "a_slight": "a", "tie": "tie", "b_slight": "b", "b_strong": "b"}


def _codes(labels: Sequence[str] | np.ndarray | pd.Series) -> np.ndarray:
    """Positions 0..4 on the scale; anything else is a ValueError naming it."""
    values = pd.Series(np.asarray(labels, dtype=object))
    codes = pd.Index(list(PREFERENCE_LABELS)).get_indexer(values).astype(np.int64)
    if (codes < 0).any():
        bad = pd.unique(values[codes < 0])[:10]
        raise ValueError(f"preference labels must be one of {PREFERENCE_LABELS!r}, got {list(bad)!r}")
    return codes


def preference_counts(
    labels: Sequence[str] | np.ndarray | pd.Series, systems: tuple[Hashable, Hashable] = ("a", "b")
) -> dict[str, Any]:
    """Wins, losses and ties per system, split strong / slight.

    ``{"n", "ties", "systems": {A: {"wins", "wins_strong", "wins_slight",
    "losses", "losses_strong", "losses_slight", "ties"}, B: {...}}}``.
    """
    c = np.bincount(_codes(labels), minlength=5)
    a_strong, a_slight, tie, b_slight, b_strong = (int(x) for x in c)
    a, b = systems

    def side(ws: int, wl: int, ls: int, ll: int) -> dict[str, int]:
        return {
            "wins": ws + wl,
            "wins_strong": ws,
            "wins_slight": wl,
            "losses": ls + ll,
            "losses_strong": ls,
            "losses_slight": ll,
            "ties": tie,
        }

    return {
        "n": int(c.sum()),
        "ties": tie,
        "systems": {a: side(a_strong, a_slight, b_strong, b_slight), b: side(b_strong, b_slight, a_strong, a_slight)},
    }


def preference_counts_by(
    labels: Sequence[str] | np.ndarray | pd.Series,
    groups: Sequence[Hashable],
    systems: tuple[Hashable, Hashable] = ("a", "b"),
) -> dict[Hashable, dict[str, Any]]:
    """``preference_counts`` per group (e.g. per domain), groups in sorted order."""
    labels = np.asarray(labels, dtype=object)
    group_values = np.asarray(groups, dtype=object)
    if len(labels) != len(group_values):
        raise ValueError("labels and groups differ in length")
    codes, uniques = pd.factorize(pd.Series(group_values), sort=True)
    return {uniques[g]: preference_counts(labels[codes == g], systems) for g in range(len(uniques))}


def winners(
    labels: Sequence[str] | np.ndarray | pd.Series, systems: tuple[Hashable, Hashable] = ("a", "b")
) -> np.ndarray:
    """The preferred system per label, None for a tie (object array)."""
    codes = _codes(labels)
    out = np.full(len(codes), None, dtype=object)
    out[codes <= 1] = systems[0]
    out[codes >= 3] = systems[1]
    return out


def _binomial(k: int, n: int, confidence: float) -> tuple[float, tuple[float, float]]:
    # Imported here: scipy.stats takes most of a second to import, at every process start otherwise.
    from scipy.stats import binomtest

    res = binomtest(k, n, 0.5, alternative="two-sided")
    ci = res.proportion_ci(confidence_level=confidence, method="exact")
    return float(res.pvalue), (float(ci.low), float(ci.high))


def sign_test(
    labels: Sequence[str] | np.ndarray | pd.Series,
    systems: tuple[Hashable, Hashable] = ("a", "b"),
    *,
    confidence: float = 0.95,
) -> Estimate:
    """Exact two-sided sign test: is one system preferred more often?

    Value is the share of decisive judgements that prefer the first system,
    with its exact (Clopper-Pearson) interval; ``p_value`` tests 0.5; ties are
    excluded and counted. Judgements of one item by several annotators are
    not independent: pass one label per item (e.g. the majority) for a
    conservative test.
    """
    c = np.bincount(_codes(labels), minlength=5)
    wins_a, ties, wins_b = int(c[0] + c[1]), int(c[2]), int(c[3] + c[4])
    n = wins_a + wins_b
    extra: dict[str, Any] = {
        "wins": {systems[0]: wins_a, systems[1]: wins_b},
        "ties": ties,
        "n_decisive": n,
        "test": "exact two-sided binomial sign test, ties excluded",
    }
    if n == 0:
        return Estimate(
            None, "no decisive judgement (all ties or no data)", 0, extra={**extra, "p_value": None, "preferred": None}
        )
    p_value, ci = _binomial(wins_a, n, confidence)
    preferred = systems[0] if wins_a > wins_b else systems[1] if wins_b > wins_a else None
    return Estimate(wins_a / n, None, n, ci=ci, extra={**extra, "p_value": p_value, "preferred": preferred})


def position_bias(
    shown_left: Sequence[Hashable] | np.ndarray | pd.Series,
    winner: Sequence[Hashable | None] | np.ndarray | pd.Series,
    *,
    confidence: float = 0.95,
) -> Estimate:
    """Does the system shown on the left win more often than chance?

    ``shown_left[i]`` is the system displayed left for judgement ``i``;
    ``winner[i]`` the system it preferred, or None/NaN for a tie (see
    ``winners``). Value is the share of decisive judgements won by the left
    side, with its exact interval and a two-sided binomial test of 0.5.
    """
    left = pd.Series(np.asarray(shown_left, dtype=object))
    won = pd.Series(np.asarray(winner, dtype=object))
    if len(left) != len(won):
        raise ValueError("shown_left and winner differ in length")
    if left.isna().any():
        raise ValueError("shown_left has missing values: the display order must be known for every judgement")
    decisive = won.notna().to_numpy()
    left_wins = int((left[decisive].to_numpy() == won[decisive].to_numpy()).sum())
    n = int(decisive.sum())
    extra: dict[str, Any] = {
        "left_wins": left_wins,
        "right_wins": n - left_wins,
        "ties": int(len(won) - n),
        "n_decisive": n,
        "test": "exact two-sided binomial test of left-side wins against 0.5, ties excluded",
    }
    if n == 0:
        return Estimate(None, "no decisive judgement (all ties or no data)", 0, extra={**extra, "p_value": None})
    p_value, ci = _binomial(left_wins, n, confidence)
    return Estimate(left_wins / n, None, n, ci=ci, extra={**extra, "p_value": p_value})
