"""Report dict -> plain table rows, shared by the HTML page, the standalone HTML and the CSV.

Rows carry raw numbers (None when undefined, with the reason as the note);
formatting to three decimals is left to each renderer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Row",
    "AGREEMENT_STATISTICS",
    "estimate_row",
    "agreement_rows",
    "pair_rows",
    "domain_rows",
    "ceiling_rows",
    "preference_rows",
    "score_rows",
    "credibility_rows",
    "question_blocks",
    "condition_rows",
    "questionnaire_blocks",
    "veriscore_rows",
    "SMALL_N",
    "small_n_warning",
]

#: (key in an agreement summary, display name), in the order a paper would list them.
AGREEMENT_STATISTICS = (
    ("fleiss_kappa", "Fleiss' kappa (items with all N ratings)"),
    ("fleiss_kappa_generalized", "Fleiss' kappa, generalised (Gwet; items with 2+ ratings)"),
    ("krippendorff_alpha", "Krippendorff's alpha, nominal"),
    ("krippendorff_alpha_ordinal", "Krippendorff's alpha, ordinal"),
    ("krippendorff_alpha_interval", "Krippendorff's alpha, interval"),
    ("mean_cohen_kappa", "Mean pairwise Cohen's kappa"),
    ("mean_cohen_kappa_linear", "Mean pairwise Cohen's kappa, linear weights"),
    ("mean_cohen_kappa_quadratic", "Mean pairwise Cohen's kappa, quadratic weights"),
    ("gwet_ac1", "Gwet's AC1"),
    ("randolph_kappa", "Randolph's free-marginal kappa"),
    ("percent_agreement", "Percent (pairwise) agreement"),
    ("full_agreement", "Share of items with full agreement"),
    ("majority_agreement", "Share of items with a strict majority"),
)


@dataclass(frozen=True)
class Row:
    """One statistic: value, interval, the n it rests on and a note (the reason when undefined)."""

    name: str
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    note: str = ""
    key: str = ""

    @property
    def warning(self) -> str:
        """Said beside the statistic when its interval rests on fewer than SMALL_N items."""
        return small_n_warning(self.n, self.ci_low is not None and self.ci_high is not None)


def _note(estimate: dict[str, Any]) -> str:
    if estimate.get("value") is None:
        return estimate.get("reason") or "undefined"
    parts = []
    if estimate.get("n_items_left_out"):
        parts.append(_left_out_note(estimate))
    if estimate.get("p_observed") is not None and estimate.get("p_expected") is not None:
        parts.append(f"observed {estimate['p_observed']:.3f}, chance {estimate['p_expected']:.3f}")
    if estimate.get("n_pairs_undefined"):
        parts.append(f"{estimate['n_pairs_undefined']} of {estimate['n_pairs']} pairs undefined")
    if estimate.get("n_undefined"):
        parts.append(f"undefined on {estimate['n_undefined']} of {estimate['n_resamples']} resamples")
    return "; ".join(parts)


def _left_out_note(estimate: dict[str, Any]) -> str:
    """ "N items left out" with each cause counted (reporting.agreement.left_out_causes)."""
    n, m = estimate["n_items_left_out"], estimate.get("n_raters")
    causes = estimate.get("left_out_causes")
    if not causes:
        return f"{n} items without all {m} ratings left out"
    why = []
    if causes["fewer_given"]:
        why.append(f"{causes['fewer_given']} received fewer than {m} labels")
    if causes["lost_dropped"]:
        dropped = " / ".join(causes["dropped_labels"]) or "dropped"
        why.append(f"{causes['lost_dropped']} had a {dropped} label dropped")
    if causes["more_given"]:
        why.append(f"{causes['more_given']} hold more than {m}")
    return f"{n} items without all {m} ratings left out" + (f": {'; '.join(why)}" if why else "")


#: Below this many items an interval says little: the page, the HTML report and the CSV warn.
SMALL_N = 30


def small_n_warning(n: int | None, has_interval: bool) -> str:
    """The warning beside a statistic whose interval rests on fewer than SMALL_N items; "" otherwise."""
    if not has_interval or n is None or n >= SMALL_N:
        return ""
    return f"only {n} item{'s' if n != 1 else ''} (fewer than {SMALL_N}): the interval is unreliable"


def estimate_row(name: str, estimate: dict[str, Any], key: str = "") -> Row:
    """A Row from an ``Estimate.to_dict()``."""
    ci = estimate.get("ci") or (None, None)
    return Row(
        name=name,
        value=estimate.get("value"),
        ci_low=ci[0],
        ci_high=ci[1],
        n=estimate.get("n_items"),
        note=_note(estimate),
        key=key,
    )


def agreement_rows(summary: dict[str, Any] | None) -> list[Row]:
    """The coefficients of one agreement summary that it holds, in paper order."""
    if not summary or summary.get("available") is False:
        return []
    return [estimate_row(name, summary[key], key) for key, name in AGREEMENT_STATISTICS if key in summary]


def pair_rows(summary: dict[str, Any] | None, weights: str = "") -> list[Row]:
    """Pairwise Cohen kappas, one row per annotator pair."""
    if not summary:
        return []
    key = f"pairwise_cohen_kappa_{weights}" if weights else "pairwise_cohen_kappa"
    return [estimate_row(" / ".join(map(str, pair["annotators"])), pair, key) for pair in summary.get(key, [])]


def domain_rows(by_domain: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per domain: items and the headline coefficients, for one compact table."""
    rows = []
    for domain, summary in (by_domain or {}).items():
        rows.append(
            {
                "domain": domain,
                "n_items": summary["n_items"],
                "n_annotations": summary["n_annotations"],
                **{
                    key: estimate_row(key, summary[key], key)
                    for key in ("fleiss_kappa", "krippendorff_alpha", "percent_agreement", "gwet_ac1")
                },
            }
        )
    return rows


