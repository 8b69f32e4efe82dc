"""The report's prediction-powered estimates (issue 33): the share of supported claims from a verifier's
predictions on every claim, corrected by the human labels on some of them (PPI++, ``stats.ppi_mean``).

For each verifier with predictions: overall, per system and per domain, the PPI++ estimate with its
interval beside the human-only estimate on the same labelled claims and the verifier-only (biased)
share. A claim counts as labelled when it has a reference label (the report's rule) and the
verifier predicted it; the verifier's predictions on claims without a reference are the unlabelled
ones. Human and verifier verdicts are 1 for a supported label (the study's binary map) and 0 for
any other, so the estimand is the share of claims whose reference label is a supported one.

FActScore-style, the same is given for the mean over responses of each response's share of supported
claims: a mean of the claims weighted by 1 / the response's claim count (``stats.ppi_weighted_mean``).

Valid only if the labelled claims are a random sample of the claims: they are when annotators
were handed items in the study's random order (``Item.claim_rank``; a study stopped part-way
qualifies), not when a researcher chose which claims to label or imported labels on a subset.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from annotation.models import Study
from metaeval import stats

from .agreement import unavailable
from .options import ReportOptions
from .scores import NO_SYSTEM, label_roles

__all__ = ["ppi_section", "RANDOM_SAMPLE_RULE", "VERDICT_RULE"]

RANDOM_SAMPLE_RULE = (
    "valid only if the human-labelled claims are a random sample of the claims: they are when annotators "
    "took items in the study's random order (a study stopped part-way qualifies), not when the labelled "
    "claims were chosen by hand or imported for a subset"
)
VERDICT_RULE = (
    "a claim is 1 when its label (the reference's, or the verifier's) is a supported label of the study's "
    "binary map and 0 otherwise; labelled claims have a reference label and the verifier's prediction, "
    "unlabelled ones only the prediction"
)
METHOD = (
    "PPI++ (Angelopoulos, Duchi and Zrnic 2023; prediction-powered inference, Angelopoulos et al., Science "
    "2023): lambda x the mean prediction on unlabelled claims + the mean of (label - lambda x prediction) on "
    "labelled ones, lambda power-tuned and clipped to [0, 1]; normal (CLT) intervals"
)


def _one(y: pd.Series, yhat_labelled: pd.Series, yhat_unlabelled: pd.Series, confidence: float) -> dict[str, Any]:
    fit = stats.ppi_mean(
        y.to_numpy(dtype=float),
        yhat_labelled.to_numpy(dtype=float),
        yhat_unlabelled.to_numpy(dtype=float),
        confidence=confidence,
    )
    return stats.json_ready(fit)


def ppi_section(
    items: pd.DataFrame,
    study: Study,
    options: ReportOptions,
    verdicts: dict[str, pd.Series],
    reference: tuple[str, pd.Series],
) -> dict[str, Any] | None:
    """None for preference studies and studies without verifier predictions."""
    if study.is_preference or not verdicts:
        return None
    if not study.binary_map:
        return unavailable("the study has no binary map saying which labels count as supported")
    supported = set(label_roles(study)[0])
    rule, labels = reference
    claims = items[["item", "domain", "system", "response_id"]].copy()
    claims["system"] = claims["system"].where(claims["system"] != "", NO_SYSTEM)
    claims["response_id"] = claims["response_id"].where(claims["response_id"] != "", claims["item"])
    claims["weight"] = 1.0 / claims.groupby("response_id")["item"].transform("size")
    human = claims["item"].map(labels)
    n_with_reference = int(human.notna().sum())
    if options.ppi_labelled_share is not None:
        human = _kept_share(claims["item"], human, options.ppi_labelled_share, options.seed)
    section: dict[str, Any] = {
        "method": METHOD,
        "verdicts": VERDICT_RULE,
        "random_sample": RANDOM_SAMPLE_RULE,
        "reference_rule": rule,
        "confidence": options.confidence,
        "n_claims_with_reference": n_with_reference,
        "labelled_share": options.ppi_labelled_share,
        "labelled_share_rule": (
            SHARE_RULE.format(share=options.ppi_labelled_share, kept=int(human.notna().sum()), of=n_with_reference)
            if options.ppi_labelled_share is not None
            else None
        ),
        "verifiers": {},
    }
    for name, predicted in verdicts.items():
        section["verifiers"][name] = _verifier_block(claims, human, claims["item"].map(predicted), supported, options)
    return section


SHARE_RULE = (
    "only a seeded random share {share:g} of the claims with a reference label count as labelled ({kept:,} of "
    "{of:,}); the others count as unlabelled, their reference labels unused: what a smaller labelling budget gives"
)


def _kept_share(items: pd.Series, human: pd.Series, share: float, seed: int) -> pd.Series:
    """The reference labels of a seeded random ``share`` of the labelled claims, the others' removed (NaN).

    The same claims for every verifier: the draw permutes the labelled claims' ids in sorted order."""
    labelled = sorted(items[human.notna()].astype(str))
    keep = round(share * len(labelled))
    chosen = set(np.random.default_rng(seed).permutation(np.array(labelled, dtype=object))[:keep])
    return human.where(items.astype(str).isin(chosen))


