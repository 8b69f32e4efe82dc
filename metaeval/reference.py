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

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

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


@dataclass
class ReferenceInputs:
    """What a source may read: the human labels (long), the items and the label list."""

    labels: pd.DataFrame  # item, annotator, label (every human label, gold items included)
    items: pd.DataFrame  # item, gold_label
    categories: list[str]
    adjudicated: pd.Series | None = None  # item -> adjudicated label (annotation.adjudication.selectors)

    @cached_property
    def on_scale(self) -> pd.DataFrame:
        return self.labels.loc[self.labels["label"].isin(self.categories), ["item", "annotator", "label"]]

    @cached_property
    def dawid_skene(self) -> stats.AggregationFit | None:
        """One fit, shared by the reference and the per-annotator quality section."""
        if self.on_scale.empty:
            return None
        return stats.dawid_skene(self.on_scale, self.categories)


def _gold(inputs: ReferenceInputs) -> pd.Series:
    gold = inputs.items.set_index("item")["gold_label"]
    return gold[gold.isin(inputs.categories)]


def _majority(inputs: ReferenceInputs) -> pd.Series:
    if inputs.on_scale.empty:
        return pd.Series(dtype=object)
    return stats.majority_vote(stats.build_table(inputs.on_scale, inputs.categories)).labels()


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


def reference_labels(rule: str, inputs: ReferenceInputs) -> Reference:
    """Apply ``rule``: per item the first of its sources with a label."""
    reason = unavailable_rule_reason(rule)
    if reason:
        raise ValueError(reason)
    universe = pd.Index(pd.unique(pd.concat([inputs.on_scale["item"], _gold(inputs).index.to_series()])))
    labels = pd.Series(index=pd.Index([], dtype=object), dtype=object)
    source = pd.Series(index=pd.Index([], dtype=object), dtype=object)
    for name in REFERENCE_RULES[rule]:
        given = REFERENCE_SOURCES[name](inputs).dropna()
        new = given[~given.index.isin(labels.index) & given.index.isin(universe)]
        labels = pd.concat([labels, new.astype(object)])
        source = pd.concat([source, pd.Series(name, index=new.index, dtype=object)])
    return Reference(rule=rule, labels=labels, source=source, n_items=len(universe))
