"""From a long label table to the integer matrices every statistic reads.

Input is what Claimlab exports: one row per rating with columns ``item``,
``annotator`` and ``label``; a missing rating is an absent row. The table is
encoded once into integer codes, and from them we build, once:

* the items x categories count matrix (``numpy.bincount``), which Fleiss,
  percent agreement, AC1, Krippendorff alpha and the bootstrap all read;
* lazily, the items x annotators code matrix (-1 = missing) for Cohen kappa
  and per-annotator analyses.

Everything downstream works on these arrays, never on pandas groupbys, so a
100,000-item study costs milliseconds.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["RatingTable", "build_table", "table_from_codes", "collapse_labels"]


def _key_index(df: pd.DataFrame, columns: Sequence[str]) -> tuple[np.ndarray, pd.Index]:
    """Integer codes and the index of distinct keys for one or several columns."""
    if len(columns) == 1:
        codes, uniques = pd.factorize(df[columns[0]], sort=False, use_na_sentinel=True)
        if (codes < 0).any():
            raise ValueError(f"column {columns[0]!r} has missing values")
        return codes.astype(np.int64), pd.Index(uniques, name=columns[0])
    mi = pd.MultiIndex.from_frame(df[list(columns)])
    codes, uniques = mi.factorize(sort=False)
    if (codes < 0).any():
        raise ValueError(f"columns {list(columns)!r} have missing values")
    return codes.astype(np.int64), pd.MultiIndex.from_tuples(list(uniques), names=list(columns))


def _encode_labels(values: pd.Series, categories: Sequence[Hashable] | None) -> tuple[np.ndarray, tuple]:
    """Label codes in the declared order; undeclared labels are an error."""
    if categories is None:
        try:
            codes, uniques = pd.factorize(values, sort=True)
        except TypeError:  # mixed, unorderable labels: keep order of appearance
            codes, uniques = pd.factorize(values, sort=False)
        return codes.astype(np.int64), tuple(uniques.tolist())
    categories = tuple(categories)
    if len(set(categories)) != len(categories):
        raise ValueError(f"categories contain duplicates: {list(categories)!r}")
    codes = pd.Index(list(categories)).get_indexer(values).astype(np.int64)
    bad = (codes < 0) & values.notna().to_numpy()
    if bad.any():
        unknown = pd.unique(values[bad])
        shown = ", ".join(repr(u) for u in unknown[:10])
        more = f" (and {len(unknown) - 10} more)" if len(unknown) > 10 else ""
        raise ValueError(f"labels not in the declared categories {list(categories)!r}: {shown}{more}")
    return codes, categories


def _check_unique_ratings(
    item_code: np.ndarray,
    ann_code: np.ndarray,
    n_items: int,
    n_ann: int,
    item_index: pd.Index,
    annotator_index: pd.Index,
) -> None:
    """One annotator rates an item at most once; a duplicate is a data error."""
    key = item_code * n_ann + ann_code
    if n_items * n_ann <= 4 * len(key) + 1_000_000:
        dup_keys = np.flatnonzero(np.bincount(key, minlength=n_items * n_ann) > 1)
    else:
        k = np.sort(key)
        dup_keys = np.unique(k[1:][k[1:] == k[:-1]])
    if len(dup_keys):
        examples = [(item_index[k // n_ann], annotator_index[k % n_ann]) for k in dup_keys[:5]]
        raise ValueError(f"{len(dup_keys)} (item, annotator) pairs are rated more than once, e.g. {examples!r}")


def packed_rows(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Each row of a matrix of counts as one int64 (its digits in base max + 1): equal rows, equal keys.

    Returns (keys, the digits' powers, the base), or None when a row does not fit 62 bits.
    Why: distinct rows found by a 1-D unique or bincount of keys, not by comparing rows.
    """
    base = int(counts.max(initial=0)) + 1
    width = counts.shape[1]
    if width * np.log2(base) >= 62:
        return None
    powers = base ** np.arange(width, dtype=np.int64)
    return counts.astype(np.int64) @ powers, powers, base


def _count_matrix(item_code: np.ndarray, label_code: np.ndarray, n_items: int, n_cat: int) -> np.ndarray:
    return np.bincount(item_code * n_cat + label_code, minlength=n_items * n_cat).reshape(n_items, n_cat)


