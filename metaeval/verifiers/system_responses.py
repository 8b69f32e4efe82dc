"""The claims' responses, grouped once per report for every verifier's system-level correlation.

Why (issue 35): each verifier's correlation needs, per response, the mean of the humans' and of the
verifier's supported calls on its claims. Grouping a million claims by their response ids (strings) and
putting each source's labels on them by item id took 1.5 s per verifier in pandas, and with a response per
claim the report's verifier sections were 10x their bare metrics. The grouping, the claims' item positions
and the humans' calls are the same for every verifier: they are made once here, and a verifier's means are
two ``np.bincount`` over integer codes.

The numbers are those of ``claims.groupby("response", sort=False).agg(system="first", human="mean",
verifier="mean")``: responses in the order they first appear, a response's system its first claim's, means
over the claims that have a call. Every call is 0 or 1, so the sums are exact and so are the means.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from metaeval.stats.scores import first_rows, response_keys

__all__ = ["ResponseGroups"]


class ResponseGroups:
    """The claims of ``items`` that name a system, grouped by response (an item without a response id is its
    own response: ``response_keys``, the scores' rule), with the humans' supported calls on them."""

    def __init__(self, items: pd.DataFrame, role: dict[str, float], majority: pd.Series) -> None:
        with_system = (items["system"] != "").to_numpy(dtype=bool)
        claims = items[with_system]
        key = response_keys(items["response_id"].to_numpy(), items["item"].to_numpy())[with_system]
        codes, uniques = pd.factorize(key, sort=False, use_na_sentinel=True)
        self._role, self._items = role, items["item"]
        self._claim_of_row = np.where(with_system, np.cumsum(with_system) - 1, -1)  # each row of items: its claim
        self._codes = codes
        self._n = len(uniques)
        first = first_rows(codes, self._n)
        self._index = pd.Index(uniques, name="response")
        self._system = claims["system"].to_numpy(dtype=object)[first]
        if not majority.index.is_unique:
            raise ValueError("one majority label per item is expected")
        # the majority's few items hashed, the claims looked up in them (not a million claims hashed)
        on_majority = majority.index.get_indexer(claims["item"])
        human = np.append(self._role_values(majority.to_numpy(dtype=object)), np.nan)
        self._human = self._means(human[on_majority])  # -1, no majority: the NaN appended

    def responses(self, labelled: pd.DataFrame) -> pd.DataFrame:
        """Per response: its system and the humans' and the verifier's mean supported call (NaN without one).

        ``labelled``: the verifier's ``item`` and ``label``, one row per item, and ``item_row`` (each item's row
        in ``items``, as ``current_predictions`` gives it on the same items), or without it found by item id."""
        if "item_row" in labelled:
            claim = self._claim_of_row[labelled["item_row"].to_numpy()]
        else:
            claim = pd.Index(self._items.to_numpy(dtype=object)).get_indexer(labelled["item"])
            claim = np.where(claim >= 0, self._claim_of_row[claim], -1)
        found = claim >= 0
        seen = np.zeros(len(self._codes), dtype=bool)
        seen[claim[found]] = True
        if int(seen.sum()) != int(found.sum()):
            raise ValueError("one label per item is expected")  # as Series.map by such a series would raise
        calls = np.full(len(self._codes), np.nan)
        calls[claim[found]] = self._role_values(labelled["label"].to_numpy(dtype=object))[found]
        return pd.DataFrame(
            {"system": self._system, "human": self._human, "verifier": self._means(calls)}, index=self._index
        )

    def _role_values(self, labels: np.ndarray) -> np.ndarray:
        """Each label's supported call: 1.0, 0.0, or NaN (no label, or one the binary map leaves out)."""
        codes, distinct = pd.factorize(labels, use_na_sentinel=True)
        values = np.array([self._role.get(label, np.nan) for label in distinct] + [np.nan], dtype=np.float64)
        return values[codes]  # -1 (a missing label): the NaN appended

    def _means(self, calls: np.ndarray) -> np.ndarray:
        counted = ~np.isnan(calls) & (self._codes >= 0)
        codes = self._codes[counted]
        sums = np.bincount(codes, weights=calls[counted], minlength=self._n)
        counts = np.bincount(codes, minlength=self._n)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
