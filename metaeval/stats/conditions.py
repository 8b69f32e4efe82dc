"""Between-subject conditions: does showing a verifier's label change what annotators answer?

A study may put each annotator in one condition (say ``no_suggestion`` and
``verifier_suggestion``, where an LLM verifier's predicted label is shown beside
the item). Automation bias shows as annotators who see the suggestion agreeing
with the verifier more than those who do not; whether they also agree more (or
less) with the reference label says whether the suggestion helps or misleads.

``compare_conditions`` reports, per condition, agreement with the reference
label, agreement with the verifier's label and the median active time per
answer, and for every other condition the difference to a baseline with an
interval and a two-sided p-value.

Clustering rule: annotators are nested in conditions and one annotator's
answers are correlated (one person's care, speed and trust in the verifier), so
the annotator, not the answer, is the unit of resampling. An interval
resamples annotators with replacement within each condition, taking all of an
annotator's answers along (a cluster bootstrap); a p-value permutes the
condition labels among annotators, keeping each annotator's answers together.
Treating answers as independent would give intervals that are too narrow and
tests that reject far too often (tests/stats/test_stats_conditions.py shows
it). Shares and medians are pooled over answers, so an annotator weighs by
the answers they gave.

Items are the same in every condition and are held fixed: an interval says how
much the difference would vary with other annotators on these items.

Every resample is a weighted sum: per annotator the counts ``k_a`` (answers
agreeing) and ``n_a`` (answers compared) are computed once, and a resample or a
permutation is a row of how often each annotator is drawn, so all of them are
one matrix product (for the medians, one product finds the block of sorted
answers holding the median and a cumulative sum inside that block the value).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from .bootstrap import percentile_ci
from .estimate import Estimate

__all__ = ["MEASURES", "CLUSTERING_RULE", "compare_conditions"]

#: The measures reported per condition, and differenced against the baseline.
MEASURES = ("agreement_with_reference", "agreement_with_verifier", "median_active_ms")

CLUSTERING_RULE = (
    "annotators are the unit: intervals resample annotators within each condition (all of an "
    "annotator's answers together); p-values permute condition labels among annotators"
)

_REQUIRED = ("annotator", "item", "condition", "label")
_CHUNK_ELEMENTS = 4_000_000  # weights held in memory at once for the medians (32 MB)
_TIE = 1e-12  # relative slack so a permuted difference equal to the observed one counts as extreme


def compare_conditions(
    rows: pd.DataFrame,
    *,
    baseline: Hashable,
    confidence: float = 0.95,
    n_boot: int = 2000,
    n_perm: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Per-condition agreement and time, and each condition minus ``baseline``.

    ``rows`` holds one answer a row: ``annotator``, ``item``, ``condition``,
    ``label`` and optionally ``reference`` (the gold or adjudicated label),
    ``verifier`` (the verifier's label for the item) and ``active_ms``; a
    missing reference, verifier label or time leaves the answer out of that
    measure only. Rows without a condition, annotator or label are left out and
    counted. Each annotator must be in one condition (between-subject), else
    ValueError; an unknown ``baseline`` is a ValueError too.

    Shares carry ``k`` and ``n`` beside them. Intervals are percentile cluster
    bootstraps over annotators (``n_boot`` resamples; 0 for none) and are
    undefined with fewer than 2 annotators with data in a condition. p-values
    are two-sided permutation tests of the condition labels among annotators:
    exact over all assignments when there are at most ``n_perm`` of them, else
    ``n_perm`` seeded random permutations with the +1 correction (Phipson and
    Smyth 2010), so a p-value is never 0. Resamples of a condition depend only
    on ``seed`` and its name, so adding a condition leaves the others' intervals
    unchanged.
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    if n_boot < 0 or n_perm < 0:
        raise ValueError("n_boot and n_perm must be at least 0")
    frame, left_out = _answers(rows)
    names = list(pd.unique(frame["condition"]))
    if baseline not in names:
        known = ", ".join(repr(n) for n in sorted(names, key=str)) or "none"
        raise ValueError(f"baseline condition {baseline!r} has no answers; conditions: {known}")
    _check_nested(frame)
    order = [baseline, *sorted((n for n in names if n != baseline), key=str)]
    groups = {name: _Group.of(frame.loc[frame["condition"] == name], rows.columns) for name in order}
    boots = {name: _draws(group.n_annotators, n_boot, seed, "bootstrap", name) for name, group in groups.items()}

    conditions: dict[Hashable, dict[str, Any]] = {}
    samples: dict[Hashable, dict[str, np.ndarray | None]] = {}
    for name, group in groups.items():
        out: dict[str, Any] = {"n_annotators": group.n_annotators, "n_answers": group.n_answers}
        samples[name] = {}
        draws = boots[name]
        for measure in MEASURES:
            data = group.measures[measure]
            dist = None if draws is None or not data.defined else data.on(draws)
            samples[name][measure] = dist
            out[measure] = _with_ci(data.estimate(name), dist, data, name, confidence, n_boot, seed)
        conditions[name] = out

    differences: dict[Hashable, dict[str, Any]] = {}
    for name in order[1:]:
        differences[name] = {
            measure: _difference(
                groups[name].measures[measure],
                groups[baseline].measures[measure],
                samples[name][measure],
                samples[baseline][measure],
                names=(name, baseline),
                measure=measure,
                confidence=confidence,
                n_boot=n_boot,
                n_perm=n_perm,
                seed=seed,
            )
            for measure in MEASURES
        }
    return {
        "baseline": baseline,
        "conditions": conditions,
        "differences": differences,
        "n_rows_left_out": left_out,
        "clustering": CLUSTERING_RULE,
        "confidence": confidence,
        "n_boot": n_boot,
        "n_perm": n_perm,
        "seed": seed,
    }


# --- input --------------------------------------------------------------------------


def _answers(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The rows that are answers (a condition, an annotator and a label), and how many were not."""
    missing = [c for c in _REQUIRED if c not in rows.columns]
    if missing:
        raise ValueError(f"rows lack the column(s) {', '.join(missing)}")
    left_out = {}
    keep = np.ones(len(rows), dtype=bool)
    for column, key in (("condition", "no_condition"), ("annotator", "no_annotator"), ("label", "no_label")):
        absent = rows[column].isna().to_numpy() & keep
        left_out[key] = int(absent.sum())
        keep &= ~absent
    return rows.loc[keep], left_out


