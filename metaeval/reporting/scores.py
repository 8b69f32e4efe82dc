"""The factuality-score section of verification studies.

Each item is a claim of a response (``response_id``; an item without one is
its own response) written by a ``system``. A claim's verdict is the strict
majority of its human labels, or its gold label; the study's binary map says
which verdicts count as supported (positive), not supported (negative) or
are left out (labels it does not map, e.g. IR when a study excludes it).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from annotation.models import Study
from metaeval import stats

from .agreement import agreement_table, categories_for, unavailable
from .options import ReportOptions

__all__ = ["scores_section", "label_roles"]

NO_SYSTEM = "(no system)"


def label_roles(study: Study) -> tuple[list[str], list[str], list[str]]:
    """(supported, unsupported, excluded) labels from the study's binary map."""
    labels = categories_for(study)
    supported = [label for label in labels if study.binary_map.get(label) == "positive"]
    unsupported = [label for label in labels if study.binary_map.get(label) == "negative"]
    excluded = [label for label in labels if label not in study.binary_map]
    return supported, unsupported, excluded


def _claims(items: pd.DataFrame) -> pd.DataFrame:
    claims = items[["item", "domain", "response_id", "system"]].copy()
    claims["response_id"] = claims["response_id"].where(claims["response_id"] != "", claims["item"])
    claims["system"] = claims["system"].where(claims["system"] != "", NO_SYSTEM)
    return claims


def _responses(claims: pd.DataFrame, study: Study) -> pd.DataFrame | None:
    """Every response with a claim (answered) plus the study's abstained responses; None without abstentions."""
    if not study.abstained_responses:
        return None
    answered = claims.drop_duplicates("response_id")[["response_id", "system", "domain"]].assign(answered=True)
    abstained = pd.DataFrame(
        [
            {
                "response_id": entry["response_id"],
                "system": entry.get("system") or NO_SYSTEM,
                "domain": entry.get("domain", ""),
                "answered": False,
            }
            for entry in study.abstained_responses
        ],
        columns=["response_id", "system", "domain", "answered"],
    )
    abstained = abstained[~abstained["response_id"].isin(answered["response_id"])].drop_duplicates("response_id")
    return pd.concat([answered, abstained], ignore_index=True)


def _human_verdicts(labels: pd.DataFrame, study: Study) -> tuple[pd.Series, dict[str, int]]:
    table, _ = agreement_table(labels, study)
    vote = stats.majority_vote(table)
    counts = {
        "n_claims_labelled": table.n_items,
        "n_claims_with_majority": vote.n_items,
        "n_claims_without_majority": vote.n_no_majority,
    }
    return vote.labels(), counts


def _score_block(
    claims: pd.DataFrame,
    roles: tuple[list[str], list[str], list[str]],
    options: ReportOptions,
    responses: pd.DataFrame | None = None,
) -> dict[str, Any]:
    supported, unsupported, excluded = roles
    out = stats.claim_scores(
        claims,
        supported=supported,
        unsupported=unsupported,
        excluded=excluded,
        responses=responses,
        k=options.k,
        n_resamples=options.n_resamples,
        seed=options.seed,
        confidence=options.confidence,
    )
    out["factscore"]["share_answered_note"] = (
        "every response with a claim counts as answered"
        if responses is None
        else "responses with a claim and the abstentions imported with the study's files (docs/importing.md)"
    )
    return out


def _credibility(evidence: pd.DataFrame, unreadable: int, study: Study, options: ReportOptions) -> dict[str, Any]:
    if evidence.empty:
        return {**unavailable("no evidence judgements have been recorded"), "n_unreadable_judgements": unreadable}
    out = stats.credibility(
        evidence,
        include_irrelevant=study.irrelevant_in_credibility,
        source_types=options.source_types,
        exclude_source_types=options.exclude_source_types,
    )
    out.pop("per_claim")
    out["n_unreadable_judgements"] = unreadable
    out["n_annotators"] = int(evidence["annotator"].nunique())
    out["pooling"] = "judgements of every annotator on a claim's passages are pooled"
    return out


def scores_section(
    labels: pd.DataFrame,
    items: pd.DataFrame,
    evidence: tuple[pd.DataFrame, int],
    study: Study,
    options: ReportOptions,
    verifier_labels: dict[str, pd.Series] | None = None,
    reference: tuple[str, pd.Series] | None = None,
) -> dict[str, Any] | None:
    """FActScore, VeriScore F1@K and RAGAS faithfulness from human, gold and each verifier's verdicts,
    and credibility. `verifier_labels`: per verifier name, its label by item id (None: no verdict).
    `reference`: (rule, label by item id) of the report's reference labels, scored as their own block."""
    if study.is_preference:
        return None
    if not study.binary_map:
        return unavailable("the study has no binary map saying which labels count as supported")
    roles = label_roles(study)
    claims = _claims(items)
    responses = _responses(claims, study)
    out: dict[str, Any] = {
        "labels": {"supported": roles[0], "unsupported": roles[1], "excluded": roles[2]},
        "claims": (
            "one item = one claim, grouped by response_id (an item without one is its own response); "
            "gold-labelled items are included: gold only keeps items out of agreement"
        ),
        "n_claims": len(claims),
        "n_responses": int(claims["response_id"].nunique()),
    }
    scored: list[tuple[pd.Series, dict[str, Any]]] = []  # (claims' labels, their block): each computed once

    def block(label: pd.Series) -> dict[str, Any]:
        """The score block of the claims labelled ``label``; the same labels (the reference is most often the
        human majority) give the very same block, not a second computation of it (0.35 s at 100,000 claims)."""
        for seen, done in scored:
            if seen.equals(label):
                return done
        done = _score_block(claims.assign(label=label), roles, options, responses)
        scored.append((label, done))
        return done

    if labels.empty:
        out["human"] = unavailable("no human labels yet")
    else:
        verdicts, counts = _human_verdicts(labels, study)
        out["human"] = {
            "verdict": "strict majority of the human labels; claims without one have no verdict",
            **counts,
            **block(claims["item"].map(verdicts)),
        }
    has_gold = items["gold_label"] != ""
    if has_gold.any():
        out["gold"] = {
            "verdict": "the item's gold label; claims without one have no verdict",
            "n_claims_with_gold": int(has_gold.sum()),
            **block(items["gold_label"].where(has_gold)),
        }
    else:
        out["gold"] = unavailable("no item has a gold label")
    if reference is not None:
        rule, labelled = reference
        out["reference"] = {
            "verdict": f"the report's reference label (rule: {rule}); claims without one have no verdict",
            "rule": rule,
            "n_claims_with_reference": int(claims["item"].isin(labelled.index).sum()),
            **block(claims["item"].map(labelled)),
        }
    out["verifiers"] = {
        name: {
            "verdict": "the verifier's label; claims it has no readable label for have no verdict",
            "n_claims_predicted": int(predicted.notna().sum()),
            **block(claims["item"].map(predicted)),
        }
        for name, predicted in (verifier_labels or {}).items()
    }
    out["credibility"] = _credibility(*evidence, study, options)
    return out
