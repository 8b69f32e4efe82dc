"""A study's counted labels as codes into its items and annotators, before they are laid out as a frame.

Why: the first sections of a big study's report (counts, agreement on all labels, the human
ceiling) need only the agreement table, and the codes give it directly
(``stats.table_from_codes``). Laying 300,000 labels' strings out in ``label_frame``'s frame
and factorising them back into a table took about 0.4 s of those sections; ``frame`` lays
them out for the sections that need the strings, once the first ones are on screen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from . import stats

__all__ = ["LABEL_COLUMNS", "ITEM_COLUMNS", "LabelRows"]

LABEL_COLUMNS = [
    "item",
    "annotator",
    "label",
    "domain",
    "left_system",
    "response_id",
    "system",
    "gold_label",
    "position",
]
ITEM_COLUMNS = ["item", "domain", "response_id", "system", "gold_label", "position"]


@dataclass(frozen=True)
class LabelRows:
    """Each counted label as its item's row in ``items`` and its annotator's place in ``annotator_names``.

    Rows are in ``label_frame``'s order: by item (import order), then by annotator name.
    """

    items: pd.DataFrame  # every item of the study, in import order (ITEM_COLUMNS, the primary key "id", "is_check")
    place: np.ndarray  # each label's item: its row in ``items``; non-decreasing
    annotator: np.ndarray  # each label's annotator: its place in ``annotator_names``
    annotator_names: pd.api.extensions.ExtensionArray  # pseudonyms, ordered by name, then user id
    label: pd.api.extensions.ExtensionArray
    left_system: pd.api.extensions.ExtensionArray

    def __len__(self) -> int:
        return len(self.place)

    def select(self, keep: np.ndarray) -> LabelRows:
        """The labels where ``keep`` (one bool per label) is true, in the same order."""
        rows = np.flatnonzero(keep)
        return LabelRows(
            self.items,
            self.place[rows],
            self.annotator[rows],
            self.annotator_names,
            self.label.take(rows),
            self.left_system.take(rows),
        )

    def without_gold(self) -> LabelRows:
        """The labels of items without a gold label (what agreement counts unless gold items are in it)."""
        not_gold = (self.items["gold_label"] == "").to_numpy()
        return self if not_gold.all() else self.select(not_gold[self.place])

    def on_items(self, kept: np.ndarray) -> LabelRows:
        """The labels of the items where ``kept`` (one bool per row of ``items``) is true: one numpy take."""
        return self if kept.all() else self.select(kept[self.place])

    def check_items(self) -> np.ndarray:
        """One bool per row of ``items``: the item is used as an attention or qualification check (``Item.is_check``)."""
        if "is_check" not in self.items:
            return np.zeros(len(self.items), dtype=bool)
        return self.items["is_check"].to_numpy(dtype=bool)

    def frame(self) -> pd.DataFrame:
        """``label_frame``'s frame of these labels: each with its item's columns and its annotator's name."""
        # `take` on the columns' own string arrays: going through object arrays (and pandas inferring
        # their type again) cost 0.05 s at 300,000 labels
        of_item = {
            name: self.items[name].array.take(self.place)
            for name in ("item", "domain", "response_id", "system", "gold_label")
        }
        columns = {
            **of_item,
            "label": self.label,
            "left_system": self.left_system,
            "annotator": self.annotator_names.take(self.annotator),
            "position": self.items["position"].to_numpy()[self.place].astype("int64"),
        }
        return pd.DataFrame(columns, columns=LABEL_COLUMNS)

    def n_items(self) -> int:
        """How many items have at least one of these labels."""
        return int(np.count_nonzero(np.diff(self.place))) + 1 if len(self.place) else 0

    def per_annotator(self) -> list[tuple[str, int]]:
        """(pseudonym, number of labels) for each annotator with a label, by pseudonym."""
        counts: Counter[str] = Counter()
        for k, n in enumerate(np.bincount(self.annotator, minlength=len(self.annotator_names)).tolist()):
            if n:
                counts[str(self.annotator_names[k])] += n
        return sorted(counts.items())

    def rating_table(self, categories: Sequence[str]) -> tuple[stats.RatingTable, int, list[str]]:
        """The table of the labels on ``categories`` (``agreement_table``'s), how many are not, and which labels those are."""
        codes = pd.Index(list(categories)).get_indexer(self.label)
        on_scale = codes >= 0
        off_scale = sorted({str(label) for label in pd.unique(self.label[~on_scale])})
        table = stats.table_from_codes(
            self.place[on_scale],
            pd.Index(self.items["item"].array, name="item"),
            self.annotator[on_scale],
            pd.Index(self.annotator_names, name="annotator"),
            codes[on_scale],
            categories,
        )
        return table, int(np.count_nonzero(~on_scale)), off_scale

    # --- the same codes for every later section (the reference, quality, scores, disagreements) -----------
    # Why: each of those sections factorised the laid-out frame's item, annotator and label strings again
    # (pandas hashing 300,000 strings per column, about 0.6 s of a 100,000-item report in all); these
    # give the very tables and encodings they built, from the codes read once.

    @cached_property
    def _labels_factorised(self) -> tuple[np.ndarray, pd.api.extensions.ExtensionArray]:
        codes, uniques = pd.factorize(self.label)
        return codes, uniques

    def label_codes(self, categories: Sequence[str]) -> np.ndarray:
        """Each label's place in ``categories``, -1 off them: ``pd.Index(categories).get_indexer(label)``,
        from one factorisation of the labels shared by every caller."""
        codes, uniques = self._labels_factorised
        lookup = np.append(pd.Index(list(categories)).get_indexer(uniques), -1)  # the last: a missing label's -1
        return lookup[codes]

    @cached_property
    def annotators_by_name(self) -> tuple[np.ndarray, pd.Index]:
        """(each annotator's code among the distinct pseudonyms, those pseudonyms sorted): what factorising the
        frame's ``annotator`` column by name gives (two members with one pseudonym are one annotator there)."""
        codes, names = pd.factorize(self.annotator_names, sort=True)
        return codes.astype(np.int64), pd.Index(names, name="annotator")

    @cached_property
    def item_names(self) -> pd.Index:
        """The items' external ids (unique in a study), in the rows' ``place`` numbering."""
        return pd.Index(self.items["item"].array, name="item")

    def _on_scale(self, categories: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        codes = self.label_codes(categories)
        on = codes >= 0
        by_name, _ = self.annotators_by_name
        return self.place[on], by_name[self.annotator[on]], codes[on]

    def name_table(self, categories: Sequence[str]) -> stats.RatingTable:
        """``stats.build_table`` of ``frame()``'s labels on ``categories`` (annotators by pseudonym, as there)."""
        place, annotator, codes = self._on_scale(categories)
        return stats.table_from_codes(place, self.item_names, annotator, self.annotators_by_name[1], codes, categories)

    def ratings(self, categories: Sequence[str]) -> stats.Ratings:
        """``frame()``'s labels on ``categories`` as the Dawid-Skene / MACE / quality encoding (``stats.Ratings``:
        items and annotators sorted by name, as their ``_encode`` factorises them). Raises without such labels."""
        place, annotator, codes = self._on_scale(categories)
        return stats.ratings_from_codes(
            place, self.item_names, annotator, self.annotators_by_name[1], codes, categories
        )

    def labelled_on(self, categories: Sequence[str]) -> np.ndarray:
        """One bool per row of ``items``: the item has a label on ``categories``."""
        place, _, _ = self._on_scale(categories)
        return np.bincount(place, minlength=len(self.items)) > 0

    def labels_per_item(self) -> pd.Series:
        """How many labels each item with one has (on the scale or not), by item."""
        counts = np.bincount(self.place, minlength=len(self.items))
        labelled = np.flatnonzero(counts)
        return pd.Series(counts[labelled], index=pd.Index(self.items["item"].array.take(labelled), name="item"))

    def domains_of(self, items: pd.Index) -> np.ndarray:
        """The domain of each of ``items`` (names of items of the study)."""
        at = pd.Index(self.items["item"].array).get_indexer(items)
        return self.items["domain"].to_numpy()[at]
