"""The report's prediction-powered estimates (issue 33): a verifier's predictions on every claim, corrected by the
human labels on some of them (PPI++, ``stats.ppi_mean``).

For each verifier with predictions, three estimands, each as the PPI++ estimate with its interval beside the
human-only estimate on the same labelled units and the verifier-only (biased) one:

- **the share of claims supported**, overall, per system and per domain. A claim counts as labelled when it has
  a reference label (the report's rule) and the verifier predicted it; the verifier's predictions on claims
  without a reference are the unlabelled ones. Human and verifier verdicts are 1 for a supported label (the
  study's binary map) and 0 for any other.
- **FActScore**, the mean over responses of each response's share of supported claims: a mean of the same claims
  weighted by 1 / the response's claim count (``stats.ppi_weighted_mean``), overall and per system.
- **VeriScore's F1@K**, the third factuality score of the report, overall and per system. F1@K is not linear in
  the claims' labels, so the unit is the response (``stats.ppi.f1_at_k_responses``): a response is labelled
  when every claim of it has a reference label, y its F1@K from those labels and yhat its F1@K from the
  verifier's, with the report's K per domain (``scores.shared_k``, as the factuality scores take it).

Valid only if the labelled units are a random sample: claims labelled in the study's random order are a random
sample of claims (``Item.claim_rank``; a study stopped part-way qualifies), but not of responses (a short response
is complete sooner), so F1@K needs whole responses labelled, drawn at random.

``ppi_item_rows`` lists, per verifier and claim, which part each claim played (the labelled-items download):
it is computed by the same functions as the section, so its counts are the section's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from annotation.models import Study
from metaeval import stats
from metaeval.stats import ppi as ppi_stats

from .agreement import unavailable
from .options import ReportOptions
from .scores import claim_table, label_roles, shared_k

__all__ = [
    "ITEM_COLUMNS",
    "RANDOM_RESPONSES_RULE",
    "RANDOM_SAMPLE_RULE",
    "VERDICT_RULE",
    "ppi_item_rows",
    "ppi_rows",
    "ppi_section",
    "ppi_unavailable_reason",
]

RANDOM_SAMPLE_RULE = (
    "valid only if the human-labelled claims are a random sample of the claims: they are when annotators "
    "took items in the study's random order (a study stopped part-way qualifies), not when the labelled "
    "claims were chosen by hand or imported for a subset"
)
RANDOM_RESPONSES_RULE = (
    "F1@K is valid only if the fully labelled responses are a random sample of the responses: whole responses "
    "labelled, drawn at random (for instance gold labels imported for a random set of responses, or a study "
    "run to the end); claims labelled in the study's random order are not enough, since a response with few "
    "claims is complete sooner than a long one"
)
VERDICT_RULE = (
    "a claim is 1 when its label (the reference's, or the verifier's) is a supported label of the study's "
    "binary map and 0 otherwise; labelled claims have a reference label and the verifier's prediction, "
    "unlabelled ones only the prediction"
)
F1_RULE = (
    "VeriScore's F1@K per response (the factuality scores' rule), from the reference labels (y) and from the "
    "verifier's labels (yhat), with the factuality scores' K per domain; a response is labelled when every "
    "claim of it has a reference label, unlabelled otherwise, and left out when the verifier has no label for "
    "some of its claims; the PPI++ mean over responses is taken as for the share, n and N counting responses"
)
METHOD = (
    "PPI++ (Angelopoulos, Duchi and Zrnic 2023; prediction-powered inference, Angelopoulos et al., Science "
    "2023): lambda x the mean prediction on unlabelled claims + the mean of (label - lambda x prediction) on "
    "labelled ones, lambda power-tuned and clipped to [0, 1]; normal (CLT) intervals"
)
SHARE_RULE = (
    "only a seeded random share {share:g} of the claims with a reference label count as labelled ({kept:,} of "
    "{of:,}); the others count as unlabelled, their reference labels unused: what a smaller labelling budget gives"
)
RESPONSE_SHARE_RULE = (
    "for F1@K, a seeded random share {share:g} of the fully labelled responses count as labelled ({kept:,} of "
    "{of:,}); the others count as unlabelled"
)
#: The labelled-items download's columns (``ppi_item_rows``).
ITEM_COLUMNS = [
    "verifier",
    "item",
    "system",
    "domain",
    "response_id",
    "has_reference",
    "claim",
    "response",
    "reference_label",
    "prediction",
]


@dataclass(frozen=True)
class _Inputs:
    """What every verifier's estimates read: the claims, the human labels that count, the K of F1@K."""

    claims: pd.DataFrame  # item, domain, system, response_id (both filled in), weight
    reference: pd.Series  # each claim's reference label (NaN: none), by claim row
    human: pd.Series  # the reference labels that count as labelled for the share (after the share draw)
    labelled_responses: list[Any] | None  # responses drawn for F1@K (None: every fully labelled one)
    n_fully_labelled: int
    roles: tuple[list[str], list[str], list[str]]
    k: dict[str, Any]  # scores.shared_k
    # The claims' responses, systems and domains factorised once for every verifier (issue 35: each grouping
    # and each comparison of a million claims' strings was done again per verifier and per group).
    response_codes: tuple[np.ndarray, pd.Index]  # pd.factorize(claims["response_id"], sort=False)
    systems: _Groups
    domains: _Groups
    response_systems: np.ndarray  # each response's system code (``systems``), in ``response_codes``' order