def _verifier_block(
    claims: pd.DataFrame, human: pd.Series, prediction: pd.Series, supported: set[str], options: ReportOptions
) -> dict[str, Any]:
    """One verifier's estimates: over all claims, per system and per domain."""
    has_prediction = prediction.notna()
    labelled = human.notna() & has_prediction
    unlabelled = human.isna() & has_prediction
    y = human.isin(supported).astype(float)
    yhat = prediction.isin(supported).astype(float)

    def estimate(within: pd.Series) -> dict[str, Any]:
        return _one(y[labelled & within], yhat[labelled & within], yhat[unlabelled & within], options.confidence)

    def per_response(within: pd.Series) -> dict[str, Any]:
        """FActScore: the mean over responses of each response's share supported (weights 1 / its claims)."""
        fit = stats.ppi_weighted_mean(
            y[labelled & within].to_numpy(dtype=float),
            yhat[labelled & within].to_numpy(dtype=float),
            yhat[unlabelled & within].to_numpy(dtype=float),
            claims["weight"][labelled & within].to_numpy(dtype=float),
            claims["weight"][unlabelled & within].to_numpy(dtype=float),
            confidence=options.confidence,
        )
        return stats.json_ready(fit)

    return {
        "n_labelled": int(labelled.sum()),
        "n_unlabelled": int(unlabelled.sum()),
        "n_labelled_without_prediction": int((human.notna() & ~has_prediction).sum()),
        "overall": estimate(pd.Series(True, index=claims.index)),
        "by_system": {str(s): estimate(claims["system"] == s) for s in _groups(claims["system"])},
        "by_domain": {str(d): estimate(claims["domain"] == d) for d in _groups(claims["domain"])},
        "factscore": per_response(pd.Series(True, index=claims.index)),
        "factscore_by_system": {str(s): per_response(claims["system"] == s) for s in _groups(claims["system"])},
    }


def _groups(column: pd.Series) -> list[Any]:
    """The values of a grouping column, sorted; none when there is a single group (the overall row says it all)."""
    values = sorted(pd.unique(column.to_numpy(dtype=object)), key=str)
    return values if len(values) > 1 else []


def ppi_rows(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The section as table rows: per verifier and group, the three estimates with counts beside them."""
    if not section or not section.get("verifiers"):
        return []
    rows = []
    for name, block in section["verifiers"].items():
        groups = [("all claims", block["overall"])]
        groups += [(f"system {s}", fit) for s, fit in block["by_system"].items()]
        groups += [(f"domain {d}", fit) for d, fit in block["by_domain"].items()]
        if "factscore" in block:
            groups.append(("FActScore (mean per response), all", block["factscore"]))
            groups += [(f"FActScore, system {s}", fit) for s, fit in block["factscore_by_system"].items()]
        for group, fit in groups:
            rows.append({"verifier": name, "group": group, **_cells(fit)})
    return rows


def _cells(fit: dict[str, Any]) -> dict[str, Any]:
    def ci(estimate: dict[str, Any]) -> list[float] | None:
        return estimate.get("ci")

    ppi, classical, only = fit["estimate"], fit["classical"], fit["verifier_only"]
    return {
        "ppi": ppi.get("value"),
        "ppi_ci": ci(ppi),
        "ppi_reason": ppi.get("reason") or ppi.get("ci_unavailable") or "",
        "classical": classical.get("value"),
        "classical_ci": ci(classical),
        "verifier_only": only.get("value"),
        "n": fit["n"],
        "N": fit["N"],
        "lambda": fit["lambda"],
        "width_ratio": fit["width_ratio"],
        "narrower": fit["width_ratio"] is not None and bool(np.less(fit["width_ratio"], 1.0)),
    }
