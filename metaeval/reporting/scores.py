"""The factuality-score section of verification studies.

Each item is a claim of a response (``response_id``; an item without one is
its own response) written by a ``system``. A claim's verdict is the strict
majority of its human labels, or its gold label; the study's binary map says
which verdicts count as supported (positive), not supported (negative) or
are left out (labels it does not map, e.g. IR when a study excludes it).

VeriScore's K is one per domain for the whole section (``shared_k``): every
source (human majority, gold, reference, each verifier) is scored with the K
of the report's reference labels, so that their F1@K can be compared; a
source's own median would differ with the claims it leaves without a verdict.
``?k=`` overrides it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from annotation.models import Study
from metaeval import stats
from metaeval.stats.scores import veriscore_k_by_domain

from .agreement import agreement_table, categories_for, unavailable
from .options import ReportOptions

__all__ = ["scores_section", "label_roles", "per_response_guard", "shared_k"]

NO_SYSTEM = "(no system)"


def label_roles(study: Study) -> tuple[list[str], list[str], list[str]]:
    """(supported, unsupported, excluded) labels from the study's binary map."""
    labels = categories_for(study)
    supported = [label for label in labels if study.binary_map.get(label) == "positive"]
    unsupported = [label for label in labels if study.binary_map.get(label) == "negative"]
    excluded = [label for label in labels if label not in study.binary_map]
    return supported, unsupported, excluded


def claim_table(items: pd.DataFrame) -> pd.DataFrame:
    """The items as claims for a score per response: an item without a response id is its own response (keyed by
    its id: ``stats.scores.response_keys``, the rule the verifiers' system correlation groups by too), an item
    without a system counts under ``NO_SYSTEM``. The scores and the estimates (``ppi``) share it."""
    claims = items[["item", "domain", "response_id", "system"]].copy()
    claims["response_id"] = stats.response_keys(claims["response_id"].to_numpy(), claims["item"].to_numpy())
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


def _human_verdicts(
    labels: pd.DataFrame, study: Study, table: stats.RatingTable | None = None
) -> tuple[pd.Series, dict[str, int]]:
    """The claims' strict human majority and its counts; ``table``: ``agreement_table``'s of ``labels``
    when the caller has it (the report's reference built the same table: ``ReferenceInputs.table``)."""
    if table is None:
        table, _ = agreement_table(labels, study)
    vote = stats.majority_vote(table)
    counts = {
        "n_claims_labelled": table.n_items,
        "n_claims_with_majority": vote.n_items,
        "n_claims_without_majority": vote.n_no_majority,
    }
    return vote.labels(), counts


#: What a K from the claim count (the fallback of shared_k) counts.
ALL_CLAIMS = "the number of claims per response, whatever their verdict"
#: A domain's k_source: the median of the reference labels' countable claims, or of the claim count.
FROM_REFERENCE = "reference median"
FROM_CLAIMS = "claim-count median"


def shared_k(
    claims: pd.DataFrame,
    roles: tuple[list[str], list[str], list[str]],
    options: ReportOptions,
    responses: pd.DataFrame | None,
    reference: tuple[str, pd.Series] | None,
    *,
    response_codes: tuple[np.ndarray, pd.Index] | None = None,
    on_claims: Callable[[pd.Series], pd.Series] | None = None,
) -> dict[str, Any]:
    """VeriScore's K per domain, one for every source of the section, and the sentence that says where it
    came from: ``?k=`` when given; else the upper median over answered responses of the countable claims
    under the reference labels (``reference``: the report's rule and labels; None: no reference); a domain
    where that gives no K above 0 (no reference verdicts there) takes the median claim count instead.
    ``response_codes`` (``stats.response_counts``') and ``on_claims`` (labels by item -> the claims' labels,
    ``claims["item"].map``) let ``scores_section`` share its work with this."""
    if options.k is not None:
        return {
            "k": None,
            "given": options.k,
            "source": "given",
            "rule": f"K = {options.k} in every domain, given (?k= on the page and API, --k on the command line).",
            "from": f"given, {options.k}",
        }
    supported, unsupported, excluded = roles

    def counts(label: pd.Series) -> pd.DataFrame:
        return stats.response_counts(
            claims.assign(label=label),
            supported=supported,
            unsupported=unsupported,
            excluded=excluded,
            responses=responses,
            response_codes=response_codes,
        )

    if reference is not None:
        rule, labelled = reference
        named = f"the countable claims under the reference labels (rule: {rule})"
        k = veriscore_k_by_domain(counts(on_claims(labelled) if on_claims else claims["item"].map(labelled)))
    else:
        named, k = ALL_CLAIMS, {}
    source = {domain: FROM_REFERENCE for domain, value in k.items() if value}
    if len(source) < len(k) or not k:
        no_verdict = pd.Series(float("nan"), index=claims.index, dtype=object)
        by_count = veriscore_k_by_domain(counts(no_verdict), "n_claims")
        k = {domain: k[domain] if domain in source else value for domain, value in by_count.items()}
        source = {domain: source.get(domain, FROM_CLAIMS) for domain in k}
    rule = (
        "K per domain is one for every source (human majority, gold, reference labels, each verifier), so "
        f"that their F1@K compare: the upper median over answered responses of {named}"
    )
    fell = sorted(str(domain) for domain, why in source.items() if why == FROM_CLAIMS)
    if reference is not None and fell:
        rule += f"; where that gives no K above 0 (domain {', '.join(fell)}): of {ALL_CLAIMS}"
    return {
        "k": k,
        "given": None,
        "source": source,
        "rule": rule + ". ?k= overrides it.",
        "from": "the reference labels" if FROM_REFERENCE in source.values() else "the claim count",
    }


