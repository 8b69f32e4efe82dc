"""One reference label per item, from a rule the report names.

A **source** gives some items a label (``gold``: the items' gold labels;
``majority``: the strict majority of the human labels, ties give none;
``dawid_skene``: the most likely label of a Dawid-Skene fit on the human
labels). A **rule** is an ordered list of sources: per item the first source
that has a label wins, and the report counts how many items each source
provided and how many got none.

The rule is the report option ``reference`` when given, else the study's
``reference_rule`` (default ``adjudicated_else_majority``, which is the
majority until an item is adjudicated). ``adjudicated`` labels come from
``annotation.adjudication.selectors.adjudicated_labels``: items whose
adjudicators disagree have none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np
import pandas as pd

from metaeval import stats

__all__ = [
    "DEFAULT_RULE",
    "REFERENCE_RULES",
    "REFERENCE_SOURCES",
    "Reference",
    "ReferenceInputs",
    "reference_labels",
    "unavailable_rule_reason",
]

DEFAULT_RULE = "majority"

#: rule name -> the sources it tries, in order.
REFERENCE_RULES: dict[str, tuple[str, ...]] = {
    "gold": ("gold",),
    "majority": ("majority",),
    "dawid_skene": ("dawid_skene",),
    "adjudicated": ("adjudicated",),
    "adjudicated_else_majority": ("adjudicated", "majority"),
}

RULE_DESCRIPTIONS = {
    "gold": "the items' gold labels; items without one have no reference",
    "majority": "the strict majority of the human labels; items where the humans tie have no reference",
    "dawid_skene": "the most likely label of a Dawid-Skene model fitted to every human label (EM, 1979)",
    "adjudicated": "the adjudicators' labels",
    "adjudicated_else_majority": "the adjudicators' label where there is one, else the strict human majority",
}


class LabelCodes(Protocol):
    """What ``ReferenceInputs.labels`` already are as codes (``metaeval.label_rows.LabelRows``)."""

    def name_table(self, categories: Sequence[str]) -> stats.RatingTable: ...

    def ratings(self, categories: Sequence[str]) -> stats.Ratings: ...

    def labelled_on(self, categories: Sequence[str]) -> np.ndarray: ...

    @property
    def item_names(self) -> pd.Index: ...


@dataclass
class ReferenceInputs:
    """What a source may read: the human labels (long), the items and the label list.

    ``codes``: the same labels as codes (the study frame's ``LabelRows``, whose ``frame()`` gives
    ``labels``). With them the majority's table, the Dawid-Skene encoding and the items asked about
    come from the codes, equal to what the strings give, without factorising the strings again.
    """

    labels: pd.DataFrame  # item, annotator, label (every human label, gold items included)
    items: pd.DataFrame  # item, gold_label
    categories: list[str]
    adjudicated: pd.Series | None = None  # item -> adjudicated label (annotation.adjudication.selectors)
    codes: LabelCodes | None = None

    @cached_property
    def on_scale(self) -> pd.DataFrame:
        return self.labels.loc[self.labels["label"].isin(self.categories), ["item", "annotator", "label"]]

    @cached_property
    def gold(self) -> pd.Series:
        """The items' gold labels on the categories, by item (the gold source; read by several)."""
        gold = self.items.set_index("item")["gold_label"]
        return gold[gold.isin(self.categories)]

    @cached_property
    def any_on_scale(self) -> bool:
        """Some human label is on the categories (``not on_scale.empty``)."""
        if self.codes is not None:
            return bool(self.labelled.any())
        return not self.on_scale.empty

    @cached_property
    def labelled(self) -> np.ndarray:
        """With ``codes``: one bool per item of the codes, the item has a label on the categories."""
        assert self.codes is not None
        return self.codes.labelled_on(self.categories)

    @cached_property
    def table(self) -> stats.RatingTable:
        """``build_table`` of the labels on the categories (the majority source's, and the scores' human verdicts)."""
        if self.codes is not None:
            return self.codes.name_table(self.categories)
        return stats.build_table(self.on_scale, self.categories)

    @cached_property
    def ratings(self) -> stats.Ratings | pd.DataFrame:
        """The labels on the categories as the aggregation models read them: their ``Ratings`` with ``codes``,
        else the long table (each model encodes it). Dawid-Skene, MACE and the quality section share it."""
        if self.codes is not None:
            return self.codes.ratings(self.categories)
        return self.on_scale

    @cached_property
    def dawid_skene(self) -> stats.AggregationFit | None:
        """One fit, shared by the reference and the per-annotator quality section."""
        if not self.any_on_scale:
            return None
        return stats.dawid_skene(self.ratings, self.categories)

    def universe(self) -> pd.Index:
        """The items the rule is asked about: every item with a human label on the categories or a gold label."""
        if self.codes is None:
            return pd.Index(pd.unique(pd.concat([self.on_scale["item"], _gold(self).index.to_series()])))
        labelled, gold = self.codes.item_names[self.labelled], _gold(self).index
        return labelled.append(gold[~gold.isin(labelled)]) if len(gold) else labelled


