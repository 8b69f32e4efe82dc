"""Agreement at scale: Claimlab's report statistics against the bare library calls and NLTK, in one run.

Scenarios (issue 4, goal in brackets):

* 100,000 items x 3 annotators x 3 labels (300,000 labels):
  - the full report statistics with bootstrap CIs, 1,000 resamples  [< 5 s]
  - the same coefficients without CIs, against the bare library calls
    (statsmodels ``aggregate_raters`` + ``fleiss_kappa``,
    ``krippendorff.alpha`` nominal and ordinal)                     [within 2x]
  - against NLTK's ``AnnotationTask`` (alpha, pi, multi_kappa, kappa, S,
    avg_Ao: the nominal coefficients it has)                          [>= 20x faster]
* 1,000,000 labels: 350,000 items x 3 annotators with 50,000 ratings
  missing at random, so the missing-data paths are timed too.

"Full report statistics" is ``metaeval.stats.agreement_summary(..., ordinal=True)``
starting from the long DataFrame (item, annotator, label strings): Fleiss
(complete items) and its generalisation, Krippendorff nominal / ordinal /
interval, pairwise Cohen unweighted / linear / quadratic and their means,
Gwet's AC1, Randolph's kappa, percent / full / majority agreement, the
consensus and label distributions, and percentile bootstrap CIs (1,000
resamples) for every coefficient that has one. The bare library calls get
their preferred input (the items x raters matrix) prepared outside the
timer, which favours them. Each timing is the best of ``--repeat`` runs.
NLTK is timed on all items unless ``--nltk-items`` is smaller, in which case
its time is extrapolated linearly (per label) and the output says so; NLTK's
pairwise coefficients fail on missing ratings, so with missing data it is
timed on the complete items only (also said in the output).

    python benchmarks/agreement.py [--items 100000] [--repeat 3] [--nltk-items N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TypeVar

import krippendorff
import numpy as np
import pandas as pd
from nltk.metrics.agreement import AnnotationTask
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metaeval import stats

LABELS = ["supported", "contradicted", "inconclusive"]
ANNOTATORS = ["w1", "w2", "w3"]
T = TypeVar("T")


def synthetic(n_items: int, *, n_labels: int | None = None, seed: int = 7) -> pd.DataFrame:
    """A long label table: 3 annotators agree with a latent label 70% of the time (skewed classes).

    With ``n_labels`` below n_items x 3, that many ratings are kept at random
    (the others are missing, i.e. absent rows).
    """
    rng = np.random.default_rng(seed)
    truth = rng.choice(3, size=n_items, p=[0.6, 0.25, 0.15])
    agree = rng.random((n_items, 3)) < 0.7
    codes = np.where(agree, truth[:, None], rng.integers(0, 3, size=(n_items, 3)))
    frame = pd.DataFrame(
        {
            "item": np.repeat(np.arange(n_items), 3),
            "annotator": np.tile(np.array(ANNOTATORS, dtype=object), n_items),
            "label": np.array(LABELS, dtype=object)[codes.ravel()],
        }
    )
    if n_labels is not None and n_labels < len(frame):
        keep = np.sort(rng.choice(len(frame), size=n_labels, replace=False))
        frame = frame.iloc[keep].reset_index(drop=True)
    return frame


def wide_codes(frame: pd.DataFrame) -> np.ndarray:
    """items x raters float matrix of label codes, NaN where missing (the libraries' input)."""
    codes = frame.assign(code=frame["label"].map({label: i for i, label in enumerate(LABELS)}))
    return codes.pivot(index="item", columns="annotator", values="code").to_numpy(dtype=float)


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    """The shortest time of `repeat` calls (at least one), and what the last call returned."""
    start = time.perf_counter()
    result = fn()
    best = time.perf_counter() - start
    for _ in range(repeat - 1):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def ours(frame: pd.DataFrame, ci: bool) -> dict:
    return stats.agreement_summary(frame, LABELS, ordinal=True, ci=ci, n_resamples=1000, seed=0)


def bare(wide: np.ndarray) -> dict:
    complete = wide[~np.isnan(wide).any(axis=1)].astype(int)
    table, _ = aggregate_raters(complete, n_cat=3)
    return {
        "fleiss_kappa": fleiss_kappa(table, method="fleiss"),
        "alpha_nominal": krippendorff.alpha(
            reliability_data=wide.T, level_of_measurement="nominal", value_domain=[0, 1, 2]
        ),
        "alpha_ordinal": krippendorff.alpha(
            reliability_data=wide.T, level_of_measurement="ordinal", value_domain=[0, 1, 2]
        ),
    }


def nltk_triples(frame: pd.DataFrame) -> list[tuple[str, str, str]]:
    return list(zip(frame["annotator"], frame["item"].astype(str), frame["label"], strict=True))


def nltk_run(triples: list[tuple[str, str, str]]) -> dict:
    task = AnnotationTask(data=triples)
    return {
        "alpha": task.alpha(),
        "pi": task.pi(),
        "multi_kappa": task.multi_kappa(),
        "kappa": task.kappa(),
        "S": task.S(),
        "avg_Ao": task.avg_Ao(),
    }


def check(name: str, a: float, b: float, tol: float = 1e-9) -> str:
    ok = abs(a - b) <= tol
    return f"    {name:<34} claimlab {a:.6f}  reference {b:.6f}  {'same' if ok else 'DIFFERENT'}"


def scenario(title: str, frame: pd.DataFrame, *, repeat: int, nltk_items: int | None, goals: bool) -> None:
    n_items = frame["item"].nunique()
    print(
        f"\n== {title}: {n_items:,} items, {len(frame):,} labels, {frame['annotator'].nunique()} annotators, "
        f"{len(LABELS)} labels =="
    )
    wide = wide_codes(frame)
    t_full, full = best_of(repeat, lambda: ours(frame, ci=True))
    t_coef, coef = best_of(repeat, lambda: ours(frame, ci=False))
    t_bare, ref = best_of(repeat, lambda: bare(wide))
    print(f"  full report statistics with CIs (1,000 resamples)  {t_full:8.3f} s")
    print(f"  the same coefficients without CIs                  {t_coef:8.3f} s")
    print(f"  bare library calls (statsmodels + krippendorff)    {t_bare:8.3f} s")

    subset = frame
    if nltk_items is not None and nltk_items < n_items:
        subset = frame.loc[frame["item"] < nltk_items]
    complete_only = ""
    per_item = subset.groupby("item")["annotator"].transform("size")
    if (per_item < len(ANNOTATORS)).any():
        # NLTK's pairwise coefficients assume every coder rated every item (StopIteration otherwise).
        subset = subset.loc[per_item == len(ANNOTATORS)]
        complete_only = ", complete items only: NLTK fails on missing ratings"
    triples = nltk_triples(subset)
    t_nltk_run, nltk_values = best_of(1, lambda: nltk_run(triples))
    sub_labels = len(subset)
    t_nltk = t_nltk_run * len(frame) / sub_labels
    how = (
        "measured on all items"
        if sub_labels == len(frame)
        else (
            f"measured on {subset['item'].nunique():,} items / {sub_labels:,} labels ({t_nltk_run:.3f} s){complete_only}"
            f"; extrapolated linearly to {len(frame):,} labels"
        )
    )
    subset["item"].nunique()
    print(f"  NLTK AnnotationTask (6 nominal coefficients)        {t_nltk:8.3f} s   [{how}]")

    print("  ratios")
    print(f"    full report with CIs / bare library calls      {t_full / t_bare:7.2f}x")
    print(
        f"    coefficients without CIs / bare library calls {t_coef / t_bare:7.2f}x"
        + (f"   goal <= 2x: {'met' if t_coef / t_bare <= 2 else 'MISSED'}" if goals else "")
    )
    print(
        f"    NLTK / coefficients without CIs                {t_nltk / t_coef:7.1f}x faster"
        + (f"   goal >= 20x: {'met' if t_nltk / t_coef >= 20 else 'MISSED'}" if goals else "")
    )
    print(f"    NLTK (no CIs at all) / full report with CIs    {t_nltk / t_full:7.1f}x faster")
    if goals:
        print(f"    full report with CIs under 5 s: {'met' if t_full < 5 else 'MISSED'} ({t_full:.2f} s)")

    print("  same numbers?")
    print(check("Fleiss kappa vs statsmodels", coef["fleiss_kappa"]["value"], ref["fleiss_kappa"]))
    print(check("alpha nominal vs krippendorff", coef["krippendorff_alpha"]["value"], ref["alpha_nominal"]))
    print(check("alpha ordinal vs krippendorff", coef["krippendorff_alpha_ordinal"]["value"], ref["alpha_ordinal"]))
    if sub_labels == len(frame):
        print(check("alpha nominal vs NLTK alpha", coef["krippendorff_alpha"]["value"], nltk_values["alpha"], 1e-6))
        print(check("mean pairwise Cohen vs NLTK kappa", coef["mean_cohen_kappa"]["value"], nltk_values["kappa"], 1e-9))
        print(
            check("percent agreement vs NLTK avg_Ao", coef["percent_agreement"]["value"], nltk_values["avg_Ao"], 1e-9)
        )
    fk = full["fleiss_kappa"]
    print(
        f"  Fleiss kappa {fk['value']:.4f}, 95% CI [{fk['ci'][0]:.4f}, {fk['ci'][1]:.4f}] on {fk['n_items']:,} "
        f"complete items ({fk['n_items_left_out']:,} left out)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--big-items", type=int, default=350_000)
    parser.add_argument("--big-labels", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--nltk-items",
        type=int,
        default=None,
        help="time NLTK on this many items and extrapolate (default: all of the 100k scenario, "
        "100,000 of the 1M-label one)",
    )
    args = parser.parse_args()
    versions = ", ".join(
        f"{name} {metadata.version(name)}" for name in ("numpy", "pandas", "statsmodels", "krippendorff", "nltk")
    )
    print(f"{versions}; best of {args.repeat} runs")
    ours(synthetic(2_000), ci=True)  # warm imports and caches outside the timers
    scenario(
        f"{args.items:,} x 3 x 3", synthetic(args.items), repeat=args.repeat, nltk_items=args.nltk_items, goals=True
    )
    big = synthetic(args.big_items, n_labels=args.big_labels, seed=11)
    scenario(
        "1,000,000 labels (missing at random)",
        big,
        repeat=args.repeat,
        nltk_items=args.nltk_items or 100_000,
        goals=False,
    )


if __name__ == "__main__":
    main()
