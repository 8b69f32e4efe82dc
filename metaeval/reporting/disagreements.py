"""Items on which annotators differ: the list a researcher reads to see why kappa is low."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import cached_property
from typing import Any, overload

import numpy as np
import pandas as pd

from metaeval.label_rows import LabelRows
from metaeval.stats.json_rows import Coded, RecordWindows, SpilledTexts, coded, record_texts
from metaeval.stats.scores import rows_are_lazy
from metaeval.stats.table import packed_rows

from .votes import votes_per_item

__all__ = ["DisagreementRows", "disagreements", "SPILL_MIN_DISAGREEMENTS"]

logger = logging.getLogger(__name__)

#: From how many entries the report cache's build writes the disagreement list's text while it builds
#: (``DisagreementRows.spill``) rather than when it stores the report.
SPILL_MIN_DISAGREEMENTS = 10_000


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


def disagreements(frame: pd.DataFrame | LabelRows) -> list[dict[str, Any]] | DisagreementRows:
    """Every item with at least two different labels, most divided first.

    Each entry: ``item``, ``domain``, ``labels`` (annotator -> label, by
    pseudonym), ``pattern`` (e.g. ``"2-1"``) and the strict ``majority``
    label or None. Ordered by how split the item is (share of its most
    common label, lowest first), then by import order.

    Counted with arrays (an item's rows are contiguous once sorted by position and item, and
    each item's label counts are one row of a matrix): a Counter per item cost 0.5 s at
    100,000 items, a pandas group per item seconds. Only the entries are built in Python.

    ``frame`` may be the study frame's rows as codes (``LabelRows``, e.g. ``StudyFrame.agreed_rows``):
    the same list, counted from the codes without laying the labels out (``_of_codes``); inside
    ``stats.scores.lazy_response_rows`` (the report cache's build) it is then a ``DisagreementRows``.
    """
    if isinstance(frame, LabelRows):
        found = _of_codes(frame)
        if found is not None:
            if not rows_are_lazy():
                return found[:]
            if len(found) >= SPILL_MIN_DISAGREEMENTS:
                found.spill()
            return found
        frame = frame.frame()  # not in the order the list needs: sorted below, as always
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


def _of_codes(rows: LabelRows) -> DisagreementRows | None:
    """``disagreements`` of ``rows.frame()``, counted from the codes; None when the rows are not already in
    the list's order (by position, item and annotator, which ``disagreements`` would sort them into).

    Why: laying 300,000 labels out as a frame only to check their order and count them cost about
    0.2 s of a 100,000-item report; the codes give each item's rows (contiguous) and labels directly.
    """
    if not len(rows):
        return DisagreementRows.empty()
    place, items = rows.place, rows.items
    positions = items["position"].to_numpy().astype("int64")
    item_names = items["item"].to_numpy()
    annotator_rank, _ = rows.annotators_by_name  # equal ranks: equal pseudonyms
    if not _codes_in_order(place, positions, item_names, annotator_rank[rows.annotator]):
        return None
    first_of_item = np.r_[True, place[1:] != place[:-1]]
    starts = np.flatnonzero(first_of_item)
    labels = pd.Series(rows.label, copy=False).astype(str)
    counts, names = votes_per_item(np.cumsum(first_of_item) - 1, labels)
    split = np.flatnonzero((counts > 0).sum(axis=1) > 1)
    if not len(split):
        return DisagreementRows.empty()
    counts = counts[split]
    top, n = counts.max(axis=1), counts.sum(axis=1)
    first = starts[split]  # each split item's first row, in the item order
    order = np.lexsort((positions[place[first]], top / n))
    majority = np.where(2 * top > n, counts.argmax(axis=1), -1)
    shapes, shape_of = _shapes(-np.sort(-counts, axis=1))  # "2-1", "1-1-1", ...
    shape_names = ["-".join(str(c) for c in shape if c) for shape in shapes.tolist()]
    return DisagreementRows(
        order=order,
        item=item_names[place[first]].astype(str),
        domain=items["domain"].to_numpy()[place[first]].astype(str),
        lows=first,
        highs=np.r_[starts, len(place)][split + 1],
        annotator=rows.annotator,
        annotator_names=np.asarray(rows.annotator_names, dtype=object).astype(str),
        label=labels.to_numpy(dtype=object),
        pattern=np.asarray(shape_names, dtype=object)[shape_of.reshape(-1)],
        majority=np.array([str(name) for name in names] + [None], dtype=object)[majority],
    )


def _shapes(sorted_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``sorted_counts`` and each row's among them (``np.unique(..., axis=0)``'s grouping;
    only the names of the rows are used, so their order does not matter). Each row packed into one int64
    where it fits: ``np.unique`` along rows compares them as records, 0.06 s for 50,000 items."""
    packed = packed_rows(sorted_counts)
    if packed is None:
        rows, inverse = np.unique(sorted_counts, axis=0, return_inverse=True)
        return rows, inverse.reshape(-1)
    _, first, inverse = np.unique(packed[0], return_index=True, return_inverse=True)
    return sorted_counts[first], inverse.reshape(-1)


def _codes_in_order(place: np.ndarray, positions: np.ndarray, item_names: np.ndarray, annotator: np.ndarray) -> bool:
    """``_in_order`` of the rows' (position, item, annotator) keys, from the codes: items in place order
    (positions, then names where positions tie) and each item's annotators by name."""
    if len(place) < 2:
        return True
    moves = place[1:] != place[:-1]
    if (place[1:] < place[:-1]).any() or (annotator[1:] < annotator[:-1])[~moves].any():
        return False
    before, later = place[:-1][moves], place[1:][moves]
    if (positions[later] < positions[before]).any():
        return False
    tied = positions[later] == positions[before]
    if tied.any():
        try:
            return bool((item_names[later[tied]] > item_names[before[tied]]).all())
        except TypeError:
            return False
    return True


class DisagreementRows(Sequence[dict[str, Any]]):
    """The disagreement list kept as arrays; a slice is made into entries (``disagreements``') when read, and
    ``json_text`` writes a slice's JSON straight from the arrays (``stats.json_rows``), as the report cache
    stores it. Entry ``k`` is split item ``order[k]``; its labels are rows ``lows[i]:highs[i]``."""

    def __init__(
        self,
        *,
        order: np.ndarray,
        item: np.ndarray,
        domain: np.ndarray,
        lows: np.ndarray,
        highs: np.ndarray,
        annotator: np.ndarray,
        annotator_names: np.ndarray,
        label: np.ndarray,
        pattern: np.ndarray,
        majority: np.ndarray,
    ) -> None:
        self._order, self._item, self._domain = order, item, domain
        self._lows, self._highs = lows, highs
        self._annotator, self._annotator_names, self._label = annotator, annotator_names, label
        self._pattern, self._majority = pattern, majority
        self._windows: RecordWindows | None = None
        self._spilled: SpilledTexts | None = None

    @classmethod
    def empty(cls) -> DisagreementRows:
        none = np.zeros(0, dtype=np.int64)
        nothing = np.zeros(0, dtype=object)
        return cls(
            order=none, item=nothing, domain=nothing, lows=none, highs=none, annotator=none,
            annotator_names=nothing, label=nothing, pattern=nothing, majority=nothing,
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, int):
            position = range(len(self))[index]  # IndexError as a list gives it
            return self[position : position + 1][0]
        if self._spilled is not None:
            return self._spilled.records(range(len(self))[index])
        chosen = self._order[index].tolist()
        if not chosen:
            return []
        lows, highs = self._bounds
        annotators, labels = self._row_values
        return [
            {
                "item": str(self._item[k]),
                "domain": str(self._domain[k]),
                "labels": dict(zip(annotators[lows[k] : highs[k]], labels[lows[k] : highs[k]], strict=True)),
                "pattern": self._pattern[k],
                "majority": self._majority[k],
            }
            for k in chosen
        ]

    @cached_property
    def _bounds(self) -> tuple[list[int], list[int]]:
        return self._lows.tolist(), self._highs.tolist()

    @cached_property
    def _row_values(self) -> tuple[list[str], list[str]]:
        """Each label row's annotator and label, as the entries hold them (read once, for any slice)."""
        return self._annotator_names[self._annotator].tolist(), self._label.tolist()

    @cached_property
    def _label_texts(self) -> tuple[np.ndarray, list[str]]:
        """(each split item's kind of labels object, the JSON text of each kind): items whose annotators gave
        the same labels share one text, written once (a few kinds where a few annotators label)."""
        pair = self._annotator * (int(self._label_codes.max(initial=0)) + 1) + self._label_codes
        _, first, kind = np.unique(
            _sequence_keys(pair, self._lows, self._highs), return_index=True, return_inverse=True
        )
        texts = []
        for k in first.tolist():
            lo, hi = int(self._lows[k]), int(self._highs[k])
            names = self._annotator_names[self._annotator[lo:hi]].tolist()
            texts.append(json.dumps(dict(zip(names, self._label[lo:hi].tolist(), strict=True)), allow_nan=False))
        return kind.reshape(-1), texts

    @cached_property
    def _label_codes(self) -> np.ndarray:
        codes, _ = pd.factorize(self._label)
        return codes.astype(np.int64)

    def spill(self) -> None:
        """Write the entries' text to a temporary file now (``json_rows.SpilledTexts``); ``json_text`` and slices
        then read it back (the same text, the same entries).

        Why: the report cache's build calls this once the list is counted, so its text (0.1 s at 50,000 entries)
        is written while the process alongside the build still computes the domains' agreement, not after the
        build, when the report is stored and nothing else runs.
        """
        if self._spilled is not None:
            return
        try:
            self._spilled = SpilledTexts(self._record_texts, len(self))
        except OSError as error:  # no temporary folder, or a full one: the text is written when it is stored
            logger.warning("disagreement list kept in memory: no temporary file (%s)", error)

    def json_text(self, start: int, stop: int) -> str:
        """``json.dumps(self[start:stop], allow_nan=False)``, written from the arrays (``stats.json_rows``)."""
        if self._spilled is not None:
            return self._spilled.json_text(start, stop)
        if self._windows is None:
            self._windows = RecordWindows(self._record_texts, len(self))
        return self._windows.json_text(start, stop)

    def _record_texts(self, start: int, stop: int) -> list[str]:
        chosen = self._order[start:stop]
        kind, texts = self._label_texts
        return record_texts(
            ["item", "domain", "labels", "pattern", "majority"],
            [
                coded(self._item[chosen]),
                coded(self._domain[chosen]),
                Coded(kind[chosen], texts),
                coded(self._pattern[chosen]),
                coded(self._majority[chosen]),
            ],
        )


def _sequence_keys(values: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """One key per run ``values[lows[i]:highs[i]]`` (values >= 0, runs not empty): equal runs, equal keys."""
    lengths = highs - lows
    base = int(values.max(initial=0)) + 2
    if len(lows) and lengths.min() > 0 and int(lengths.max()) * np.log2(base) < 62:
        # each run as one int64: its values + 1 as the digits of a number in base `base`
        offsets = np.r_[0, np.cumsum(lengths)[:-1]]
        within = np.arange(int(lengths.sum())) - np.repeat(offsets, lengths)
        digits = (values[np.repeat(lows, lengths) + within] + 1) * base ** within.astype(np.int64)
        return np.add.reduceat(digits, offsets)
    keys: dict[bytes, int] = {}
    runs = zip(lows.tolist(), highs.tolist(), strict=True)
    return np.array([keys.setdefault(values[lo:hi].tobytes(), len(keys)) for lo, hi in runs], dtype=np.int64)
