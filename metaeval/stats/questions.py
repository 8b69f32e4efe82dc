"""Statistics of a study's extra questions: answer distributions, agreement and per-claim scores.

Answers arrive as a long table, one row per answer: ``item``, ``annotator``,
``question`` (the question's key), ``target`` (empty/None for the item, a
system name for one list of a preference item, ``"<system>#<claim index>"``
for one claim of a list) and ``value`` (int for likert, an option for single,
a list of options for multi, True/False for check, a number for number, a
string for text), plus any
grouping columns (``label``, ``system``, ``condition``, ...). A missing value
is an unanswered question: left out and counted.

A question is described by a dict::

    {"key": "confidence", "type": "likert", "scale": [1, 5], "target": "item"}
    {"key": "supported", "type": "single", "options": ["yes", "no", "unsure"], "target": "claim"}
    {"key": "verifiable", "type": "check", "target": "claim"}

Other fields of a stored definition (prompt, anchors, min, max, ...) are ignored.

Why a module of its own: the main label has its own tables and rules, while
extra questions differ in type (each type has its own level of measurement)
and in what they are attached to, and a per-claim question is clustered in
responses, which every interval here respects by resampling items, not units.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from .agreement import (
    Level,
    Weights,
    cohen_weights,
    interval_values,
    kappa_from_confusion,
    krippendorff_alpha,
    mean_cohen_kappa,
    pairwise_cohen_kappa,
    percent_agreement,
)
from .bootstrap import percentile_ci
from .cohen_bootstrap import MAX_FEATURES
from .estimate import Estimate, json_ready
from .kernels import alpha_kernel
from .table import RatingTable, build_table

__all__ = [
    "QUESTION_TYPES",
    "QUESTION_TARGETS",
    "QUESTION_LEVELS",
    "MIN_SHARED_UNITS",
    "PER_CLAIM_RULE",
    "question_distribution",
    "question_agreement",
    "per_claim_scores",
    "long_answers",
]

QUESTION_TYPES = ("likert", "single", "multi", "check", "number", "text")
QUESTION_TARGETS = ("item", "list", "claim")
#: Krippendorff's level of measurement per question type (multi: per option, on ticked / not ticked).
QUESTION_LEVELS: dict[str, Level] = {
    "single": "nominal",
    "check": "nominal",
    "multi": "nominal",
    "likert": "ordinal",
    "number": "interval",
}
#: A tick box's two answers, in the order its distribution lists them.
CHECK_OPTIONS = (True, False)
#: Annotator pairs sharing fewer units are left out of the mean weighted kappa (and counted).
MIN_SHARED_UNITS = 10

NO_SHARED_UNIT = "fewer than 2 annotators answered any one unit (item, target), so agreement is undefined"
UNITS = "units are (item, target) pairs: the item, one list of it, or one claim"
CI_METHOD = "percentile bootstrap over items (all units of an item, e.g. its claims, resampled together)"
PER_CLAIM_RULE = (
    "A judgement of a claim is positive when its answer is one of `positive`. each_judgement: every judgement "
    "counts once (a claim judged by three annotators counts three times), k positive of n judgements. majority: "
    "one verdict per claim, positive when more than half of its judgements are positive and negative when more "
    "than half are not; ties are left out and counted in n_ties. per_response_mean (FActScore-style): the mean over "
    "a system's responses (its list on each item) of the response's share, responses without a countable claim "
    "left out and counted. Intervals: percentile bootstrap over responses, a response's claims resampled together, "
    "because claims of one response are correlated."
)
PER_CLAIM_CI_METHOD = "percentile bootstrap over responses (items), claims of a response resampled together"

_CHUNK_ELEMENTS = 4_000_000  # resampled indices held in memory at once


# --- the question and its answers -----------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    """A checked question; ``options``: the scale points (likert), the options (single, multi), (True, False) (check)."""

    key: str
    type: str
    options: tuple
    target: str


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _spec(question: Mapping[str, Any]) -> _Spec:
    """Check the question dict; a ValueError names what is wrong."""
    if not isinstance(question, Mapping):
        raise ValueError(f"a question is a dict with 'key', 'type' and 'target', not {type(question).__name__}")
    key = question.get("key")
    if not isinstance(key, str) or not key:
        raise ValueError(f"a question needs a non-empty string 'key', got {key!r}")
    kind = question.get("type")
    if kind not in QUESTION_TYPES:
        raise ValueError(f"question {key!r}: 'type' must be one of {list(QUESTION_TYPES)}, not {kind!r}")
    target = question.get("target", "item")
    if target not in QUESTION_TARGETS:
        raise ValueError(f"question {key!r}: 'target' must be one of {list(QUESTION_TARGETS)}, not {target!r}")
    options: tuple = ()
    if kind == "likert":
        scale = question.get("scale")
        if not (
            isinstance(scale, (list, tuple))
            and len(scale) == 2
            and all(_is_int(x) for x in scale)
            and scale[0] < scale[1]
        ):
            raise ValueError(
                f"question {key!r}: a likert question needs 'scale': [low, high], integers with low < high, "
                f"got {scale!r}"
            )
        options = tuple(range(int(scale[0]), int(scale[1]) + 1))
    elif kind in ("single", "multi"):
        opts = question.get("options")
        if not isinstance(opts, (list, tuple)) or not opts:
            raise ValueError(f"question {key!r}: a {kind} question needs a non-empty list 'options', got {opts!r}")
        if not all(isinstance(o, Hashable) for o in opts):
            raise ValueError(f"question {key!r}: options must be strings or numbers, got {list(opts)!r}")
        if len(set(opts)) != len(opts):
            raise ValueError(f"question {key!r}: options contain duplicates: {list(opts)!r}")
        options = tuple(opts)
    elif kind == "check":
        options = CHECK_OPTIONS
    return _Spec(key, str(kind), options, str(target))


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, (list, tuple, set, frozenset, np.ndarray)):
        return False
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


_BAD = object()  # marks a value that does not fit the question


def _normalise(v: Any, spec: _Spec, allowed: frozenset) -> Any:
    """The answer in canonical form, None when unanswered, ``_BAD`` when it does not fit the question."""
    if _is_missing(v):
        return None
    kind = spec.type
    if kind == "likert":
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            return _BAD
        if not float(v).is_integer() or int(v) not in allowed:
            return _BAD
        return int(v)
    if kind == "single":
        return v if isinstance(v, Hashable) and v in allowed else _BAD
    if kind == "check":
        return bool(v) if isinstance(v, (bool, np.bool_)) else _BAD
    if kind == "multi":
        if not isinstance(v, (list, tuple, set, frozenset, np.ndarray)):
            return _BAD
        ticked = set()
        for o in v:
            if not isinstance(o, Hashable) or o not in allowed:
                return _BAD
            ticked.add(o)
        return tuple(o for o in spec.options if o in ticked)  # in the declared order, each once
    if kind == "number":
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            return _BAD
        x = float(v)
        return x if math.isfinite(x) else _BAD
    # text: a blank answer is no answer
    if not isinstance(v, str):
        return _BAD
    return v if v.strip() else None


_EXPECTED = {
    "likert": "integers on the scale",
    "single": "one of the options",
    "check": "true or false",
    "multi": "lists of options",
    "number": "finite numbers",
    "text": "strings",
}


def _claim_parts(target: str) -> tuple[str, int] | None:
    system, sep, index = target.rpartition("#")
    if not sep or not system or not index.isdigit():
        return None
    return system, int(index)


def _check_targets(targets: pd.Series, spec: _Spec) -> None:
    if spec.target == "item":
        bad = targets[targets != ""]
        what = "empty (the question is asked of the item)"
    elif spec.target == "list":
        bad = targets[targets == ""]
        what = "a system name (the question is asked of one list)"
    else:
        bad = targets[[_claim_parts(t) is None for t in targets]]
        what = "'<system>#<claim index>' (the question is asked of each claim)"
    if len(bad):
        raise ValueError(f"question {spec.key!r}: {len(bad)} targets are not {what}, e.g. {bad.iloc[:3].tolist()!r}")


def _answers(answers: pd.DataFrame, spec: _Spec) -> pd.DataFrame:
    """The question's rows: ``target`` as a string ("" for the item), ``value`` normalised, ``answered``."""
    if not isinstance(answers, pd.DataFrame):
        raise ValueError(f"answers must be a pandas DataFrame, not {type(answers).__name__}")
    needed = ["item", "annotator", "question", "value"]
    absent = [c for c in needed if c not in answers.columns]
    if absent:
        raise ValueError(f"answers lack columns {absent!r} (has {list(answers.columns)!r})")
    rows = answers.loc[answers["question"] == spec.key].copy()
    for col in ("item", "annotator"):
        if rows[col].isna().any():
            raise ValueError(f"question {spec.key!r}: column {col!r} has missing values")
    raw_target = rows["target"] if "target" in rows.columns else pd.Series("", index=rows.index)
    rows["target"] = [("" if _is_missing(t) else str(t)) for t in raw_target]
    _check_targets(rows["target"], spec)
    allowed = frozenset(spec.options)
    values = [_normalise(v, spec, allowed) for v in rows["value"]]
    bad = [raw for raw, v in zip(rows["value"], values, strict=True) if v is _BAD]
    if bad:
        raise ValueError(
            f"question {spec.key!r}: {len(bad)} answers are not {_EXPECTED[spec.type]}"
            + (f" {list(spec.options)!r}" if spec.options else "")
            + f", e.g. {bad[:3]!r}"
        )
    rows["value"] = pd.Series(values, index=rows.index, dtype=object)
    rows["answered"] = [v is not None for v in values]
    return rows