def _gold(inputs: ReferenceInputs) -> pd.Series:
    return inputs.gold


def _majority(inputs: ReferenceInputs) -> pd.Series:
    if not inputs.any_on_scale:
        return pd.Series(dtype=object)
    return stats.majority_vote(inputs.table).labels()


def _dawid_skene(inputs: ReferenceInputs) -> pd.Series:
    fit = inputs.dawid_skene
    return fit.labels if fit is not None else pd.Series(dtype=object)


def _adjudicated(inputs: ReferenceInputs) -> pd.Series:
    """The adjudicators' label where they agree (items where they differ have none here)."""
    if inputs.adjudicated is None or inputs.adjudicated.empty:
        return pd.Series(dtype=object)
    return inputs.adjudicated[inputs.adjudicated.isin(inputs.categories)]


#: source name -> function giving item -> label.
REFERENCE_SOURCES: dict[str, Callable[[ReferenceInputs], pd.Series]] = {
    "gold": _gold,
    "majority": _majority,
    "dawid_skene": _dawid_skene,
    "adjudicated": _adjudicated,
}


def unavailable_rule_reason(rule: str) -> str | None:
    """Why ``rule`` cannot be used (unknown, or a source not built yet), or None."""
    if rule not in REFERENCE_RULES:
        return f"reference must be one of {', '.join(REFERENCE_RULES)}, got {rule!r}"
    missing = [s for s in REFERENCE_RULES[rule] if s not in REFERENCE_SOURCES]
    if missing:
        return f"the reference rule {rule!r} needs {', '.join(missing)} labels, which this Claimlab cannot give yet"
    return None


@dataclass(frozen=True)
class Reference:
    """The reference label per item and where each came from."""

    rule: str
    labels: pd.Series  # item -> label (items with a reference only)
    source: pd.Series  # item -> source name
    n_items: int  # items the rule was asked about (every item with a human label or a gold label)

    def summary(self) -> dict[str, Any]:
        counts = {name: int((self.source == name).sum()) for name in REFERENCE_RULES[self.rule]}
        counts["none"] = self.n_items - len(self.labels)
        return {
            "rule": self.rule,
            "description": RULE_DESCRIPTIONS[self.rule],
            "sources": list(REFERENCE_RULES[self.rule]),
            "n_items": self.n_items,
            "counts": counts,
        }


#: The sources whose items are always among those the rule is asked about (``ReferenceInputs.universe``):
#: they label only items with a human label on the categories, or gold items.
_WITHIN_UNIVERSE = frozenset({"gold", "majority", "dawid_skene"})


def reference_labels(rule: str, inputs: ReferenceInputs) -> Reference:
    """Apply ``rule``: per item the first of its sources with a label."""
    reason = unavailable_rule_reason(rule)
    if reason:
        raise ValueError(reason)
    universe = inputs.universe()
    labels = pd.Series(index=pd.Index([], dtype=object), dtype=object)
    source = pd.Series(index=pd.Index([], dtype=object), dtype=object)
    for name in REFERENCE_RULES[rule]:
        given = REFERENCE_SOURCES[name](inputs).dropna()
        # the items no earlier source gave a label, among those the rule is asked about; a lookup of every
        # item's name is left out where it cannot drop one (0.07 s at 100,000 items)
        keep = np.ones(len(given), dtype=bool)
        if len(labels):
            keep &= ~given.index.isin(labels.index)
        if name not in _WITHIN_UNIVERSE:
            keep &= given.index.isin(universe)
        new = given if keep.all() else given[keep]
        labels = pd.concat([labels, new.astype(object)])
        source = pd.concat([source, pd.Series(name, index=new.index, dtype=object)])
    return Reference(rule=rule, labels=labels, source=source, n_items=len(universe))