@dataclass(frozen=True)
class _Groups:
    """A grouping column of the claims as codes, and its groups (``_groups``' order)."""

    codes: np.ndarray
    code_of: dict[Any, int]
    groups: list[Any]

    @classmethod
    def of(cls, column: pd.Series) -> _Groups:
        codes, values = pd.factorize(column.to_numpy(dtype=object), use_na_sentinel=False)
        return cls(codes, {value: code for code, value in enumerate(values)}, _groups(pd.Series(values)))

    def where(self, group: Any, index: pd.Index) -> pd.Series:
        """Which claims are in ``group`` (``column == group``)."""
        return pd.Series(self.codes == self.code_of[group], index=index)


def ppi_unavailable_reason(study: Study, verdicts: dict[str, pd.Series]) -> str | None:
    """Why a study has no prediction-powered estimates, or None when it has them."""
    if study.is_preference:
        return "a preference study has no prediction-powered estimates: they need claims and a verifier's verdicts"
    if not verdicts:
        return "no verifier has predictions on this study's claims"
    if not study.binary_map:
        return "the study has no binary map saying which labels count as supported"
    return None


def _inputs(items: pd.DataFrame, study: Study, options: ReportOptions, reference: tuple[str, pd.Series]) -> _Inputs:
    rule, labels = reference
    claims = claim_table(items)
    response_codes = pd.factorize(claims["response_id"], sort=False, use_na_sentinel=True)
    codes, n_responses = response_codes[0], len(response_codes[1])  # every claim has a response id here
    sizes = np.bincount(codes, minlength=n_responses)
    claims["weight"] = 1.0 / sizes[codes]
    roles = label_roles(study)
    ref = claims["item"].map(labels)
    human = ref
    if options.ppi_labelled_share is not None:
        human = _kept_share(claims["item"], ref, options.ppi_labelled_share, options.seed)
    full = np.bincount(codes, weights=ref.notna().to_numpy(dtype=np.float64), minlength=n_responses) == sizes
    fully_labelled = sorted(str(response) for response in response_codes[1][full])
    drawn = None
    if options.ppi_labelled_share is not None:
        drawn = _draw(fully_labelled, options.ppi_labelled_share, options.seed)
    # the factuality scores' K (abstentions change no K of a domain with claims: K counts answered responses)
    k = shared_k(claims, roles, options, None, (rule, labels), response_codes=response_codes)
    systems, domains = _Groups.of(claims["system"]), _Groups.of(claims["domain"])
    first = stats.scores.first_rows(codes, n_responses)
    return _Inputs(
        claims, ref, human, drawn, len(fully_labelled), roles, k, response_codes, systems, domains, systems.codes[first]
    )


def _draw(ids: list[str], share: float, seed: int) -> list[str]:
    """A seeded random ``share`` of ``ids`` (sorted first, so every verifier and every run draws the same)."""
    keep = round(share * len(ids))
    return sorted(np.random.default_rng(seed).permutation(np.array(sorted(ids), dtype=object))[:keep])


def _kept_share(items: pd.Series, human: pd.Series, share: float, seed: int) -> pd.Series:
    """The reference labels of a seeded random ``share`` of the labelled claims, the others' removed (NaN).

    The same claims for every verifier: the draw permutes the labelled claims' ids in sorted order."""
    chosen = set(_draw(list(items[human.notna()].astype(str)), share, seed))
    return human.where(items.astype(str).isin(chosen))