@dataclass(frozen=True, eq=False)
class RatingTable:
    """Integer-encoded ratings: long codes, the count matrix and key indexes.

    ``counts[i, k]`` is how many annotators gave item ``i`` category ``k``;
    ``item_index[i]`` / ``annotator_index[j]`` / ``categories[k]`` map codes
    back to the original keys.
    """

    item_index: pd.Index
    annotator_index: pd.Index
    categories: tuple
    item_code: np.ndarray
    annotator_code: np.ndarray
    label_code: np.ndarray
    counts: np.ndarray
    item_columns: tuple[str, ...] = ("item",)
    n_missing_dropped: int = 0

    @property
    def n_items(self) -> int:
        return self.counts.shape[0]

    @property
    def n_annotators(self) -> int:
        return len(self.annotator_index)

    @property
    def n_categories(self) -> int:
        return len(self.categories)

    @property
    def n_ratings(self) -> int:
        return len(self.label_code)

    @cached_property
    def ratings_per_item(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @cached_property
    def codes(self) -> np.ndarray:
        """items x annotators label codes, -1 where an annotator did not rate."""
        out = np.full((self.n_items, self.n_annotators), -1, dtype=np.int64)
        out[self.item_code, self.annotator_code] = self.label_code
        return out

    @cached_property
    def patterns(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct count rows and each item's row id: (P x K rows, n ids).

        Per-item statistics depend on an item only through its count row, and
        real studies have few distinct rows (10 for 3 raters x 3 labels), so
        the bootstrap works on pattern frequencies instead of items.
        """
        counts = self.counts
        if counts.shape[0] == 0:
            return counts[:0], np.zeros(0, dtype=np.int64)
        packed = packed_rows(counts)
        if packed is not None:
            key, powers, base = packed
            k = counts.shape[1]
            if base**k <= 4 * len(key) + (1 << 16):
                # Small key space (the usual case): a bincount instead of a sort.
                seen = np.flatnonzero(np.bincount(key, minlength=base**k))
                ids = np.full(base**k, -1, dtype=np.int64)
                ids[seen] = np.arange(len(seen))
                return (seen[:, None] // powers) % base, ids[key]
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            return counts[first], inverse.astype(np.int64).ravel()
        rows, inverse = np.unique(counts, axis=0, return_inverse=True)
        return rows, inverse.astype(np.int64).ravel()

    @cached_property
    def pair_confusions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Confusion matrices of every annotator pair that shares an item.

        Returns (codes of a, codes of b, confusions (Q, K, K)) with a < b,
        rows = a's label. Built once per table: unweighted and weighted Cohen
        kappas all read it.
        """
        k = self.n_categories
        n_ann = self.n_annotators
        if n_ann < 2 or self.n_items == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros((0, k, k), dtype=np.int64)
        if n_ann * (n_ann - 1) // 2 * self.n_items <= 20_000_000:
            # Few annotators: one pass over the dense code matrix per pair.
            codes = self.codes
            a_list, b_list, confs = [], [], []
            for a in range(n_ann - 1):
                ca = codes[:, a]
                has_a = ca >= 0
                for b in range(a + 1, n_ann):
                    cb = codes[:, b]
                    both = has_a & (cb >= 0)
                    if both.any():
                        a_list.append(a)
                        b_list.append(b)
                        confs.append(np.bincount(ca[both] * k + cb[both], minlength=k * k).reshape(k, k))
            if not confs:
                return (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros((0, k, k), dtype=np.int64))
            return np.array(a_list), np.array(b_list), np.stack(confs)
        return _sparse_pair_confusions(self)

    def label_of(self, codes: np.ndarray) -> np.ndarray:
        """Category labels for an array of codes (object array)."""
        cats = np.asarray(self.categories, dtype=object)
        return cats[np.asarray(codes)]

    def item_codes_for(self, frame: pd.DataFrame, columns: Sequence[str] | None = None) -> np.ndarray:
        """Positions of ``frame``'s item keys in this table (-1 when absent)."""
        cols = list(columns or self.item_columns)
        if len(cols) != len(self.item_columns):
            raise ValueError(f"items are keyed by {list(self.item_columns)!r}, got columns {cols!r}")
        if len(cols) == 1:
            return self.item_index.get_indexer(pd.Index(frame[cols[0]]))
        return self.item_index.get_indexer(pd.MultiIndex.from_frame(frame[cols]))

    def select_items(self, mask: np.ndarray) -> RatingTable:
        """The ratings of the items where ``mask`` is true (e.g. one domain)."""
        mask = np.asarray(mask, dtype=bool)
        keep = mask[self.item_code]
        return _from_codes(
            self.item_code[keep],
            self.annotator_code[keep],
            self.label_code[keep],
            self.item_index,
            self.annotator_index,
            self.categories,
            self.item_columns,
            self.n_missing_dropped,
        )

    # Keys are the table's categories, of whatever type they are (`Any`: `Mapping` is invariant
    # in its key type, so `Mapping[Hashable, ...]` would refuse a `dict[str, str]`).
    def collapse(
        self, mapping: Mapping[Any, Hashable | None], categories: Sequence[Hashable] | None = None
    ) -> RatingTable:
        """Map every category through ``mapping`` (None drops the rating).

        Used for the binary collapse of a study's labels, e.g. supported vs
        unsupported. The new category order is ``categories`` or the order in
        which mapped values first appear along the old declared order.
        """
        missing = [c for c in self.categories if c not in mapping]
        if missing:
            raise ValueError(f"collapse mapping has no entry for categories {missing!r}")
        targets = [mapping[c] for c in self.categories]
        if categories is None:
            new_cats: list = []
            for t in targets:
                if t is not None and t not in new_cats:
                    new_cats.append(t)
        else:
            new_cats = list(categories)
            bad = [t for t in targets if t is not None and t not in new_cats]
            if bad:
                raise ValueError(f"collapse targets not in the declared categories {new_cats!r}: {bad!r}")
        lookup = np.array([-1 if t is None else new_cats.index(t) for t in targets], dtype=np.int64)
        new_codes = lookup[self.label_code] if len(lookup) else self.label_code
        keep = new_codes >= 0
        return _from_codes(
            self.item_code[keep],
            self.annotator_code[keep],
            new_codes[keep],
            self.item_index,
            self.annotator_index,
            tuple(new_cats),
            self.item_columns,
            self.n_missing_dropped,
        )


def _sparse_pair_confusions(table: RatingTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pair confusions from the long codes, for many sparse annotators (crowds).

    Ratings sorted by (item, annotator); offset d pairs each rating with the
    d-th next one of the same item, so no annotators x annotators loop.
    """
    k = table.n_categories
    n_ann = table.n_annotators
    order = np.lexsort((table.annotator_code, table.item_code))
    it, an, lb = table.item_code[order], table.annotator_code[order], table.label_code[order]
    keys, la, lbb = [], [], []
    for d in range(1, int(table.ratings_per_item.max())):
        same = it[:-d] == it[d:]
        keys.append(an[:-d][same] * n_ann + an[d:][same])
        la.append(lb[:-d][same])
        lbb.append(lb[d:][same])
    key = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
    if len(key) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros((0, k, k), dtype=np.int64)
    uniq, pair = np.unique(key, return_inverse=True)
    flat = pair.ravel() * (k * k) + np.concatenate(la) * k + np.concatenate(lbb)
    conf = np.bincount(flat, minlength=len(uniq) * k * k).reshape(len(uniq), k, k)
    return uniq // n_ann, uniq % n_ann, conf


def _from_codes(
    item_code: np.ndarray,
    ann_code: np.ndarray,
    label_code: np.ndarray,
    item_index: pd.Index,
    annotator_index: pd.Index,
    categories: tuple,
    item_columns: tuple[str, ...],
    n_missing_dropped: int,
) -> RatingTable:
    """Assemble a table, dropping items and annotators left without ratings."""
    n_items = len(item_index)
    used = np.bincount(item_code, minlength=n_items) > 0
    if not used.all():
        remap = np.cumsum(used) - 1
        item_code = remap[item_code]
        item_index = item_index[used]
    used_ann = np.bincount(ann_code, minlength=len(annotator_index)) > 0
    if not used_ann.all():
        remap = np.cumsum(used_ann) - 1
        ann_code = remap[ann_code]
        annotator_index = annotator_index[used_ann]
    counts = _count_matrix(item_code, label_code, len(item_index), len(categories))
    return RatingTable(
        item_index=item_index,
        annotator_index=annotator_index,
        categories=tuple(categories),
        item_code=item_code,
        annotator_code=ann_code,
        label_code=label_code,
        counts=counts,
        item_columns=tuple(item_columns),
        n_missing_dropped=n_missing_dropped,
    )


def build_table(
    frame: pd.DataFrame,
    categories: Sequence[Hashable] | None = None,
    *,
    item: str | Sequence[str] = "item",
    annotator: str = "annotator",
    label: str = "label",
) -> RatingTable:
    """Encode a long label table (one row per rating) into a ``RatingTable``.

    ``categories`` is the full declared, ordered label list; a label outside
    it is a ``ValueError`` naming it, and declared-but-unused categories are
    kept (weighted kappa and chance terms depend on them). Without it the
    observed labels are used, sorted. Rows whose label is missing (NaN/None)
    are dropped and counted: a missing rating is an absent row. ``item`` may
    name several columns for a composite key, e.g. ``["bbcid", "system"]``.
    """
    item_cols = (item,) if isinstance(item, str) else tuple(item)
    needed = [*item_cols, annotator, label]
    absent = [c for c in needed if c not in frame.columns]
    if absent:
        raise ValueError(f"label table lacks columns {absent!r} (has {list(frame.columns)!r})")
    present = frame[label].notna().to_numpy()
    n_missing = int((~present).sum())
    if n_missing:
        frame = frame.loc[present]
    label_code, cats = _encode_labels(frame[label], categories)
    item_code, item_index = _key_index(frame, item_cols)
    ann_code, ann_index = _key_index(frame, (annotator,))
    _check_unique_ratings(item_code, ann_code, len(item_index), len(ann_index), item_index, ann_index)
    counts = _count_matrix(item_code, label_code, len(item_index), len(cats))
    return RatingTable(
        item_index=item_index,
        annotator_index=ann_index,
        categories=tuple(cats),
        item_code=item_code,
        annotator_code=ann_code,
        label_code=label_code,
        counts=counts,
        item_columns=item_cols,
        n_missing_dropped=n_missing,
    )


def table_from_codes(
    item_code: np.ndarray,
    items: pd.Index,
    annotator_code: np.ndarray,
    annotators: pd.Index,
    label_code: np.ndarray,
    categories: Sequence[Hashable],
) -> RatingTable:
    """The ``RatingTable`` that ``build_table`` gives for ratings whose items and annotators are already codes.

    ``item_code``, ``annotator_code`` and ``label_code`` index ``items``, ``annotators`` (each
    named as its column) and ``categories``: every rating is on the scale. Items and
    annotators are numbered by first appearance, as ``build_table``'s factorisation numbers
    them, so every statistic and interval is the same. Why: a study's labels come from the
    database as codes into its items and members, and laying 300,000 item names out only to
    factorise them again took a fifth of a big report's first sections.
    """
    cats = tuple(categories)
    label_code = np.asarray(label_code, dtype=np.int64)
    if len(label_code) and not 0 <= label_code.min() <= label_code.max() < len(cats):
        raise ValueError(f"label codes outside the {len(cats)} categories {list(cats)!r}")
    item_code, item_index = _by_first_appearance(np.asarray(item_code, dtype=np.int64), items)
    ann_code, ann_index = _by_first_appearance(np.asarray(annotator_code, dtype=np.int64), annotators)
    _check_unique_ratings(item_code, ann_code, len(item_index), len(ann_index), item_index, ann_index)
    return RatingTable(
        item_index=item_index,
        annotator_index=ann_index,
        categories=cats,
        item_code=item_code,
        annotator_code=ann_code,
        label_code=label_code,
        counts=_count_matrix(item_code, label_code, len(item_index), len(cats)),
        item_columns=(str(items.name),),
    )


def _by_first_appearance(codes: np.ndarray, keys: pd.Index) -> tuple[np.ndarray, pd.Index]:
    """``codes`` renumbered 0, 1, ... in the order each first appears, and the keys they now index."""
    used, first = np.unique(codes, return_index=True)
    order = used[np.argsort(first, kind="stable")]
    renumber = np.empty(len(keys), dtype=np.int64)
    renumber[order] = np.arange(len(order), dtype=np.int64)
    return renumber[codes], keys[order]


def collapse_labels(
    frame: pd.DataFrame, mapping: Mapping[Hashable, Hashable | None], *, label: str = "label"
) -> pd.DataFrame:
    """A copy of ``frame`` with labels mapped (None drops the row).

    Every label must have an entry, so a typo cannot silently vanish.
    """
    values = frame[label]
    present = values.dropna().unique()
    missing = [v for v in present if v not in mapping]
    if missing:
        raise ValueError(f"collapse mapping has no entry for labels {missing!r}")
    out = frame.copy()
    out[label] = values.map(dict(mapping))
    return out.loc[out[label].notna()].reset_index(drop=True)


def as_table(
    data: RatingTable | pd.DataFrame, categories: Iterable[Hashable] | None = None, **columns: Any
) -> RatingTable:
    """Accept either a built table or a long DataFrame (built on the fly)."""
    if isinstance(data, RatingTable):
        if categories is not None and tuple(categories) != data.categories:
            raise ValueError("categories given for an already built table differ from its categories")
        return data
    return build_table(data, None if categories is None else list(categories), **columns)