def _check_nested(frame: pd.DataFrame) -> None:
    """Refuse annotators seen in more than one condition: the clustering rule assumes nesting."""
    per = frame.groupby("annotator", sort=True)["condition"].nunique()
    crossed = per.index[per.to_numpy() > 1].tolist()
    if crossed:
        shown = ", ".join(repr(a) for a in crossed[:5]) + (" ..." if len(crossed) > 5 else "")
        raise ValueError(
            f"{len(crossed)} annotator(s) answered in more than one condition ({shown}); "
            "conditions must be between-subject"
        )


def _agreement(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Per answer: does it have a ``column`` label, and does the answer equal it."""
    other = frame[column]
    has = other.notna().to_numpy()
    agree = np.zeros(len(frame), dtype=bool)
    if has.any():
        label = frame["label"].to_numpy(dtype=object)[has]
        agree[has] = np.asarray(label == other.to_numpy(dtype=object)[has], dtype=bool)
    return has, agree


# --- measures -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Share:
    """Agreements ``k`` out of ``n`` compared answers, per annotator."""

    k: np.ndarray
    n: np.ndarray
    missing: str  # why the share is undefined when no answer was compared

    @property
    def defined(self) -> bool:
        return int(self.n.sum()) > 0

    @property
    def n_with_data(self) -> int:
        return int((self.n > 0).sum())

    def estimate(self, condition: Hashable) -> Estimate:
        k, n = int(self.k.sum()), int(self.n.sum())
        extra = {"k": k, "n": n, "n_annotators": self.n_with_data}
        if n == 0:
            return Estimate(None, self.missing.format(condition=condition), 0, extra=extra)
        return Estimate(k / n, None, n, extra=extra)

    def on(self, weights: np.ndarray) -> np.ndarray:
        """The share on every row of annotator weights (B x A); NaN where nothing is compared."""
        num = weights @ self.k.astype(np.float64)
        den = weights @ self.n.astype(np.float64)
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)

    def with_data(self) -> _Share:
        keep = self.n > 0
        return _Share(self.k[keep], self.n[keep], self.missing)

    def pooled(self, other: _Share) -> _Share:
        return _Share(np.concatenate([self.k, other.k]), np.concatenate([self.n, other.n]), self.missing)


@dataclass(frozen=True)
class _Times:
    """Answer times, sorted, and the annotator (index) each belongs to."""

    values: np.ndarray
    owner: np.ndarray
    n_annotators: int
    missing: str

    @property
    def defined(self) -> bool:
        return len(self.values) > 0

    @property
    def n_with_data(self) -> int:
        return len(np.unique(self.owner))

    def estimate(self, condition: Hashable) -> Estimate:
        n = len(self.values)
        extra = {"n": n, "n_annotators": self.n_with_data}
        if n == 0:
            return Estimate(None, self.missing.format(condition=condition), 0, extra=extra)
        return Estimate(float(np.median(self.values)), None, n, extra=extra)

    def on(self, weights: np.ndarray) -> np.ndarray:
        return _weighted_medians(self.values, self.owner, weights)

    def with_data(self) -> _Times:
        present, owner = np.unique(self.owner, return_inverse=True)
        return _Times(self.values, owner.reshape(-1), len(present), self.missing)

    def pooled(self, other: _Times) -> _Times:
        values = np.concatenate([self.values, other.values])
        owner = np.concatenate([self.owner, other.owner + self.n_annotators])
        order = np.argsort(values, kind="stable")
        return _Times(values[order], owner[order], self.n_annotators + other.n_annotators, self.missing)


_Measure = _Share | _Times


def _pool(first: _Measure, second: _Measure) -> _Measure:
    """Both conditions' annotators as one measure, the first condition's first."""
    if isinstance(first, _Share) and isinstance(second, _Share):
        return first.pooled(second)
    if isinstance(first, _Times) and isinstance(second, _Times):
        return first.pooled(second)
    raise TypeError("only measures of one kind can be pooled")


def _weighted_medians(values: np.ndarray, owner: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of ``weights`` (B x annotators, integer), the median of ``values`` (sorted) when
    each is repeated as often as its owner is weighted; NaN where the weights leave none.

    The median of N values is the mean of the ((N+1)//2)-th and (N//2+1)-th, as
    ``numpy.median``. Why blocks: a cumulative sum over every answer of every
    resample costs B x answers; instead the sorted answers are cut into about
    sqrt(answers) blocks, one matrix product of the weights with each
    annotator's answers per block finds the block holding each position, and
    only that block's answers are summed one by one.
    """
    b, m = weights.shape[0], len(values)
    out = np.full(b, np.nan)
    if m == 0:
        return out
    n_owners = weights.shape[1]
    width = max(1, math.isqrt(m))
    starts = np.arange(0, m, width)
    per_block = np.bincount(owner * len(starts) + np.arange(m) // width, minlength=n_owners * len(starts))
    through = np.cumsum(per_block.reshape(n_owners, len(starts)), axis=1).astype(np.float64)  # A x blocks
    step = max(1, _CHUNK_ELEMENTS // max(len(starts), width))
    offsets = np.arange(width)
    for first in range(0, b, step):
        w = np.asarray(weights[first : first + step], dtype=np.int64)
        rows = np.arange(len(w))
        upto = np.rint(w.astype(np.float64) @ through).astype(np.int64)  # weighted answers through each block
        total = upto[:, -1]
        picked = []
        for position in ((total + 1) // 2, total // 2 + 1):
            block = np.minimum((upto < position[:, None]).sum(axis=1), len(starts) - 1)
            before = np.where(block > 0, upto[rows, block - 1], 0)
            idx = starts[block][:, None] + offsets
            inside = idx < m
            idx = np.minimum(idx, m - 1)
            cum = before[:, None] + np.cumsum(np.where(inside, w[rows[:, None], owner[idx]], 0), axis=1)
            at = np.minimum(starts[block] + (cum < position[:, None]).sum(axis=1), m - 1)
            picked.append(values[at])
        out[first : first + len(w)] = np.where(total > 0, (picked[0] + picked[1]) / 2, np.nan)
    return out


@dataclass(frozen=True)
class _Group:
    """One condition's answers, reduced to per-annotator counts and owned times."""

    n_annotators: int
    n_answers: int
    measures: dict[str, _Measure]

    @classmethod
    def of(cls, frame: pd.DataFrame, columns: pd.Index) -> _Group:
        codes, annotators = pd.factorize(frame["annotator"], sort=True)
        codes = np.asarray(codes, dtype=np.int64)
        a = len(annotators)
        measures: dict[str, _Measure] = {}
        for measure, column in (("agreement_with_reference", "reference"), ("agreement_with_verifier", "verifier")):
            if column in columns:
                has, agree = _agreement(frame, column)
                missing = f"no answer in condition {{condition!r}} has a {column} label"
            else:
                has, agree = np.zeros(len(frame), dtype=bool), np.zeros(len(frame), dtype=bool)
                missing = f"the rows have no {column!r} column"
            k = np.bincount(codes[agree], minlength=a)
            n = np.bincount(codes[has], minlength=a)
            measures[measure] = _Share(k, n, missing)
        if "active_ms" in columns:
            times = pd.to_numeric(frame["active_ms"], errors="coerce").to_numpy(dtype=np.float64)
            has = np.isfinite(times)
            missing = "no answer in condition {condition!r} has an active time"
        else:
            times, has = np.zeros(len(frame)), np.zeros(len(frame), dtype=bool)
            missing = "the rows have no 'active_ms' column"
        order = np.argsort(times[has], kind="stable")
        measures["median_active_ms"] = _Times(times[has][order], codes[has][order], a, missing)
        return cls(a, len(frame), measures)


# --- resampling ---------------------------------------------------------------------


def _rng(seed: int, *keys: Hashable) -> np.random.Generator:
    """A generator that depends only on the seed and the keys (names hashed stably, not by ``hash``)."""
    return np.random.default_rng([seed, *(zlib.crc32(repr(key).encode()) for key in keys)])


def _draws(n_annotators: int, n_boot: int, seed: int, *keys: Hashable) -> np.ndarray | None:
    """How often each annotator is drawn in every resample (n_boot x A), or None when none is asked for.

    Resample ``r`` draws ``rng.integers(0, A, size=(n_boot, A))[r]``.
    """
    if n_boot == 0 or n_annotators == 0:
        return None
    idx = _rng(seed, *keys).integers(0, n_annotators, size=(n_boot, n_annotators))
    idx += (np.arange(n_boot, dtype=np.int64) * n_annotators)[:, None]
    return np.bincount(idx.ravel(), minlength=n_boot * n_annotators).reshape(n_boot, n_annotators)


def _too_few(data: _Measure, condition: Hashable) -> str | None:
    if data.n_with_data < 2:
        return (
            f"fewer than 2 annotators in condition {condition!r} have answers for this measure: "
            "a bootstrap over annotators has no spread"
        )
    return None


def _ci_extra(confidence: float, n_boot: int, seed: int, dist: np.ndarray) -> dict[str, Any]:
    return {
        "ci_method": "percentile cluster bootstrap over annotators",
        "confidence": confidence,
        "n_resamples": n_boot,
        "n_undefined": int((~np.isfinite(dist)).sum()),
        "seed": seed,
    }


def _with_ci(
    est: Estimate,
    dist: np.ndarray | None,
    data: _Measure,
    condition: Hashable,
    confidence: float,
    n_boot: int,
    seed: int,
) -> Estimate:
    if not est.defined:
        return est
    if n_boot == 0 or dist is None:
        return est.with_ci(None, ci_unavailable="no resamples asked for (n_boot=0)")
    reason = _too_few(data, condition)
    if reason:
        return est.with_ci(None, ci_unavailable=reason)
    return est.with_ci(percentile_ci(dist, confidence), **_ci_extra(confidence, n_boot, seed, dist))


def _difference(
    cond: _Measure,
    base: _Measure,
    cond_dist: np.ndarray | None,
    base_dist: np.ndarray | None,
    *,
    names: tuple[Hashable, Hashable],
    measure: str,
    confidence: float,
    n_boot: int,
    n_perm: int,
    seed: int,
) -> Estimate:
    """Condition minus baseline, with a cluster-bootstrap interval and a permutation p-value."""
    name, baseline = names
    a, b = cond.estimate(name), base.estimate(baseline)
    extra: dict[str, Any] = {
        "condition": name,
        "baseline": baseline,
        "condition_value": a.value,
        "baseline_value": b.value,
        "n_annotators": {name: cond.n_with_data, baseline: base.n_with_data},
    }
    if isinstance(cond, _Share) and isinstance(base, _Share):
        extra["k"] = {name: a.extra["k"], baseline: b.extra["k"]}
        extra["n"] = {name: a.extra["n"], baseline: b.extra["n"]}
    for est in (a, b):
        if est.value is None:
            return Estimate(None, est.reason, 0, extra={**extra, "p_value": None})
    assert a.value is not None and b.value is not None  # for mypy: both checked just above
    observed = a.value - b.value
    diff = Estimate(observed, None, a.n_items + b.n_items, extra=extra)

    if n_boot == 0 or cond_dist is None or base_dist is None:
        diff = diff.with_ci(None, ci_unavailable="no resamples asked for (n_boot=0)")
    elif reason := (_too_few(cond, name) or _too_few(base, baseline)):
        diff = diff.with_ci(None, ci_unavailable=reason)
    else:
        dist = cond_dist - base_dist
        diff = diff.with_ci(percentile_ci(dist, confidence), **_ci_extra(confidence, n_boot, seed, dist))
    return diff.with_ci(diff.ci, **_permutation_test(cond, base, observed, n_perm, seed, (name, baseline, measure)))


def _assignments(n_pooled: int, n_cond: int, n_perm: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Rows of 0/1: which pooled annotators a permutation puts in the condition (the rest in the baseline).

    Every assignment when there are at most ``n_perm``, else ``n_perm`` random ones.
    """
    if math.comb(n_pooled, n_cond) <= n_perm:
        chosen = np.array(list(combinations(range(n_pooled), n_cond)), dtype=np.int64).reshape(-1, n_cond)
        member = np.zeros((len(chosen), n_pooled), dtype=np.int64)
        member[np.repeat(np.arange(len(chosen)), n_cond), chosen.ravel()] = 1
        yield member
        return
    first = np.zeros(n_pooled, dtype=np.int64)
    first[:n_cond] = 1
    step = max(1, _CHUNK_ELEMENTS // n_pooled)
    for start in range(0, n_perm, step):
        yield rng.permuted(np.tile(first, (min(step, n_perm - start), 1)), axis=1)


def _permutation_test(
    cond: _Measure, base: _Measure, observed: float, n_perm: int, seed: int, keys: tuple[Hashable, ...]
) -> dict[str, Any]:
    """Two-sided p-value of |condition - baseline| when condition labels are permuted among annotators.

    Only annotators with answers for the measure take part, so every
    permutation leaves each side some answers.
    """
    if n_perm == 0:
        return {"p_value": None, "p_value_unavailable": "no permutations asked for (n_perm=0)"}
    c, b = cond.with_data(), base.with_data()
    n_cond = c.n_with_data
    pooled = _pool(c, b)
    n_pooled = n_cond + b.n_with_data
    total = math.comb(n_pooled, n_cond)
    exact = total <= n_perm
    rng = _rng(seed, "permutation", *keys)
    extreme = 0
    slack = _TIE * max(1.0, abs(observed))
    for member in _assignments(n_pooled, n_cond, n_perm, rng):
        stat = pooled.on(member) - pooled.on(1 - member)
        extreme += int((np.abs(stat) >= abs(observed) - slack).sum())
    if exact:
        p_value, method = extreme / total, f"exact permutation test over all {total} assignments of annotators"
    else:
        p_value = (extreme + 1) / (n_perm + 1)
        method = "Monte Carlo permutation test of annotators' condition labels, (count + 1) / (n_perm + 1)"
    return {
        "p_value": min(1.0, p_value),
        "test": f"two-sided {method}",
        "n_permutations": total if exact else n_perm,
        "permutation_seed": None if exact else seed,
    }