def _responses(inputs: _Inputs, predicted: pd.Series) -> pd.DataFrame:
    """One verifier's ``f1_at_k_responses`` (y, yhat and role per response)."""
    supported, unsupported, excluded = inputs.roles
    k = inputs.k["given"] if inputs.k["given"] is not None else inputs.k["k"]
    # the columns as they are (both labels are indexed as the claims): object copies of a million values were
    # made into text columns again, two more copies each (issue 35)
    claims = inputs.claims[["response_id", "system", "domain"]].assign(reference=inputs.reference, prediction=predicted)
    return ppi_stats.f1_at_k_responses(
        claims,
        supported=supported,
        unsupported=unsupported,
        excluded=excluded,
        k=k,
        labelled=inputs.labelled_responses,
        response_codes=inputs.response_codes,
    )


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
    reason = ppi_unavailable_reason(study, verdicts)
    if reason:
        return unavailable(reason)
    inputs = _inputs(items, study, options, reference)
    share = options.ppi_labelled_share
    n_with_reference = int(inputs.reference.notna().sum())
    section: dict[str, Any] = {
        "method": METHOD,
        "verdicts": VERDICT_RULE,
        "random_sample": RANDOM_SAMPLE_RULE,
        "f1_at_k_rule": F1_RULE,
        "random_responses": RANDOM_RESPONSES_RULE,
        "reference_rule": reference[0],
        "confidence": options.confidence,
        "n_claims_with_reference": n_with_reference,
        "n_responses": int(inputs.claims["response_id"].nunique()),
        "n_responses_fully_labelled": inputs.n_fully_labelled,
        "k": inputs.k["k"] if inputs.k["given"] is None else inputs.k["given"],
        "k_rule": inputs.k["rule"],
        "labelled_share": share,
        "labelled_share_rule": (
            SHARE_RULE.format(share=share, kept=int(inputs.human.notna().sum()), of=n_with_reference)
            if share is not None
            else None
        ),
        "responses_labelled_share_rule": (
            RESPONSE_SHARE_RULE.format(
                share=share, kept=len(inputs.labelled_responses or []), of=inputs.n_fully_labelled
            )
            if share is not None
            else None
        ),
        "verifiers": {},
    }
    for name, predicted in verdicts.items():
        section["verifiers"][name] = _verifier_block(inputs, inputs.claims["item"].map(predicted), options)
    return section


def _claim_masks(inputs: _Inputs, prediction: pd.Series) -> tuple[pd.Series, pd.Series]:
    """(labelled, unlabelled) claims of the share and FActScore: reference label and prediction, prediction only."""
    has_prediction = prediction.notna()
    return inputs.human.notna() & has_prediction, inputs.human.isna() & has_prediction


def _verifier_block(inputs: _Inputs, prediction: pd.Series, options: ReportOptions) -> dict[str, Any]:
    """One verifier's estimates: over all claims, per system and per domain; FActScore and F1@K per system."""
    claims, human, systems, domains = inputs.claims, inputs.human, inputs.systems, inputs.domains
    supported = set(inputs.roles[0])
    labelled, unlabelled = _claim_masks(inputs, prediction)
    y = human.isin(supported).astype(float)
    yhat = prediction.isin(supported).astype(float)

    def estimate(within: pd.Series) -> dict[str, Any]:
        fit = stats.ppi_mean(
            y[labelled & within].to_numpy(dtype=float),
            yhat[labelled & within].to_numpy(dtype=float),
            yhat[unlabelled & within].to_numpy(dtype=float),
            confidence=options.confidence,
        )
        return stats.json_ready(fit)

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

    responses = _responses(inputs, prediction)

    def f1(frame: pd.DataFrame) -> dict[str, Any]:
        return stats.json_ready(ppi_stats.ppi_f1_at_k(frame, confidence=options.confidence))

    role = responses["role"]
    everything = pd.Series(True, index=claims.index)
    return {
        "n_labelled": int(labelled.sum()),
        "n_unlabelled": int(unlabelled.sum()),
        "n_labelled_without_prediction": int((human.notna() & prediction.isna()).sum()),
        "overall": estimate(everything),
        "by_system": {str(s): estimate(systems.where(s, claims.index)) for s in systems.groups},
        "by_domain": {str(d): estimate(domains.where(d, claims.index)) for d in domains.groups},
        "factscore": per_response(everything),
        "factscore_by_system": {str(s): per_response(systems.where(s, claims.index)) for s in systems.groups},
        "n_responses_labelled": int((role == ppi_stats.LABELLED).sum()),
        "n_responses_unlabelled": int((role == ppi_stats.UNLABELLED).sum()),
        "n_responses_left_out": int((~role.isin([ppi_stats.LABELLED, ppi_stats.UNLABELLED])).sum()),
        "f1_at_k": f1(responses),
        # f1_at_k_responses' rows are the responses in response_codes' order, each with its claims' one system
        "f1_at_k_by_system": {
            str(s): f1(responses[inputs.response_systems == systems.code_of[s]]) for s in systems.groups
        },
    }


