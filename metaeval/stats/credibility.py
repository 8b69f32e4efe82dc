"""Facts&Evidence credibility: how much of the evidence shown for a claim supports it.

Input: one row per evidence judgement (an annotator's verdict on one passage
of one claim) with ``judgement`` in support / not_support / irrelevant and
the passage's ``source_type``. The user chooses which source types count
(e.g. leave out "web" or keep only "academic"), and the study chooses
whether irrelevant passages count against a claim; both choices are
reported next to the numbers, since they change them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import pandas as pd

from .estimate import Estimate, json_ready

__all__ = ["credibility", "CREDIBILITY_RULE", "JUDGEMENTS"]

JUDGEMENTS = ("support", "not_support", "irrelevant")
CREDIBILITY_RULE = (
    "Credibility = support / (support + not_support), plus irrelevant in the denominator when the study counts "
    "it (Facts&Evidence), over the evidence judgements whose source type is selected. 'value' pools the "
    "judgements; 'mean_of_claims' averages per-claim credibility over claims with at least one counted "
    "judgement. A claim without counted judgements has no credibility (null) and is counted."
)
NO_EVIDENCE = (
    "no counted evidence judgement (none selected, or only irrelevant ones while they are left out of the denominator)"
)


def _counts(rows: pd.DataFrame, include_irrelevant: bool) -> dict[str, int]:
    judged = rows["judgement"].to_numpy()
    support = int((judged == "support").sum())
    not_support = int((judged == "not_support").sum())
    irrelevant = int((judged == "irrelevant").sum())
    return {
        "support": support,
        "not_support": not_support,
        "irrelevant": irrelevant,
        "denominator": support + not_support + (irrelevant if include_irrelevant else 0),
        "n_judgements": len(rows),
    }


def _group(rows: pd.DataFrame, per_claim: pd.Series, include_irrelevant: bool) -> dict[str, Any]:
    counts = _counts(rows, include_irrelevant)
    n_claims = int(rows["claim"].nunique())
    values = per_claim.reindex(rows["claim"].unique()).dropna()
    if counts["denominator"]:
        value = Estimate(counts["support"] / counts["denominator"], None, n_claims, extra=counts)
    else:
        value = Estimate.undefined(NO_EVIDENCE, n_claims, **counts)
    mean = (
        Estimate(float(values.mean()), None, len(values))
        if len(values)
        else Estimate.undefined("no claim has a counted evidence judgement", 0)
    )
    return {
        "value": value.to_dict(),
        "mean_of_claims": mean.to_dict(),
        "n_claims": n_claims,
        "n_claims_without_counted_evidence": n_claims - len(values),
    }


def _per_claim(selected: pd.DataFrame, include_irrelevant: bool) -> pd.DataFrame:
    columns = ["claim", "system", *JUDGEMENTS, "credibility"]
    if selected.empty:
        return pd.DataFrame(columns=columns)
    table = pd.crosstab(selected["claim"], selected["judgement"]).reindex(columns=list(JUDGEMENTS), fill_value=0)
    den = (table["support"] + table["not_support"] + (table["irrelevant"] if include_irrelevant else 0)).to_numpy()
    out = table.reset_index()
    out["system"] = selected.groupby("claim", sort=True)["system"].first().reindex(table.index).to_numpy()
    out["credibility"] = np.where(den > 0, table["support"].to_numpy() / np.maximum(den, 1), np.nan)
    return out[columns]


def credibility(
    evidence: pd.DataFrame,
    *,
    include_irrelevant: bool = False,
    source_types: Collection[str] | None = None,
    exclude_source_types: Collection[str] = (),
    claim: str = "claim",
    system: str = "system",
    judgement: str = "judgement",
    source_type: str = "source_type",
) -> dict[str, Any]:
    """Credibility overall, per system and per claim, over the selected source types.

    ``source_types`` keeps only those types (None = all) and
    ``exclude_source_types`` drops some; the types used and left out are
    reported. ``by_source_type`` gives every type on its own, whatever the
    selection, so the effect of a choice is visible.
    """
    absent = [c for c in (claim, judgement, source_type) if c not in evidence.columns]
    if absent:
        raise ValueError(f"evidence table lacks columns {absent!r} (has {list(evidence.columns)!r})")
    frame = pd.DataFrame(
        {
            "claim": evidence[claim].to_numpy(),
            "system": evidence[system].to_numpy() if system in evidence.columns else "",
            "judgement": evidence[judgement].to_numpy(),
            "source_type": evidence[source_type].fillna("").astype(str).to_numpy(),
        }
    )
    bad = sorted(set(frame["judgement"].dropna()) - set(JUDGEMENTS))
    if bad or frame["judgement"].isna().any():
        raise ValueError(f"evidence judgements must be one of {JUDGEMENTS!r}, got {bad[:10] or ['missing']!r}")
    all_types = sorted(set(frame["source_type"]))
    chosen = set(all_types if source_types is None else source_types) - set(exclude_source_types)
    keep = frame["source_type"].isin(chosen).to_numpy()
    selected = frame.loc[keep]
    per_claim = _per_claim(selected, include_irrelevant)
    claim_values = per_claim.set_index("claim")["credibility"].astype(float)
    by_type = {}
    for key, rows in frame.groupby("source_type", sort=True):
        counts = _counts(rows, include_irrelevant)
        by_type[key] = {
            **counts,
            "value": counts["support"] / counts["denominator"] if counts["denominator"] else None,
            "selected": key in chosen,
        }
    out = {
        "rule": CREDIBILITY_RULE,
        "include_irrelevant": include_irrelevant,
        "source_types": all_types,
        "source_types_included": [t for t in all_types if t in chosen],
        "source_types_excluded": [t for t in all_types if t not in chosen],
        "n_judgements_left_out_by_source_type": int((~keep).sum()),
        "overall": _group(selected, claim_values, include_irrelevant),
        "per_system": {
            key: _group(rows, claim_values, include_irrelevant) for key, rows in selected.groupby("system", sort=True)
        },
        "by_source_type": by_type,
        "per_claim": per_claim.to_dict(orient="records"),
    }
    return json_ready(out)
