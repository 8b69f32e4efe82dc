"""The planning service: how many items a study needs, before it runs and as it stands.

``plan_from_query`` parses one set of inputs for the page, the API and
``manage.py plan`` alike (a bad value raises ``InvalidOption`` naming it);
``make_plan`` answers with JSON-ready numbers and the method behind each.
``study_precision`` is the study page's "CI width so far, items still needed"
(``cached_study_precision`` keeps it until the study's labels change).
The arithmetic is ``metaeval.stats.planning``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.core.cache import cache

from annotation.models import Study
from metaeval import selectors, stats
from metaeval.reporting.agreement import agreement_table
from metaeval.reporting.options import InvalidOption
from metaeval.stats import planning
from metaeval.study_frame import study_frame

__all__ = ["PlanInputs", "make_plan", "plan_from_query", "study_precision", "cached_study_precision", "PLAN_KINDS"]

#: How long an unchanged study's precision is kept (a changed study has a new key at once).
PRECISION_CACHE_SECONDS = 24 * 3600

PLAN_KINDS = ("preference", "verification")
SIGN_TEST_METHOD = (
    "exact two-sided sign (binomial) test of the preference share against 0.5 on decisive items (ties and "
    "items without a majority direction excluded); n_normal is the normal approximation"
)
WILSON_METHOD = "Wilson score interval of the preference share"
KAPPA_METHOD = (
    "large-sample variance of Cohen's kappa (delta method on the two-rater table, Fleiss, Cohen & Everitt "
    "1969) with the expected label distribution on both sides; checked against simulation"
)
DIFFERENCE_METHOD = (
    "two-sided z test on the difference of two kappas against the same reference, their variances added "
    "(conservative when the two verifiers' agreements are positively correlated)"
)

KAPPA_PRECISION = "kappa (large-sample approximation at the observed kappa and label shares)"
PPI_METHOD = (
    "human labels for a share-supported interval of the target width: classical (human labels only, var = "
    "share (1 - share) / n) and PPI++ with the verifier's predictions on the unlabelled claims (var = lambda^2 "
    "var(prediction) / N + var(label - lambda prediction) / n at the optimal lambda; Angelopoulos, Duchi and "
    "Zrnic 2023), from the pilot's share and the verifier's sensitivity and specificity against the humans; "
    "normal (CLT) intervals, valid when the labelled claims are a random sample"
)


@dataclass(frozen=True)
class PlanInputs:
    """Every question the planning tool answers, with its defaults (a VeriScore-style study)."""

    kind: str = "preference"
    p: float = 0.65
    power: float = 0.8
    alpha: float = 0.05
    width: float = 0.1
    kappa: float = 0.6
    kappa_b: float | None = None
    distribution: tuple[float, ...] = (0.6, 0.25, 0.15)
    share: float = 0.5
    sensitivity: float | None = None
    specificity: float | None = None
    unlabelled: float = 10_000

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["distribution"] = list(self.distribution)
        return out


@dataclass(frozen=True)
class Range:
    """A planning number's range: the API's schema says it (planning_views) and `plan_from_query` checks it."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def holds(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def says(self) -> str:
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


#: Every number's range, for every kind, whether the kind uses it or not. Why: a preference plan ignores
#: kappa, and an out-of-range kappa was answered 200 as if it made sense. The stats functions check the
#: limits that depend on other inputs (p may not be 0.5, kappa's lower bound depends on the label shares).
RANGES = {
    "p": Range(0, 1, low_open=True, high_open=True),
    "power": Range(0, 1, low_open=True, high_open=True),
    "alpha": Range(0, 1, low_open=True, high_open=True),
    "width": Range(0, 1, low_open=True),
    "kappa": Range(-1, 1),
    "kappa_b": Range(-1, 1),
    "share": Range(0, 1, low_open=True, high_open=True),
    "sensitivity": Range(0, 1),
    "specificity": Range(0, 1),
    "unlabelled": Range(1, 1e9),
}