def preference_rows(counts: dict[str, Any]) -> list[dict[str, Any]]:
    """Wins / ties / losses per system split strong and slight (VeriScore's Figure 5)."""
    return [{"system": system, **values} for system, values in counts.get("systems", {}).items()]


def _system_score_rows(block: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "all systems", block["overall"]
    yield from block["per_system"].items()


def score_rows(block: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """Per system (and all) rows of a FActScore or faithfulness block, with counts."""
    rows = []
    for system, entry in _system_score_rows(block):
        rows.append({"system": system, "estimate": estimate_row(system, entry[key], key), **entry})
    return rows


def veriscore_rows(block: dict[str, Any]) -> list[dict[str, Any]]:
    """Per domain and system: K, F1@K with its interval, precision and recall."""
    rows = []
    for domain, entry in block["by_domain"].items():
        for system, values in [*entry["systems"].items(), ("all systems", entry["all_systems"])]:
            rows.append(
                {
                    "domain": domain,
                    "k": entry["k"],
                    "k_source": entry["k_source"],
                    "system": system,
                    "estimate": estimate_row(system, values["f1_at_k"], "f1_at_k"),
                    **values,
                }
            )
    return rows


def credibility_rows(block: dict[str, Any]) -> list[dict[str, Any]]:
    """Overall and per-system credibility rows with their counts."""
    rows = [{"system": "all systems", **block["overall"]}]
    rows += [{"system": system, **entry} for system, entry in block["per_system"].items()]
    return [{**row, "estimate": estimate_row(row["system"], row["value"], "credibility")} for row in rows]


def ceiling_rows(ceiling: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per annotator: accuracy and Cohen's kappa against the majority of the other annotators."""
    rows = []
    for entry in (ceiling or {}).get("annotators", []):
        human = entry["human"]
        rows.append(
            {
                "annotator": entry["annotator"],
                "n_items": entry["n_items"],
                "n_no_majority": entry["n_no_majority_of_others"],
                "accuracy": estimate_row("accuracy", human["accuracy"], "accuracy"),
                "kappa": estimate_row("cohen_kappa", human["cohen_kappa"], "cohen_kappa"),
            }
        )
    return rows


def _option_rows(distribution: dict[str, Any]) -> list[dict[str, Any]]:
    """A question's answers as (answer, count, share) rows; a number's or a text's as its summary."""
    overall = distribution.get("overall") or {}
    counts = overall.get("counts")
    if counts is None:
        return [
            {"option": name, "count": overall.get(name), "share": None}
            for name in ("mean", "sd", "median")
            if name in overall
        ]
    shares = overall.get("shares") or {}
    return [{"option": option, "count": count, "share": shares.get(option)} for option, count in counts.items()]


#: The summary numbers a number question's distribution shows, per group as overall.
NUMBER_SUMMARY = ("n_answers", "mean", "sd", "median")

#: What a grouped distribution's column heads say the groups are.
GROUP_NAMES = {"label": "label given", "system": "system", "condition": "condition"}


def _group_table(distribution: dict[str, Any] | None) -> dict[str, Any] | None:
    """A question's answers side by side per group (label, system or condition): one row per answer
    (count and share in each group) or, for numbers, per summary figure. None without groups."""
    if not distribution or not distribution.get("groups"):
        return None
    groups = distribution["groups"]
    first = next(iter(groups.values()))
    if "counts" in first:
        names = list(first["counts"])
        rows = [
            {
                "option": option,
                "cells": [
                    {"count": block["counts"].get(option), "share": (block.get("shares") or {}).get(option)}
                    for block in groups.values()
                ],
            }
            for option in names
        ]
        rows.append(
            {"option": "answers", "cells": [{"count": block["n_answers"], "share": None} for block in groups.values()]}
        )
    else:
        rows = [
            {"option": name, "cells": [{"count": block.get(name), "share": None} for block in groups.values()]}
            for name in NUMBER_SUMMARY
            if name in first
        ]
    return {
        "by": GROUP_NAMES.get(distribution["by"], distribution["by"]),
        "groups": list(groups),
        "rows": rows,
        "n_without_group": distribution.get("n_without_group", 0),
    }


def question_blocks(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The extra questions' section as the report page and the LaTeX tables show it: per question its
    answers' counts, its agreement coefficients (estimate rows) and, per claim, each system's share."""
    if not section:
        return []
    blocks = []
    for question in section["questions"]:
        agreement = question.get("agreement") or {}
        rows = [
            estimate_row(name, agreement[key], key)
            for key, name in (
                ("alpha", f"Krippendorff's alpha ({agreement.get('level', '')})"),
                ("percent_agreement", "Percent agreement"),
                ("mean_cohen_kappa_quadratic", "Mean Cohen's kappa, quadratic weights"),
                ("mean_cohen_kappa_linear", "Mean Cohen's kappa, linear weights"),
            )
            if isinstance(agreement.get(key), dict)
        ]
        for option, pair in (agreement.get("per_option") or {}).items():
            rows.append(estimate_row(f"alpha, '{option}' ticked or not", pair["alpha"], "alpha"))
        per_claim = []
        for system, scores in ((question.get("per_claim") or {}).get("systems") or {}).items():
            for key, name in (
                ("each_judgement", "every judgement"),
                ("per_response_mean", "mean per response"),
                ("majority", "majority per claim"),
            ):
                if isinstance(scores.get(key), dict):
                    row = estimate_row(f"{system}: {name}", scores[key], key)
                    per_claim.append({"row": row, "k": scores[key].get("k"), "n": scores[key].get("n")})
        blocks.append(
            {
                **question,
                "options": _option_rows(question["distribution"]),
                "group_tables": [
                    table
                    for table in (
                        _group_table(question.get("distribution_by_group")),
                        _group_table(question.get("distribution_by_condition")),
                    )
                    if table is not None
                ],
                "agreement_rows": rows,
                "per_claim_rows": per_claim,
            }
        )
    return blocks


#: The measures of a condition comparison, as the report names them.
CONDITION_MEASURES = (
    ("agreement_with_reference", "Agreement with the reference"),
    ("agreement_with_verifier", "Agreement with the verifier (automation bias)"),
    ("median_active_ms", "Median time per item (ms)"),
)


def condition_rows(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per measure: each condition's estimate and, for each condition against the baseline, the difference
    with its interval and permutation p-value; counts beside every share."""
    comparison = (section or {}).get("comparison")
    if not comparison:
        return []
    rows = []
    for key, name in CONDITION_MEASURES:
        for condition, block in comparison["conditions"].items():
            estimate = block.get(key) or {}
            rows.append(
                {
                    "measure": name,
                    "what": condition,
                    "row": estimate_row(condition, estimate, key),
                    "k": estimate.get("k"),
                    "n": estimate.get("n"),
                    "p": None,
                }
            )
        for condition, differences in comparison["differences"].items():
            estimate = differences.get(key) or {}
            rows.append(
                {
                    "measure": name,
                    "what": f"{condition} − {comparison['baseline']}",
                    "row": estimate_row(condition, estimate, key),
                    "k": None,
                    "n": None,
                    "p": estimate.get("p_value"),
                    "difference": True,
                }
            )
    return rows


def questionnaire_blocks(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The pre- and post-study questionnaires' answers as the report page shows them."""
    titles = {"pre": "Before the study", "post": "After the study"}
    return [
        {
            "title": titles[kind],
            "n_people": section[kind]["n_people"],
            "questions": [{**q, "options": _option_rows(q["distribution"])} for q in section[kind]["questions"]],
        }
        for kind in ("pre", "post")
        if section and kind in section
    ]
