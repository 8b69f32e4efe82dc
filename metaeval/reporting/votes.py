"""How many times each item received each label: the matrix the disagreement list and the adjudication queue read."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["votes_per_item"]


def votes_per_item(
    item_code: np.ndarray, labels: pd.Series | pd.api.extensions.ExtensionArray
) -> tuple[np.ndarray, pd.Index]:
    """(items x labels counts, the labels' names): row i counts the labels of the rows whose item code is i.

    ``item_code`` numbers the items 0..n-1 (``pd.factorize``, or the groups of rows sorted by item).
    """
    label_code, names = pd.factorize(labels)
    votes = np.zeros((int(item_code.max(initial=-1)) + 1, len(names)), dtype=np.int64)
    np.add.at(votes, (item_code, label_code), 1)
    return votes, pd.Index(names)
