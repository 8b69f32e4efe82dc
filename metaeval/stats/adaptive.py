"""Adaptive overlap replayed on labels collected with a fixed N (issue 33): how many labels a study that asks
another annotator only while the answers so far do not reach k in agreement would have saved, and how
often its reference label (the majority of the labels it asked for) equals the full-N majority.

Pure pandas/numpy, so a researcher can replay a pilot's export in a notebook before choosing the rule;
Claimlab's own rule is annotation/workbench/adaptive.py, and this replays the same one: an item takes
labels in order, and stops once it holds at least ``n_min`` of which ``k`` agree, or ``n_max``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["adaptive_stop", "replay_adaptive"]


def adaptive_stop(labels: Sequence[Hashable], n_min: int, k: int, n_max: int) -> int:
    """How many of ``labels`` (in the order they were given) the rule asks for: the first count at which
    at least ``n_min`` are in and ``k`` of them agree, else ``min(n_max, len(labels))``."""
    if not 1 <= n_min <= n_max or not 2 <= k <= n_max:
        raise ValueError(f"need 1 <= n_min <= n_max and 2 <= k <= n_max, got n_min={n_min}, k={k}, n_max={n_max}")
    counts: Counter = Counter()
    for taken, label in enumerate(labels[:n_max], start=1):
        counts[label] += 1
        if taken >= n_min and counts[label] >= k:
            return taken
    return min(n_max, len(labels))


def _majority(labels: Sequence[Hashable]) -> Hashable | None:
    """The most frequent label, None on a tie for the top (no majority)."""
    top = Counter(labels).most_common(2)
    if not top or (len(top) == 2 and top[0][1] == top[1][1]):
        return None
    return top[0][0]


def replay_adaptive(
    frame: pd.DataFrame,
    *,
    n_min: int,
    k: int,
    n_max: int,
    item: str = "item",
    label: str = "label",
    order: str | None = None,
    n_orders: int = 0,
    seed: int = 0,
) -> dict[str, Any]:
    """Replay the rule on ``frame`` (one row per label; missing labels dropped first).

    The labels of an item are taken in ``order`` (a column, e.g. the slot or time; None: row order);
    with ``n_orders`` > 0 the replay is also repeated over that many seeded random orders of each
    item's labels, and the means reported (the collected order is one draw of many).

    Returns counts beside every share: the items and labels, labels the rule asks for and saves,
    items closed before n_max, and how many items' adaptive reference (the majority of the labels
    asked for) equals their full-N majority, among the items where both have one.
    """
    rows = frame.dropna(subset=[label])
    if order is not None:
        rows = rows.sort_values([item, order], kind="stable")
    groups = [list(values) for _, values in rows.groupby(item, sort=True)[label]]
    collected = _replay(groups, n_min, k, n_max)
    out: dict[str, Any] = {
        "rule": {"n_min": n_min, "agreement_needed": k, "n_max": n_max},
        "n_items": len(groups),
        "n_labels": int(sum(min(len(g), n_max) for g in groups)),
        **collected,
    }
    if n_orders > 0:
        rng = np.random.default_rng(seed)
        draws = [
            _replay([list(rng.permutation(np.array(g, dtype=object))) for g in groups], n_min, k, n_max)
            for _ in range(n_orders)
        ]
        out["random_orders"] = {
            "n_orders": n_orders,
            "seed": seed,
            "mean_labels_saved": float(np.mean([d["labels_saved"] for d in draws])),
            "mean_share_labels_saved": float(np.mean([d["share_labels_saved"] for d in draws])),
            "mean_share_reference_agrees": float(np.mean([d["share_reference_agrees"] for d in draws])),
            "min_share_reference_agrees": float(np.min([d["share_reference_agrees"] for d in draws])),
        }
    return out


def _replay(groups: list[list[Hashable]], n_min: int, k: int, n_max: int) -> dict[str, Any]:
    asked = [adaptive_stop(g, n_min, k, n_max) for g in groups]
    n_labels = sum(min(len(g), n_max) for g in groups)
    used = sum(asked)
    compared = agrees = 0
    for g, taken in zip(groups, asked, strict=True):
        full, adaptive = _majority(g[:n_max]), _majority(g[:taken])
        if full is None or adaptive is None:
            continue
        compared += 1
        agrees += int(full == adaptive)
    return {
        "labels_asked": used,
        "labels_saved": n_labels - used,
        "share_labels_saved": (n_labels - used) / n_labels if n_labels else None,
        "n_items_closed_early": sum(1 for g, taken in zip(groups, asked, strict=True) if taken < min(len(g), n_max)),
        "n_items_compared": compared,
        "n_reference_agrees": agrees,
        "share_reference_agrees": agrees / compared if compared else None,
    }