def _score_block(
    claims: pd.DataFrame,
    roles: tuple[list[str], list[str], list[str]],
    options: ReportOptions,
    k: dict[str, Any],
    responses: pd.DataFrame | None = None,
    response_codes: tuple[np.ndarray, pd.Index] | None = None,
) -> dict[str, Any]:
    """One source's scores, with the section's shared K (``shared_k``)."""
    supported, unsupported, excluded = roles
    out = stats.claim_scores(
        claims,
        supported=supported,
        unsupported=unsupported,
        excluded=excluded,
        responses=responses,
        response_codes=response_codes,
        k=k["given"] if k["given"] is not None else k["k"],
        k_source=k["source"],
        n_resamples=options.n_resamples,
        seed=options.seed,
        confidence=options.confidence,
    )
    out["veriscore"]["k_rule"], out["veriscore"]["k_from"] = k["rule"], k["from"]
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


def per_response_guard(items: pd.DataFrame, compute: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
    """``compute()``, a section that counts claims per response; unavailable, naming the responses, where a
    response's claims give it more than one system or domain (stored before item imports refused that:
    transfer/services/item_import.ResponseCheck), instead of a report that fails whole."""
    try:
        return compute()
    except stats.MixedResponses:
        claims = items[items["response_id"] != ""]
        counts = claims.groupby("response_id", sort=True)[["system", "domain"]].nunique()
        mixed = counts.index[(counts > 1).any(axis=1)].tolist()
        named = ", ".join(repr(str(response)) for response in mixed[:5]) + (" ..." if len(mixed) > 5 else "")
        return unavailable(
            f"{len(mixed)} response(s) ({named}) have claims of more than one system or domain, so a score per "
            "response has no one system: re-import those claims with one system and one domain per response"
        )


def _n_on_claims(claims: pd.DataFrame, labelled: pd.Series, on_claims: Callable[[pd.Series], pd.Series]) -> int:
    """How many claims have an item of ``labelled``'s index (``claims["item"].isin(labelled.index)``): the claims
    its mapping gives a label, when it has no missing label (the mapping is made anyway: one lookup, not two)."""
    if labelled.index.is_unique and labelled.notna().all():
        return int(on_claims(labelled).notna().sum())
    return int(claims["item"].isin(labelled.index).sum())


def scores_section(
    labels: pd.DataFrame,
    items: pd.DataFrame,
    evidence: tuple[pd.DataFrame, int],
    study: Study,
    options: ReportOptions,
    verifier_labels: dict[str, pd.Series] | None = None,
    reference: tuple[str, pd.Series] | None = None,
    human_table: Callable[[], stats.RatingTable] | None = None,
) -> dict[str, Any] | None:
    """FActScore, VeriScore F1@K and RAGAS faithfulness from human, gold and each verifier's verdicts,
    and credibility. `verifier_labels`: per verifier name, its label by item id (None: no verdict).
    `reference`: (rule, label by item id) of the report's reference labels, scored as their own block.
    `human_table`: gives ``agreement_table``'s table of `labels` when the caller has it (the reference's)."""
    if study.is_preference:
        return None
    if not study.binary_map:
        return unavailable("the study has no binary map saying which labels count as supported")
    roles = label_roles(study)
    claims = claim_table(items)
    responses = _responses(claims, study)
    # The claims' responses factorised once, and each source's labels put on the claims once, for every
    # count of the section (shared K, each score block): each was done again per use before.
    response_codes = pd.factorize(claims["response_id"], sort=False, use_na_sentinel=True)
    mapped: list[tuple[pd.Series, pd.Series]] = []

    def on_claims(labelled: pd.Series) -> pd.Series:
        for seen, done in mapped:
            if seen is labelled:
                return done
        done = claims["item"].map(labelled)
        mapped.append((labelled, done))
        return done

    out: dict[str, Any] = {
        "labels": {"supported": roles[0], "unsupported": roles[1], "excluded": roles[2]},
        "claims": (
            "one item = one claim, grouped by response_id (an item without one is its own response); "
            "gold-labelled items are included: gold only keeps items out of agreement"
        ),
        "n_claims": len(claims),
        "n_responses": len(response_codes[1]),  # claims["response_id"].nunique(): missing ids are not counted
    }
    k = shared_k(claims, roles, options, responses, reference, response_codes=response_codes, on_claims=on_claims)
    out["veriscore_k"] = {key: k[key] for key in ("k", "given", "source", "rule")}
    scored: list[tuple[pd.Series, dict[str, Any]]] = []  # (claims' labels, their block): each computed once

    def block(label: pd.Series) -> dict[str, Any]:
        """The score block of the claims labelled ``label``; the same labels (the reference is most often the
        human majority) give the very same block, not a second computation of it (0.35 s at 100,000 claims)."""
        for seen, done in scored:
            if seen.equals(label):
                return done
        done = _score_block(claims.assign(label=label), roles, options, k, responses, response_codes)
        scored.append((label, done))
        return done

    if labels.empty:
        out["human"] = unavailable("no human labels yet")
    else:
        verdicts, counts = _human_verdicts(labels, study, human_table() if human_table is not None else None)
        out["human"] = {
            "verdict": "strict majority of the human labels; claims without one have no verdict",
            **counts,
            **block(on_claims(verdicts)),
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
            "n_claims_with_reference": _n_on_claims(claims, labelled, on_claims),
            **block(on_claims(labelled)),
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
