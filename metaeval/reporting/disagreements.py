"""Items on which annotators differ: the list a researcher reads to see why kappa is low."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .votes import votes_per_item

__all__ = ["disagreements"]


def _in_order(rows: pd.DataFrame) -> bool:
    """The rows are already sorted by position, item and annotator (as the study frame gives them).

    Why: sorting 300,000 labels again took 0.1 s of a big report; a stable sort of rows already
    in order leaves them as they are, so the list is the same whether or not they are sorted here.
    Values that do not compare (a missing item or annotator) leave the sort to pandas.
    """
    keys = [rows[name].to_numpy() for name in ("position", "item", "annotator")]
    if any(pd.isna(key).any() for key in keys):
        return False
    try:
        tied = np.ones(len(rows) - 1, dtype=bool)  # rows k and k+1 equal on every key so far
        for key in keys:
            before, later = key[:-1], key[1:]
            if (tied & (later < before)).any():
                return False
            tied &= later == before
    except TypeError:
        return False
    return True


def disagreements(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Every item with at least two different labels, most divided first.

    Each entry: ``item``, ``domain``, ``labels`` (annotator -> label, by
    pseudonym), ``pattern`` (e.g. ``"2-1"``) and the strict ``majority``
    label or None. Ordered by how split the item is (share of its most
    common label, lowest first), then by import order.

    Counted with arrays (an item's rows are contiguous once sorted by position and item, and
    each item's label counts are one row of a matrix): a Counter per item cost 0.5 s at
    100,000 items, a pandas group per item seconds. Only the entries are built in Python.
    """
    if frame.empty:
        return []
    rows = frame[["position", "item", "annotator", "label", "domain"]]
    if not _in_order(rows):
        rows = rows.sort_values(["position", "item", "annotator"])
    items = rows["item"].to_numpy()
    first_of_item = np.r_[True, items[1:] != items[:-1]]
    starts = np.flatnonzero(first_of_item)
    counts, names = votes_per_item(np.cumsum(first_of_item) - 1, rows["label"].astype(str))
    split = np.flatnonzero((counts > 0).sum(axis=1) > 1)
    if not len(split):
        return []
    counts = counts[split]
    top, n = counts.max(axis=1), counts.sum(axis=1)
    positions = rows["position"].to_numpy()[starts[split]]
    order = np.lexsort((positions, top / n))
    majority = np.where(2 * top > n, counts.argmax(axis=1), -1).tolist()
    shapes, shape_of = np.unique(-np.sort(-counts, axis=1), axis=0, return_inverse=True)  # "2-1", "1-1-1", ...
    shape_names = ["-".join(str(c) for c in shape if c) for shape in shapes.tolist()]
    patterns = [shape_names[i] for i in shape_of.reshape(-1).tolist()]
    first = starts[split]  # each split item's first row, in the item order
    lows, highs = first.tolist(), np.r_[starts, len(rows)][split + 1].tolist()
    item_names = rows["item"].to_numpy()[first].astype(str).tolist()
    domains = rows["domain"].to_numpy()[first].astype(str).tolist()
    annotators = rows["annotator"].astype(str).tolist()
    labels = rows["label"].astype(str).tolist()
    label_names = [str(name) for name in names]
    return [
        {
            "item": item_names[k],
            "domain": domains[k],
            "labels": dict(zip(annotators[lows[k] : highs[k]], labels[lows[k] : highs[k]], strict=True)),
            "pattern": patterns[k],
            "majority": label_names[majority[k]] if majority[k] >= 0 else None,
        }
        for k in order.tolist()
    ]