def _groups(column: pd.Series) -> list[Any]:
    """The values of a grouping column, sorted; none when there is a single group (the overall row says it all)."""
    values = sorted(pd.unique(column.to_numpy(dtype=object)), key=str)
    return values if len(values) > 1 else []


# --- the labelled-items download ------------------------------------------------------------------


def ppi_item_rows(
    items: pd.DataFrame,
    study: Study,
    options: ReportOptions,
    verdicts: dict[str, pd.Series],
    reference: tuple[str, pd.Series],
) -> Iterator[list[Any]]:
    """Per verifier (by name) and claim (in import order), the ``ITEM_COLUMNS``: which human labels the ppi
    section used. ``claim``: labelled / unlabelled / no prediction (the share and FActScore); ``response``:
    the claim's response in F1@K (``f1_at_k_responses``' role); ``reference_label``: the reference label the
    estimates used (empty when neither did); ``system`` and ``response_id`` as the section groups them (an item
    without a response is its own; without a system, "(no system)"). One verifier at a time, so a caller can
    stream the rows. Raises ValueError with the reason when the study has no such estimates."""
    reason = ppi_unavailable_reason(study, verdicts)
    if reason:
        raise ValueError(reason)
    return _item_rows(_inputs(items, study, options, reference), verdicts)


#: A claim's part in the share and FActScore, as the labelled-items download names it.
CLAIM_ROLES = np.array(["labelled", "unlabelled", "no prediction"], dtype=object)


def _item_rows(inputs: _Inputs, verdicts: dict[str, pd.Series]) -> Iterator[list[Any]]:
    claims = inputs.claims
    has_reference = inputs.reference.notna().tolist()
    reference_labels = inputs.reference.astype(object).where(inputs.reference.notna(), None)
    for name, predicted in verdicts.items():
        prediction = claims["item"].map(predicted)
        labelled, unlabelled = _claim_masks(inputs, prediction)
        claim_role = CLAIM_ROLES[np.select([labelled, unlabelled], [0, 1], default=2)]  # codes: no unicode arrays
        response_role = claims["response_id"].map(_responses(inputs, prediction).set_index("response_id")["role"])
        used = labelled | (response_role == ppi_stats.LABELLED)
        columns = zip(
            claims["item"].tolist(),
            claims["system"].tolist(),
            claims["domain"].tolist(),
            claims["response_id"].tolist(),
            has_reference,
            claim_role.tolist(),
            response_role.tolist(),
            reference_labels.where(used, None).tolist(),
            prediction.astype(object).where(prediction.notna(), None).tolist(),
            strict=True,
        )
        for row in columns:
            yield [name, *row]


# --- table rows (page, CSV, LaTeX) ----------------------------------------------------------------


def ppi_rows(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The section as table rows: per verifier and group, the three estimates with counts beside them.

    ``estimand`` names the quantity (``share_supported``, ``factscore``, ``f1_at_k``) and ``unit`` what n and
    N count (claims, or responses for F1@K)."""
    if not section or not section.get("verifiers"):
        return []
    rows = []
    for name, block in section["verifiers"].items():
        groups = [("share_supported", "all claims", block["overall"])]
        groups += [("share_supported", f"system {s}", fit) for s, fit in block["by_system"].items()]
        groups += [("share_supported", f"domain {d}", fit) for d, fit in block["by_domain"].items()]
        if "factscore" in block:
            groups.append(("factscore", "FActScore (mean per response), all", block["factscore"]))
            groups += [("factscore", f"FActScore, system {s}", fit) for s, fit in block["factscore_by_system"].items()]
        if "f1_at_k" in block:
            groups.append(("f1_at_k", "F1@K (mean per response), all", block["f1_at_k"]))
            groups += [("f1_at_k", f"F1@K, system {s}", fit) for s, fit in block["f1_at_k_by_system"].items()]
        for estimand, group, fit in groups:
            unit = "responses" if estimand == "f1_at_k" else "claims"
            rows.append({"verifier": name, "group": group, "estimand": estimand, "unit": unit, **_cells(fit)})
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
        "classical_reason": classical.get("reason") or classical.get("ci_unavailable") or "",
        "verifier_only": only.get("value"),
        "n": fit["n"],
        "N": fit["N"],
        "lambda": fit["lambda"],
        "width_ratio": fit["width_ratio"],
        "narrower": fit["width_ratio"] is not None and bool(np.less(fit["width_ratio"], 1.0)),
        "left_out": sum((fit.get("n_left_out") or {}).values()),
    }
