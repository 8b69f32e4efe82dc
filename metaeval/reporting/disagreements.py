"""Items on which annotators differ: the list a researcher reads to see why kappa is low."""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["disagreements"]


def _pattern(counts: list[int]) -> str:
    return "-".join(str(c) for c in sorted(counts, reverse=True))


def disagreements(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Every item with at least two different labels, most divided first.

    Each entry: ``item``, ``domain``, ``labels`` (annotator -> label, by
    pseudonym), ``pattern`` (e.g. ``"2-1"``) and the strict ``majority``
    label or None. Ordered by how split the item is (share of its most
    common label, lowest first), then by import order.
    """
    if frame.empty:
        return []
    distinct = frame.groupby("item", sort=False)["label"].nunique()
    split = distinct.index[distinct.to_numpy() > 1]
    rows = frame.loc[frame["item"].isin(split)].sort_values(["position", "item", "annotator"])
    out: list[tuple[float, int, dict[str, Any]]] = []
    for item, group in rows.groupby("item", sort=False):
        counts = group["label"].value_counts()
        top = int(counts.iloc[0])
        n = len(group)
        majority = str(counts.index[0]) if 2 * top > n else None
        entry = {
            "item": str(item),
            "domain": str(group["domain"].iloc[0]),
            "labels": dict(zip(group["annotator"].astype(str), group["label"].astype(str), strict=True)),
            "pattern": _pattern(counts.tolist()),
            "majority": majority,
        }
        out.append((top / n, int(group["position"].iloc[0]), entry))
    out.sort(key=lambda t: (t[0], t[1]))
    return [entry for _, _, entry in out]