def _units(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
    """Per answered row: its unit (item, target) code and its unit's item (cluster) code; and the item count."""
    unit_code, _ = pd.MultiIndex.from_frame(frame[["item", "target"]]).factorize()
    cluster_code, clusters = pd.factorize(frame["item"])
    return np.asarray(unit_code, dtype=np.int64), np.asarray(cluster_code, dtype=np.int64), len(clusters)


def _check_one_answer_per_unit(frame: pd.DataFrame, spec: _Spec) -> None:
    dup = frame.duplicated(["item", "target", "annotator"], keep=False)
    if dup.any():
        examples = frame.loc[dup, ["item", "target", "annotator"]].drop_duplicates().head(3)
        raise ValueError(
            f"question {spec.key!r}: {int(dup.sum())} answers repeat an (item, target, annotator), "
            f"e.g. {list(examples.itertuples(index=False, name=None))!r}"
        )


# --- distributions -------------------------------------------------------------------


def _share(k: int, n: int) -> float | None:
    return k / n if n else None


def _counts_block(values: list, options: tuple, n_unanswered: int) -> dict[str, Any]:
    counts = dict.fromkeys(options, 0)
    for v in values:
        counts[v] += 1
    n = len(values)
    return {
        "n_answers": n,
        "n_unanswered": n_unanswered,
        "counts": counts,
        "shares": {o: _share(c, n) for o, c in counts.items()},
    }


def _moments(x: np.ndarray) -> dict[str, float | None]:
    n = len(x)
    if n == 0:
        return {"mean": None, "sd": None, "median": None, "q1": None, "q3": None, "min": None, "max": None}
    q1, median, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    return {
        "mean": float(x.mean()),
        "sd": float(x.std(ddof=1)) if n >= 2 else None,
        "median": float(median),
        "q1": float(q1),
        "q3": float(q3),
        "min": float(x.min()),
        "max": float(x.max()),
    }


def _block(values: list, n_unanswered: int, spec: _Spec) -> dict[str, Any]:
    """One distribution: counts (and shares beside them) or summary numbers, by question type."""
    kind = spec.type
    if kind in ("single", "check"):
        return _counts_block(values, spec.options, n_unanswered)
    if kind == "likert":
        out = _counts_block(values, spec.options, n_unanswered)
        m = _moments(np.asarray(values, dtype=np.float64))
        out.update(mean=m["mean"], sd=m["sd"], median=m["median"])
        return out
    if kind == "multi":
        n = len(values)
        counts = dict.fromkeys(spec.options, 0)
        for ticked in values:
            for o in ticked:
                counts[o] += 1
        n_ticked = [len(t) for t in values]
        return {
            "n_answers": n,
            "n_unanswered": n_unanswered,
            "counts": counts,
            "shares": {o: _share(c, n) for o, c in counts.items()},
            "share_base": "answers (an answer may tick several options, so shares need not sum to 1)",
            "n_empty": sum(1 for k in n_ticked if k == 0),
            "mean_ticked": float(np.mean(n_ticked)) if n else None,
        }
    if kind == "number":
        return {
            "n_answers": len(values),
            "n_unanswered": n_unanswered,
            **_moments(np.asarray(values, dtype=np.float64)),
            "quantile_method": "linear interpolation (numpy's default)",
        }
    return {"n_answers": len(values), "n_unanswered": n_unanswered}  # text: counts only


def _group_column(frame: pd.DataFrame, by: str, spec: _Spec) -> pd.Series:
    if by in frame.columns:
        return frame[by]
    if by == "system" and spec.target in ("list", "claim"):
        # a list or claim target names its system
        return pd.Series(
            [t if spec.target == "list" else t.rpartition("#")[0] for t in frame["target"]], index=frame.index
        )
    raise ValueError(f"answers have no column {by!r} to group by (columns: {list(frame.columns)!r})")


def _ordered(values: Sequence[Any]) -> list:
    try:
        return sorted(values)
    except TypeError:  # mixed, unorderable values: order of appearance
        return list(values)


def question_distribution(answers: pd.DataFrame, question: Mapping[str, Any], by: str | None = None) -> dict:
    """How a question was answered, overall and per value of the ``by`` column.

    likert and single: every scale point or option with its count and share
    (unused ones as 0, so a reader sees the whole scale); multi: per option,
    how many answers ticked it and their share of answers; number: n, mean,
    sd, median and quartiles; text: how many answered. ``by`` names a column
    (e.g. ``label``, ``condition``); ``"system"`` falls back to the system a
    list or claim target names. Rows whose group is missing are counted in
    ``n_without_group``.
    """
    spec = _spec(question)
    frame = _answers(answers, spec)

    def block(rows: pd.DataFrame) -> dict[str, Any]:
        answered = rows["answered"].to_numpy(dtype=bool)
        return _block(rows["value"][answered].tolist(), int((~answered).sum()), spec)

    out: dict[str, Any] = {
        "question": spec.key,
        "type": spec.type,
        "target": spec.target,
        "options": list(spec.options) if spec.options else None,
        "overall": block(frame),
        "by": by,
        "groups": {},
        "n_without_group": 0,
    }
    if by is not None:
        groups = _group_column(frame, by, spec)
        present = groups.notna().to_numpy()
        out["n_without_group"] = int((~present).sum())
        for value in _ordered(pd.unique(groups[present])):
            out["groups"][value] = block(frame.loc[present & (groups == value).to_numpy()])
    return json_ready(out)


# --- bootstrap over items ---------------------------------------------------------------


@dataclass(frozen=True)
class _Boot:
    n_resamples: int
    confidence: float
    seed: int | None


def _cluster_draws(n_clusters: int, boot: _Boot) -> Iterator[tuple[int, np.ndarray]]:
    """(first resample, the clusters drawn (b x C)), chunk by chunk.

    Resample ``r`` is row ``r`` of ``default_rng(seed).integers(0, C, size=(n_resamples, C))``,
    as in ``bootstrap``, so an interval can be reproduced with a plain loop.
    """
    rng = np.random.default_rng(boot.seed)
    chunk = max(1, min(boot.n_resamples, _CHUNK_ELEMENTS // max(n_clusters, 1)))
    for start in range(0, boot.n_resamples, chunk):
        b = min(chunk, boot.n_resamples - start)
        yield start, rng.integers(0, n_clusters, size=(b, n_clusters))


def _bootstrap_sums(
    unit_cluster: np.ndarray, unit_pattern: np.ndarray, pattern_features: np.ndarray, n_clusters: int, boot: _Boot
) -> np.ndarray:
    """Sums of the units' features on every resample of clusters (B x f).

    A unit's features depend only on its pattern (e.g. its count row), so each
    resample's sums are its pattern frequencies times the pattern features; the
    frequencies are the clusters' draw counts times each cluster's pattern counts
    (a sparse patterns x clusters matrix). When every unit is its own cluster,
    the drawn units' patterns are counted directly, as ``bootstrap`` does.
    """
    n_patterns = len(pattern_features)
    out = np.empty((boot.n_resamples, pattern_features.shape[1]))
    identity = len(unit_cluster) == n_clusters and bool((unit_cluster == np.arange(n_clusters)).all())
    per_cluster = sparse.csr_matrix(
        (np.ones(len(unit_pattern)), (unit_pattern, unit_cluster)), shape=(n_patterns, n_clusters)
    )
    for start, idx in _cluster_draws(n_clusters, boot):
        b = len(idx)
        if identity:
            pid = unit_pattern[idx] + (np.arange(b, dtype=np.int64) * n_patterns)[:, None]
            freq = np.bincount(pid.ravel(), minlength=b * n_patterns).reshape(b, n_patterns).astype(np.float64)
        else:
            cid = idx + (np.arange(b, dtype=np.int64) * n_clusters)[:, None]
            drawn = np.bincount(cid.ravel(), minlength=b * n_clusters).reshape(b, n_clusters)
            freq = np.asarray((per_cluster @ drawn.T.astype(np.float64)).T)
        out[start : start + b] = freq @ pattern_features
    return out


def _with_ci(est: Estimate, dist: np.ndarray | None, boot: _Boot, n_clusters: int, method: str) -> Estimate:
    if not est.defined:
        return est
    if dist is None:
        return est.with_ci(None, ci_unavailable="no resamples asked for (n_resamples=0)")
    if n_clusters < 2:
        return est.with_ci(None, ci_unavailable="fewer than 2 items: a bootstrap over items has no spread")
    return est.with_ci(
        percentile_ci(dist, boot.confidence),
        ci_method=method,
        confidence=boot.confidence,
        n_resamples=boot.n_resamples,
        n_undefined=int((~np.isfinite(dist)).sum()),
        seed=boot.seed,
    )


# --- agreement -------------------------------------------------------------------------


def _table(frame: pd.DataFrame, categories: Sequence[Hashable]) -> tuple[RatingTable, np.ndarray, int]:
    """The rating table of units (item, target) and each unit's item (cluster) code."""
    table = build_table(frame, list(categories), item=["item", "target"], annotator="annotator", label="value")
    cluster, clusters = pd.factorize(table.item_index.get_level_values(0))
    return table, np.asarray(cluster, dtype=np.int64), len(clusters)


def _alpha(
    table: RatingTable, level: Level, cluster: np.ndarray, n_clusters: int, boot: _Boot, values: Sequence[float] | None
) -> Estimate:
    """``krippendorff_alpha`` with a bootstrap interval over items, from the same alpha kernel."""
    est = krippendorff_alpha(table, level=level, values=values)
    if not est.defined or boot.n_resamples <= 0:
        return _with_ci(est, None, boot, n_clusters, CI_METHOD)
    kernel = alpha_kernel(level, interval_values(table, values))
    rows, inverse = table.patterns
    sums = _bootstrap_sums(cluster, inverse, kernel.features(rows), n_clusters, boot)
    return _with_ci(est, kernel.combine(sums), boot, n_clusters, CI_METHOD)


def _interval_alpha(frame: pd.DataFrame, boot: _Boot) -> Estimate:
    """Krippendorff's interval alpha of real-valued answers, from per-unit moments.

    With squared differences, a unit's observed disagreement and the pooled
    expected one are functions of sums of m, sum x and sum x^2, so there is
    no values x values coincidence matrix (a number question has as many
    distinct values as answers) and the bootstrap is a matrix product.
    """
    unit, cluster_of_row, n_clusters = _units(frame)
    x = frame["value"].to_numpy(dtype=np.float64)
    n_units = int(unit.max()) + 1 if len(unit) else 0
    m = np.bincount(unit, minlength=n_units).astype(np.float64)
    pairable = m >= 2
    n_paired = int(pairable.sum())
    extra: dict[str, Any] = {"level": "interval"}
    if n_paired == 0:
        return Estimate(None, NO_SHARED_UNIT, 0, extra=extra)
    in_pair = pairable[unit]
    if np.ptp(x[in_pair]) == 0:
        return Estimate(
            None,
            "all pairable answers are equal: expected disagreement is 0, so alpha is undefined",
            n_paired,
            extra=extra,
        )
    x = x - x[in_pair].mean()  # alpha is shift-invariant; centring keeps the sums of squares accurate
    s1 = np.bincount(unit, weights=x, minlength=n_units)
    dev = x - (s1 / np.maximum(m, 1.0))[unit]
    ss = np.bincount(unit, weights=dev**2, minlength=n_units)  # within-unit sum of squares
    s2 = np.bincount(unit, weights=x**2, minlength=n_units)
    keep = pairable.astype(np.float64)
    # per unit: pairable values, their sum, sum of squares, and sum over ordered pairs (x_i - x_j)^2 / (m - 1)
    features = np.column_stack(
        [m * keep, s1 * keep, s2 * keep, np.where(pairable, 2.0 * m * ss / np.maximum(m - 1.0, 1.0), 0.0)]
    )

    def disagreements(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = s[..., 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            return s[..., 3] / n, 2.0 * (n * s[..., 2] - s[..., 1] ** 2) / (n * (n - 1.0))

    total = features.sum(axis=0)
    d_o_full, d_e_full = (float(d) for d in disagreements(total))

    def combine(s: np.ndarray) -> np.ndarray:
        d_o, d_e = disagreements(s)
        # a resample whose values are all equal has d_e 0 up to rounding: undefined, not a wild number
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(d_e > 1e-12 * d_e_full, 1.0 - d_o / d_e, np.nan)

    extra = {**extra, "d_observed": d_o_full, "d_expected": d_e_full}
    est = Estimate(1.0 - d_o_full / d_e_full, None, n_paired, extra=extra)
    if boot.n_resamples <= 0:
        return _with_ci(est, None, boot, n_clusters, CI_METHOD)
    unit_cluster = np.zeros(n_units, dtype=np.int64)
    unit_cluster[unit] = cluster_of_row
    sums = _bootstrap_sums(unit_cluster, np.arange(n_units), features, n_clusters, boot)
    return _with_ci(est, combine(sums), boot, n_clusters, CI_METHOD)


def _pair_confusion_draws(
    table: RatingTable, kept: list[int], cluster: np.ndarray, n_clusters: int, boot: _Boot
) -> np.ndarray | str:
    """Confusions of the kept annotator pairs on every resample of items (B x Q x K x K), or why not."""
    k = table.n_categories
    a_codes, b_codes, _ = table.pair_confusions
    codes = table.codes
    rows, inverse = np.unique(codes, axis=0, return_inverse=True)
    inverse = np.asarray(inverse, dtype=np.int64).reshape(-1)
    if len(rows) * len(kept) * k * k > MAX_FEATURES:
        return "too many distinct annotator combinations for the bootstrap of pairwise kappas"
    features = np.zeros((len(rows), len(kept) * k * k))
    for j, q in enumerate(kept):
        a, b = a_codes[q], b_codes[q]
        both = (rows[:, a] >= 0) & (rows[:, b] >= 0)
        features[np.flatnonzero(both), j * k * k + rows[both, a] * k + rows[both, b]] = 1.0
    sums = _bootstrap_sums(cluster, inverse, features, n_clusters, boot)
    return sums.reshape(boot.n_resamples, len(kept), k, k)


def _mean_kappa(
    table: RatingTable, weights: Weights, min_shared: int, draws: np.ndarray | str | None, boot: _Boot, n_clusters: int
) -> tuple[Estimate, list[Estimate]]:
    """Mean weighted Cohen's kappa over the pairs sharing ``min_shared`` units, and every pair's kappa."""
    pairs = pairwise_cohen_kappa(table, weights=weights)
    kept = [q for q, p in enumerate(pairs) if p.extra["n"] >= min_shared]
    extra = {"weights": weights, "min_shared_units": min_shared, "n_pairs_too_few_shared": len(pairs) - len(kept)}
    if not pairs:
        return Estimate.undefined(NO_SHARED_UNIT, 0, **extra), pairs
    if not kept:
        reason = f"no pair of annotators shares {min_shared} or more units, so the mean kappa is left undefined"
        return Estimate.undefined(reason, 0, **extra), pairs
    mean = mean_cohen_kappa([pairs[q] for q in kept], weights=weights)
    mean = mean.with_ci(mean.ci, **extra)
    if not mean.defined or draws is None:
        return _with_ci(mean, None, boot, n_clusters, CI_METHOD), pairs
    if isinstance(draws, str):
        return mean.with_ci(None, ci_unavailable=draws), pairs
    kappa, n_pair, _, d_e = kappa_from_confusion(draws, cohen_weights(table.n_categories, weights))
    kappa = np.where((n_pair >= 2) & (d_e > 1e-12), kappa, np.nan)
    defined = np.isfinite(kappa)
    count = defined.sum(axis=1)
    with np.errstate(invalid="ignore"):
        dist = np.where(count > 0, np.where(defined, kappa, 0.0).sum(axis=1) / np.maximum(count, 1), np.nan)
    return _with_ci(mean, dist, boot, n_clusters, CI_METHOD), pairs


def question_agreement(
    answers: pd.DataFrame,
    question: Mapping[str, Any],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
    min_shared_units: int = MIN_SHARED_UNITS,
) -> dict:
    """Inter-annotator agreement on a question; units are (item, target) pairs.

    Krippendorff's alpha at the question's level (single nominal, likert
    ordinal and also interval, number interval; multi: one nominal alpha per
    option on ticked / not ticked), with a percentile bootstrap interval over
    items: an item's lists or claims are not independent, so they are
    resampled together. For likert also the mean pairwise Cohen's kappa with
    quadratic and linear weights over the full scale, over annotator pairs
    sharing at least ``min_shared_units`` units (a kappa on a handful of
    units is noise); the others are listed and counted. Text answers have no
    agreement statistic. ``n_resamples=0`` skips the intervals.
    """
    spec = _spec(question)
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    boot = _Boot(int(n_resamples), confidence, seed)
    frame = _answers(answers, spec)
    frame = frame.loc[frame["answered"].to_numpy(dtype=bool)]
    _check_one_answer_per_unit(frame, spec)
    unit, _, n_items = _units(frame)
    per_unit = np.bincount(unit) if len(unit) else np.zeros(0, dtype=np.int64)
    out: dict[str, Any] = {
        "question": spec.key,
        "type": spec.type,
        "target": spec.target,
        "level": QUESTION_LEVELS.get(spec.type),
        "units": UNITS,
        "n_answers": len(frame),
        "n_units": len(per_unit),
        "n_units_paired": int((per_unit >= 2).sum()),
        "n_items": n_items,
        "n_annotators": int(frame["annotator"].nunique()),
    }
    if spec.type == "text":
        stats: dict[str, Any] = {"alpha": Estimate.undefined("free-text answers have no agreement statistic")}
    elif spec.type == "number":
        stats = {"alpha": _interval_alpha(frame, boot)}
    elif spec.type == "multi":
        stats = {"rule": "per option, each answer is ticked or not ticked; nominal alpha on that indicator"}
        stats["per_option"] = {option: _option_agreement(frame, option, boot) for option in spec.options}
    elif spec.type in ("single", "check"):
        table, cluster, n_clusters = _table(frame, spec.options)
        stats = {
            "alpha": _alpha(table, "nominal", cluster, n_clusters, boot, None),
            "percent_agreement": percent_agreement(table),
        }
    else:
        stats = _likert_agreement(frame, spec, boot, min_shared_units)
    if spec.type != "text" and out["n_units_paired"] == 0:
        stats = _unshared(stats)
    return json_ready({**out, **stats})


def _unshared(obj: Any) -> Any:
    """Every estimate in ``obj`` undefined for the one reason that explains them all."""
    if isinstance(obj, Estimate):
        return Estimate(None, NO_SHARED_UNIT, 0, extra=obj.extra)
    if isinstance(obj, dict):
        return {k: _unshared(v) for k, v in obj.items()}
    return obj


def _option_agreement(frame: pd.DataFrame, option: Hashable, boot: _Boot) -> dict[str, Estimate]:
    """Nominal alpha and raw agreement of one option of a multi question, ticked or not."""
    ticked = frame.assign(value=[option in v for v in frame["value"]])
    table, cluster, n_clusters = _table(ticked, [False, True])
    return {
        "alpha": _alpha(table, "nominal", cluster, n_clusters, boot, None),
        "percent_agreement": percent_agreement(table),
    }


def _likert_agreement(frame: pd.DataFrame, spec: _Spec, boot: _Boot, min_shared_units: int) -> dict[str, Any]:
    """Ordinal and interval alpha, raw agreement, and the mean weighted kappas with every pair listed."""
    table, cluster, n_clusters = _table(frame, spec.options)
    out: dict[str, Any] = {
        "alpha": _alpha(table, "ordinal", cluster, n_clusters, boot, None),
        "alpha_interval": _alpha(table, "interval", cluster, n_clusters, boot, None),
        "percent_agreement": percent_agreement(table),
    }
    a_codes, _, confusions = table.pair_confusions
    n_shared = confusions.sum(axis=(1, 2))
    kept = [q for q in range(len(a_codes)) if n_shared[q] >= min_shared_units]
    draws: np.ndarray | str | None = None
    if boot.n_resamples > 0 and kept:
        draws = _pair_confusion_draws(table, kept, cluster, n_clusters, boot)
    by_weights = {}
    for weights in ("quadratic", "linear"):
        mean, pairs = _mean_kappa(table, weights, min_shared_units, draws, boot, n_clusters)
        out[f"mean_cohen_kappa_{weights}"] = mean
        by_weights[weights] = pairs
    in_mean = set(kept)
    out["pairwise_cohen_kappa"] = [
        {
            "annotators": quad.extra["annotators"],
            "n": quad.extra["n"],
            "quadratic": quad.value,
            "linear": lin.value,
            "reason": quad.reason,
            "in_mean": q in in_mean,
        }
        for q, (quad, lin) in enumerate(zip(by_weights["quadratic"], by_weights["linear"], strict=True))
    ]
    return out


# --- per-claim scores --------------------------------------------------------------------


def _response_features(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Per response: positives, countable, its share where countable, and whether it is countable."""
    has = n > 0
    share = np.where(has, k / np.maximum(n, 1), 0.0)
    return np.column_stack([k, n, share, has]).astype(np.float64)


def _ratio(s: np.ndarray, num: int, den: int) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s[..., den] > 0, s[..., num] / s[..., den], np.nan)


def _system_scores(sub: pd.DataFrame, boot: _Boot) -> dict[str, Any]:
    response, responses = pd.factorize(sub["item"])
    response = np.asarray(response, dtype=np.int64)
    n_resp = len(responses)
    pos = sub["positive"].to_numpy(dtype=bool)
    k_each = np.bincount(response, weights=pos, minlength=n_resp)
    n_each = np.bincount(response, minlength=n_resp).astype(np.float64)
    claim, claims = pd.factorize(pd.MultiIndex.from_frame(sub[["item", "claim"]]))
    claim = np.asarray(claim, dtype=np.int64)
    n_claims = len(claims)
    claim_pos = np.bincount(claim, weights=pos, minlength=n_claims)
    claim_n = np.bincount(claim, minlength=n_claims)
    claim_response = np.zeros(n_claims, dtype=np.int64)
    claim_response[claim] = response
    verdict_pos = 2 * claim_pos > claim_n
    verdict_neg = 2 * claim_pos < claim_n
    tie = ~(verdict_pos | verdict_neg)
    k_maj = np.bincount(claim_response, weights=verdict_pos, minlength=n_resp)
    n_maj = np.bincount(claim_response, weights=~tie, minlength=n_resp)
    features = np.hstack([_response_features(k_each, n_each), _response_features(k_maj, n_maj)])
    total = features.sum(axis=0)
    dist = None
    if boot.n_resamples > 0:
        dist = _bootstrap_sums(np.arange(n_resp), np.arange(n_resp), features, n_resp, boot)

    def estimate(num: int, den: int, n_items: int, reason: str, **extra: Any) -> Estimate:
        value = float(total[num] / total[den]) if total[den] > 0 else None
        est = Estimate(value, None if value is not None else reason, n_items, extra=extra)
        return _with_ci(est, None if dist is None else _ratio(dist, num, den), boot, n_resp, PER_CLAIM_CI_METHOD)

    n_judged_resp = int(total[3])
    n_maj_resp = int(total[7])
    return {
        "n_responses": n_resp,
        "n_claims": n_claims,
        "n_judgements": len(sub),
        "n_annotators": int(sub["annotator"].nunique()),
        "each_judgement": estimate(0, 1, n_resp, "no judged claims", k=int(total[0]), n=int(total[1])),
        "per_response_mean": estimate(2, 3, n_judged_resp, "no response has a judged claim"),
        "majority": estimate(
            4,
            5,
            n_resp,
            "every claim's judgements are tied",
            k=int(total[4]),
            n=int(total[5]),
            n_ties=int(tie.sum()),
        ),
        "majority_per_response_mean": estimate(
            6, 7, n_maj_resp, "every claim's judgements are tied", n_responses_all_tied=n_resp - n_maj_resp
        ),
    }


def per_claim_scores(
    answers: pd.DataFrame,
    question: Mapping[str, Any],
    positive: Hashable | Sequence[Hashable],
    confidence: float = 0.95,
    seed: int | None = 0,
    *,
    n_resamples: int = 1000,
) -> dict:
    """Per system, the share of claims judged ``positive`` by a per-claim single-choice or check question.

    The system is the one the target ``"<system>#<claim index>"`` names, a
    response is a system's list on one item. Reported both as k/n over
    judgements (each judgement counts; and one majority verdict per claim)
    and as the FActScore-style mean over responses of each response's share;
    ``PER_CLAIM_RULE`` says how. Intervals resample responses, since claims of
    one response are correlated and a binomial interval would be too narrow.
    ``positive`` is one option or a list of them (``True`` for a check question).
    """
    spec = _spec(question)
    if spec.target != "claim":
        raise ValueError(f"question {spec.key!r} is asked of the {spec.target}, not of each claim")
    if spec.type not in ("single", "check"):
        raise ValueError(
            f"question {spec.key!r} is {spec.type}: per-claim scores need a single-choice or check question"
        )
    wanted = list(positive) if isinstance(positive, (list, tuple, set, frozenset)) else [positive]
    if not wanted:
        raise ValueError("positive names no option")
    unknown = [p for p in wanted if p not in spec.options]
    if unknown:
        raise ValueError(f"positive options {unknown!r} are not options of {spec.key!r}: {list(spec.options)!r}")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    boot = _Boot(int(n_resamples), confidence, seed)
    frame = _answers(answers, spec)
    n_unanswered = int((~frame["answered"]).sum())
    frame = frame.loc[frame["answered"].to_numpy(dtype=bool)]
    _check_one_answer_per_unit(frame, spec)
    parts = [_claim_parts(t) for t in frame["target"]]
    frame = frame.assign(
        system=[p[0] for p in parts if p is not None],
        claim=[p[1] for p in parts if p is not None],
        positive=frame["value"].isin(set(wanted)).to_numpy(dtype=bool),
    )
    systems = {system: _system_scores(sub, boot) for system, sub in frame.groupby("system", sort=True)}
    return json_ready(
        {
            "question": spec.key,
            "positive": wanted,
            "rule": PER_CLAIM_RULE,
            "confidence": confidence,
            "n_unanswered": n_unanswered,
            "systems": systems,
        }
    )


def long_answers(stored: pd.DataFrame, questions: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Stored answers (one row per annotation: ``item``, ``annotator``, ``answers`` as Claimlab keeps them,
    per system for list and claim questions; any other columns are carried along) as the long table
    this module reads: one row per question and target.

    Why here: the report and the notebook client (whose export has one ``q_<key>`` column per
    question) lay them out the same way. An annotation with no answer to a question gets a row
    with value None for each target it has (an unanswered question), none when it has no entry.
    """
    carried = [column for column in stored.columns if column not in ("item", "annotator", "answers")]
    records: list[dict[str, Any]] = []
    for row in stored.itertuples(index=False):
        answers = row.answers if isinstance(row.answers, Mapping) else {}
        base = {"item": row.item, "annotator": row.annotator, **{c: getattr(row, c) for c in carried}}
        for question in questions:
            key, target = question["key"], question.get("target", "item")
            if key not in answers:
                continue
            value = answers[key]
            if target == "item":
                records.append({**base, "question": key, "target": "", "value": value})
            elif isinstance(value, Mapping):
                for system, given in value.items():
                    if target == "list":
                        records.append({**base, "question": key, "target": str(system), "value": given})
                    elif isinstance(given, list):
                        records.extend(
                            {**base, "question": key, "target": f"{system}#{index}", "value": claim}
                            for index, claim in enumerate(given)
                        )
    columns = ["item", "annotator", *carried, "question", "target", "value"]
    return pd.DataFrame.from_records(records, columns=columns)