def _number(query: Mapping[str, Any], name: str, default: float | None) -> float | None:
    raw = str(query.get(name, "") or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidOption(name, f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise InvalidOption(name, f"{name} must be a finite number, got {raw!r}")
    if not RANGES[name].holds(value):
        raise InvalidOption(name, f"{name} must be in {RANGES[name].says()}, got {raw!r}")
    return value


def plan_from_query(query: Mapping[str, Any]) -> PlanInputs:
    """Inputs from a GET query or the CLI's options; absent keys take the defaults."""
    defaults = PlanInputs()
    kind = str(query.get("kind", "") or defaults.kind).strip()
    if kind not in PLAN_KINDS:
        raise InvalidOption("kind", f"kind must be one of {', '.join(PLAN_KINDS)}, got {kind!r}")
    raw_dist = str(query.get("distribution", "") or "").strip()
    if raw_dist:
        try:
            distribution = tuple(float(part) for part in raw_dist.split(",") if part.strip())
        except ValueError:
            raise InvalidOption(
                "distribution", f"distribution must be comma-separated shares such as 0.6,0.25,0.15, got {raw_dist!r}"
            ) from None
        if not all(map(math.isfinite, distribution)):
            raise InvalidOption("distribution", f"distribution must be finite shares, got {raw_dist!r}")
        if len(distribution) < 2 or min(distribution) <= 0:
            raise InvalidOption("distribution", "distribution needs at least two positive shares, one per label")
    else:
        distribution = defaults.distribution
    values = {
        name: _number(query, name, getattr(defaults, name))
        for name in ("p", "power", "alpha", "width", "kappa", "share", "unlabelled")
    }
    if values["unlabelled"] != int(values["unlabelled"] or 0):
        raise InvalidOption("unlabelled", f"unlabelled must be a whole number of claims, got {values['unlabelled']:g}")
    verifier = {name: _number(query, name, None) for name in ("kappa_b", "sensitivity", "specificity")}
    if (verifier["sensitivity"] is None) != (verifier["specificity"] is None):
        missing = "specificity" if verifier["specificity"] is None else "sensitivity"
        raise InvalidOption(missing, "give the verifier's sensitivity and specificity together (a PPI plan needs both)")
    return PlanInputs(kind=kind, distribution=distribution, **values, **verifier)  # type: ignore[arg-type]


def _checked(name: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except ValueError as exc:
        raise InvalidOption(name, str(exc)) from None


def make_plan(inputs: PlanInputs) -> dict[str, Any]:
    """The numbers a researcher needs before paying annotators, each with its method."""
    out: dict[str, Any] = {"inputs": inputs.as_dict()}
    if inputs.kind == "preference":
        sign = _checked("p", planning.sign_test_items, inputs.p, inputs.power, inputs.alpha)
        n = sign["n_exact"]
        out["sign_test"] = {**sign, "method": SIGN_TEST_METHOD}
        out["ci"] = {
            "width_at_n_exact": planning.preference_ci_width(n, inputs.p),
            "target_width": inputs.width,
            "items_for_target_width": _checked("width", planning.preference_ci_items, inputs.width, inputs.p),
            "confidence": 0.95,
            "method": WILSON_METHOD,
        }
        return out
    dist = inputs.distribution
    items = _checked("kappa", planning.kappa_ci_items, inputs.width, inputs.kappa, dist)
    out["kappa_ci"] = {
        "target_width": inputs.width,
        "items": items,
        "width_at_items": planning.kappa_ci_width(items, inputs.kappa, dist),
        "confidence": 0.95,
        "method": KAPPA_METHOD,
    }
    if inputs.kappa_b is not None:
        out["verifier_difference"] = {
            "kappa_a": inputs.kappa,
            "kappa_b": inputs.kappa_b,
            "items": _checked(
                "kappa_b",
                planning.verifier_difference_items,
                inputs.kappa,
                inputs.kappa_b,
                dist,
                inputs.power,
                inputs.alpha,
            ),
            "power": inputs.power,
            "alpha": inputs.alpha,
            "method": DIFFERENCE_METHOD,
        }
    if inputs.sensitivity is not None and inputs.specificity is not None:
        out["ppi"] = _ppi_plan(inputs)
    return out


def _ppi_plan(inputs: PlanInputs) -> dict[str, Any]:
    """Human labels for the share supported with and without a verifier's predictions (PPI++)."""
    moments = stats.share_moments(inputs.share, inputs.sensitivity or 0.0, inputs.specificity or 0.0)
    plan = _checked(
        "width",
        stats.labels_needed_from_moments,
        *moments,
        n_unlabelled=int(inputs.unlabelled),
        width=inputs.width,
    )
    return {
        **plan,
        "share": inputs.share,
        "sensitivity": inputs.sensitivity,
        "specificity": inputs.specificity,
        "method": PPI_METHOD,
    }


def study_precision(study: Study, target_width: float = 0.1) -> dict[str, Any]:
    """The CI width the study's labels reach now, and the items still needed for ``target_width``.

    From the labels the report's agreement counts (``metaeval.study_frame``: its gold, checks and
    participants rules), so the card and the report speak of the same labels.
    """
    frame = study_frame(study).agreed
    measure = "preference share (Wilson)" if study.is_preference else KAPPA_PRECISION
    out: dict[str, Any] = {
        "target_width": target_width,
        "width": None,
        "items_needed": None,
        "n": 0,
        "measure": measure,
    }
    if frame.empty:
        out["reason"] = "no labels yet"
        return out
    table, _ = agreement_table(frame, study)
    if study.is_preference:
        three = table.collapse(stats.PREFERENCE_3WAY, ["a", "tie", "b"])
        majority = stats.majority_vote(three).labels()
        decisive = majority[majority != "tie"]
        n = len(decisive)
        out["n"] = n
        if not n:
            out["reason"] = "no item has a majority for either system yet"
            return out
        share = float((decisive == "a").mean())
        out["share"] = share
        out["width"] = planning.preference_ci_width(n, share)
        out["items_needed"] = max(0, planning.preference_ci_items(target_width, share) - n)
        return out
    kappa = stats.fleiss_kappa_generalized(table).value
    counts = table.counts.sum(axis=0)
    n = int((table.counts.sum(axis=1) >= 2).sum())
    out["n"] = n
    if kappa is None or n < 2 or (counts > 0).sum() < 2:
        out["reason"] = "kappa is not defined yet (too few items rated twice, or one label only)"
        return out
    dist = [float(c) for c in counts if c > 0]
    try:
        out["width"] = planning.kappa_ci_width(n, kappa, dist)
        out["items_needed"] = max(0, planning.kappa_ci_items(target_width, kappa, dist) - n)
    except ValueError as exc:
        out["reason"] = str(exc)
    out["kappa"] = kappa
    return out


def cached_study_precision(study: Study, target_width: float = 0.1) -> dict[str, Any]:
    """``study_precision``, kept in the cache under the study's report fingerprint.

    Why: it reads every label (1.7 s at 100,000 items x 3 on PostgreSQL), while the fingerprint
    (``metaeval.selectors.report_fingerprint``: exact for everything ``study_frame`` reads, and
    constant time) says whether anything changed; the overview's card reloads with nothing new
    read it back. Any new label, member or setting gives a new key, so nothing stale is shown.
    """
    key = f"study-precision:{study.pk}:{target_width}:{selectors.report_fingerprint(study)}"
    found = cache.get(key)
    if found is None:
        found = study_precision(study, target_width)
        cache.set(key, found, timeout=PRECISION_CACHE_SECONDS)
    return found
