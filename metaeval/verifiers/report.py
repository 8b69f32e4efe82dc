"""The "verifiers" section of a study report: each verifier against the humans, beside the human ceiling.

``verifier_report(study)`` returns, per verifier name, the verifier-versus-
human-majority numbers of ``metaeval.stats`` (coverage, accuracy, balanced
accuracy, Cohen kappa over the study's full label list, macro-F1, per class,
confusion matrix) with bootstrap intervals, the human ceiling on the same
items, how often its answers could not be read or its calls failed, tokens
and estimated cost, the system-level correlation of human-based and
verifier-based FActScore-style supported fractions, and the items where it
disagrees with the human majority, with its rationale. JSON-ready: undefined
numbers are None with a reason, and ``blanks`` gathers, per column of the page's
table, the reason of each number shown as a dash (taken from that number).

The reference is the human labels (strict majority per item; gold items
left out, as in the agreement report), or the gold labels when the study
has no human labels. A verifier is read as it is now: per item, its latest
prediction.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from annotation.models import Study

from ..models import Prediction, Verifier
from ..stats import (
    CLASSIFICATION_METRICS,
    Estimate,
    build_table,
    classification_metrics,
    human_ceiling,
    json_ready,
    majority_vote,
    prediction_codes,
    system_correlation,
    verifier_vs_majority,
)
from ..study_frame import StudyFrame, study_frame
from .presets.pairwise import PAIRWISE_JUDGE
from .runner.chunks import estimate_cost
from .selectors import current_predictions, rationales
from .system_responses import ResponseGroups

__all__ = ["blanks", "verifier_report"]

METRICS = CLASSIFICATION_METRICS
MAX_RATIONALE = 2000


def verifier_report(
    study: Study,
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    disagreements_limit: int = 200,
    frame: StudyFrame | None = None,
    predictions: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """``{verifier name: {...}}`` for every verifier of the study (``{}`` when it has none).

    The human labels and the reference come from ``frame`` (the report's study frame; by default the
    study's own rules), so the verifiers are scored against the labels every other section counts.
    ``predictions``: the study's ``current_predictions`` on the frame's items, when the caller has them."""
    # Pairwise judges compare claim lists; their section is pairwise_report's.
    verifiers = list(Verifier.objects.filter(study=study).exclude(preset=PAIRWISE_JUDGE.id).order_by("name"))
    if not verifiers:
        return {}
    labels = list(study.labels)
    frame = frame or study_frame(study)
    reference, source = frame.verifier_reference()
    reference = reference[reference["label"].isin(labels)]
    table = build_table(reference, labels) if len(reference) else None
    majority = majority_vote(table).labels() if table is not None else pd.Series(dtype=object)
    if predictions is None:
        predictions = current_predictions(study, frame.rows.items)
    groups = _response_groups(study, frame.items, majority) if table is not None else "no reference labels"
    out = {}
    for verifier in verifiers:
        rows = predictions[predictions["verifier_id"] == verifier.pk]
        out[verifier.name] = _verifier_section(
            study,
            verifier,
            rows,
            table,
            majority,
            source,
            groups,
            n_resamples=n_resamples,
            seed=seed,
            disagreements_limit=disagreements_limit,
        )
    ready = json_ready(out)
    for section in ready.values():
        section["blanks"] = blanks(section)
    return ready


def _rate(count: int, of: int, reason: str, **extra: Any) -> Estimate:
    return Estimate(count / of, None, of, extra=extra) if of else Estimate.undefined(reason, 0, **extra)


def _verifier_section(
    study: Study,
    verifier: Verifier,
    rows: pd.DataFrame,
    table,
    majority: pd.Series,
    source: str,
    groups: ResponseGroups | str,
    *,
    n_resamples: int,
    seed: int | None,
    disagreements_limit: int,
) -> dict[str, Any]:
    labels = list(study.labels)
    n_predictions = len(rows)
    failed = rows["error"] != ""
    unreadable = ~failed & (rows["parse_status"] == Prediction.ParseStatus.UNPARSEABLE)
    answered = int((~failed).sum())
    tokens_in, tokens_out = int(rows["tokens_in"].sum()), int(rows["tokens_out"].sum())
    cost = estimate_cost(verifier, tokens_in, tokens_out)
    kept = ["item", "label", "score", "pk", *(["item_row"] if "item_row" in rows else [])]
    labelled = rows.loc[rows["label"].notna() & rows["label"].isin(labels), kept]
    section: dict[str, Any] = {
        "id": verifier.pk,
        "kind": verifier.kind,
        "preset": verifier.preset,
        "model": verifier.model,
        "reference": source,
        "n_predictions": n_predictions,
        "n_labelled": len(labelled),
        "n_stale_labels": int((rows["label"].notna() & ~rows["label"].isin(labels)).sum()),
        "parse_failure_rate": _rate(
            int(unreadable.sum()), answered, "no call was answered", n_unparseable=int(unreadable.sum())
        ),
        "error_rate": _rate(
            int(failed.sum()), n_predictions, "the verifier has no predictions", n_errors=int(failed.sum())
        ),
        "tokens": {"in": tokens_in, "out": tokens_out},
        "estimated_cost": None if cost is None else float(cost),
    }
    if table is None:
        reason = "the study has no human labels and no gold labels to compare with"
        section.update(
            {
                "n": 0,
                "coverage": Estimate.undefined(reason),
                "per_class": {},
                "confusion": None,
                "human_ceiling": {"reason": reason},
                "disagreements": [],
                "n_disagreements": 0,
                "system_correlation": {"reason": reason},
                "binary": None,
                **{name: Estimate.undefined(reason) for name in METRICS},
            }
        )
        return section
    # Only its labels on the reference's items count in the comparisons below (each drops the others): found once,
    # so that each does not look a million item ids up again (issue 35).
    on_reference = labelled[table.item_codes_for(labelled, ["item"]) >= 0]
    frame = on_reference[["item", "label"]]
    result = verifier_vs_majority(table, frame, item="item", n_resamples=n_resamples, seed=seed)
    vote = majority_vote(table)
    pred, _ = prediction_codes(table, frame, item="item")
    use = (vote.codes >= 0) & (pred >= 0)
    section.update(
        {
            "n": result["n_predicted"],
            "n_reference_items": result["n_majority"],
            "n_no_majority": result["n_no_majority"],
            "coverage": result["coverage"],
            **{name: result[name] for name in METRICS},
            "per_class": result["per_class"],
            "confusion": result["confusion_matrix"],
            "human_ceiling": _ceiling(table, frame, source),
            "binary": _binary(study, vote.codes[use], pred[use]),
        }
    )
    section["disagreements"], section["n_disagreements"] = _disagreements(on_reference, majority, disagreements_limit)
    section["system_correlation"] = _system_correlation(groups, labelled, n_resamples=n_resamples, seed=seed)
    return section


def _ceiling(table, frame: pd.DataFrame, source: str) -> dict[str, Any]:
    """Each annotator against the majority of the others, and the verifier against that same majority.

    ``reason`` says why the ceiling's headline number (the mean human kappa) is undefined, taken
    from that value, so the page's blank never gives a cause the study does not have; None when
    it is defined.
    """
    if table.n_annotators < 2 or int((table.ratings_per_item >= 2).sum()) == 0:
        return {
            "reason": "the human ceiling needs items with at least two human labels; "
            f"the reference ({source}) has {table.n_annotators} rater(s) and at most "
            f"{int(table.ratings_per_item.max(initial=0))} label(s) per item",
            "human": None,
            "verifier": None,
        }
    ceiling = human_ceiling(table, frame, item="item")
    kappa = ceiling["mean"]["human"]["cohen_kappa"]
    return {
        "reason": None if kappa.defined else kappa.reason,
        **ceiling["mean"],
        "annotators": ceiling["annotators"],
        "min_others": ceiling["min_others"],
    }


#: Key in a section's ``blanks`` -> the verifiers table's column head.
BLANK_COLUMNS = {
    "coverage": "Coverage",
    "accuracy": "Accuracy",
    "balanced_accuracy": "Balanced acc.",
    "cohen_kappa": "Cohen's kappa",
    "macro_f1": "Macro-F1",
    "ceiling_human_kappa": "Ceiling: human kappa",
    "ceiling_verifier_kappa": "Ceiling: verifier kappa",
    "parse_failure_rate": "Parse failures",
    "error_rate": "Errors",
    "estimated_cost": "Cost",
}

#: Cost cell's blank: estimate_cost gives None exactly when the verifier has neither price.
NO_PRICE = "the verifier has no price per 1,000 tokens (set one on the verifier to estimate the cost)"


def _value_reason(entry: Any, fallback: str) -> str | None:
    """The reason an estimate (a JSON dict) shows a dash, None when it has a value."""
    if isinstance(entry, dict) and entry.get("value") is not None:
        return None
    return (entry.get("reason") if isinstance(entry, dict) else None) or fallback


def blanks(section: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Column key -> {column head, reason}: why the verifiers table shows a dash there, for one
    JSON-ready verifier section.

    Every reason comes from the value that is missing, never from a guess at the cause; the
    page prints them under the table and as the cells' titles.
    """
    ceiling = section.get("human_ceiling") or {}
    not_computed = ceiling.get("reason") or "the human ceiling was not computed"

    def ceiling_kappa(who: str) -> Any:
        return ((ceiling.get(who) or {}).get("cohen_kappa")) if ceiling.get(who) else None

    columns = {
        **{name: section.get(name) for name in ("coverage", *METRICS, "parse_failure_rate", "error_rate")},
        "ceiling_human_kappa": ceiling_kappa("human"),
        "ceiling_verifier_kappa": ceiling_kappa("verifier"),
    }
    out = {key: _value_reason(entry, not_computed) for key, entry in columns.items()}
    if section.get("estimated_cost") is None:
        out["estimated_cost"] = NO_PRICE
    return {key: {"column": BLANK_COLUMNS[key], "reason": reason} for key, reason in out.items() if reason}


def _binary(study: Study, truth: np.ndarray, pred: np.ndarray) -> dict[str, Any] | None:
    """The same comparison after the study's binary collapse (positive vs negative), when it has one."""
    mapping = study.binary_map or {}
    if not mapping or any(label not in mapping for label in study.labels):
        return None
    sides = ["positive", "negative"]
    lookup = np.array([sides.index(mapping[label]) if mapping[label] in sides else -1 for label in study.labels])
    t, p = lookup[truth], lookup[pred]
    keep = (t >= 0) & (p >= 0)
    metrics = classification_metrics(t[keep], p[keep], sides)
    return {"labels": sides, **{name: metrics[name] for name in METRICS}, "confusion": metrics["confusion_matrix"]}


def _disagreements(labelled: pd.DataFrame, majority: pd.Series, limit: int) -> tuple[list[dict[str, Any]], int]:
    merged = labelled.assign(human_majority=labelled["item"].map(majority))
    differ = merged[merged["human_majority"].notna() & (merged["human_majority"] != merged["label"])]
    shown = differ.head(limit)
    said = rationales(
        shown["pk"].tolist()
    )  # read for these rows only: a million predictions' would be most of a report
    rows = [
        {
            "item": row.item,
            "human_majority": row.human_majority,
            "verifier_label": row.label,
            "score": None if pd.isna(row.score) else float(row.score),
            "rationale": _shortened(said[row.pk]),
        }
        for row in shown.itertuples(index=False)
    ]
    return rows, len(differ)


def _shortened(rationale: str) -> str:
    return rationale if len(rationale) <= MAX_RATIONALE else rationale[:MAX_RATIONALE] + "…"


def _response_groups(study: Study, items: pd.DataFrame, majority: pd.Series) -> ResponseGroups | str:
    """The claims grouped by response with the humans' supported calls, once for every verifier's system
    correlation; or why there is no correlation (the study says no label is supported)."""
    mapping = study.binary_map or {}
    if not any(side == "positive" for side in mapping.values()):
        return "the study has no binary map saying which labels count as supported"
    role = {
        label: 1.0 if side == "positive" else 0.0 for label, side in mapping.items() if side in ("positive", "negative")
    }
    return ResponseGroups(items[["item", "response_id", "system"]], role, majority)


def _system_correlation(
    groups: ResponseGroups | str, labelled: pd.DataFrame, *, n_resamples: int, seed: int | None
) -> dict[str, Any]:
    """Kendall tau and Spearman over systems of FActScore-style supported fractions (humans vs verifier)."""
    if isinstance(groups, str):
        return {"reason": groups, "kendall_tau": Estimate.undefined(groups), "spearman": Estimate.undefined(groups)}
    responses = groups.responses(labelled.drop(columns=["score", "pk"]))
    result = system_correlation(responses, n_resamples=n_resamples, seed=seed)
    result["score"] = (
        "FActScore-style supported fraction: per response, supported / (supported + not supported) "
        "claims; per system, the mean over its responses"
    )
    result["reason"] = None if result["kendall_tau"].defined else result["kendall_tau"].reason
    return result
