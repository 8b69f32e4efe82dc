"""The report as one long CSV: a row per number, so a spreadsheet or R can filter it.

Columns: ``section, scope, statistic, value, ci_low, ci_high, n, note, warning``;
``warning`` is set when an interval rests on fewer than 30 items.
Written by annotation/lib/csvsafe.py like the exports: text cells a spreadsheet
would run as a formula get a leading ``'``, rows end in CRLF, so a cell
holding a line break stays one cell; numbers are written as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotation.lib.csvsafe import csv_text

from .ppi import ppi_rows
from .present import Row, agreement_rows, estimate_row, pair_rows, small_n_warning
from .verifier_comparisons import comparison_rows

__all__ = ["CSV_COLUMNS", "report_csv"]

CSV_COLUMNS = ["section", "scope", "statistic", "value", "ci_low", "ci_high", "n", "note", "warning"]

Line = tuple[str, str, str, Any, Any, Any, Any, str]


def _rows(section: str, scope: str, rows: list[Row]) -> Iterator[Line]:
    for row in rows:
        yield section, scope, row.key or row.name, row.value, row.ci_low, row.ci_high, row.n, row.note


def _summary_lines(section: str, scope: str, summary: dict[str, Any] | None) -> Iterator[Line]:
    if not summary:
        return
    if summary.get("available") is False:
        yield section, scope, "unavailable", None, None, None, None, summary["reason"]
        return
    yield from _rows(section, scope, agreement_rows(summary))
    for weights in ("", "linear", "quadratic"):
        for row in pair_rows(summary, weights):
            name = f"cohen_kappa{'_' + weights if weights else ''}[{row.name}]"
            yield section, scope, name, row.value, row.ci_low, row.ci_high, row.n, row.note
    for pattern, count in summary.get("consensus", {}).items():
        yield section, scope, f"consensus[{pattern}]", count, None, None, summary["n_items"], "items"
    dist = summary.get("label_distribution", {})
    for label, count in dist.get("counts", {}).items():
        share = dist["shares"][label]
        yield (
            section,
            scope,
            f"label_count[{label}]",
            count,
            None,
            None,
            dist["n_ratings"],
            (f"share {share:.4f}" if share is not None else ""),
        )


def _preference_lines(pref: dict[str, Any] | None) -> Iterator[Line]:
    if not pref:
        return
    if pref.get("available") is False:
        yield "preference", "all", "unavailable", None, None, None, None, pref["reason"]
        return
    scopes = [("all", pref["counts"])] + [(f"domain:{d}", c) for d, c in pref["by_domain"].items()]
    for scope, counts in scopes:
        for system, values in counts["systems"].items():
            for key in ("wins", "wins_strong", "wins_slight", "ties", "losses", "losses_strong", "losses_slight"):
                yield "preference", scope, f"{key}[{system}]", values[key], None, None, counts["n"], "judgements"
        if "sign_test" in counts:
            test = counts["sign_test"]
            yield from _rows(
                "preference", scope, [estimate_row("sign_test", test, f"sign_test_share_{pref['systems'][0]}")]
            )
            yield "preference", scope, "sign_test_p_value", test.get("p_value"), None, None, test["n_items"], ""
    for key in ("sign_test", "sign_test_items", "position_bias"):
        test = pref[key]
        yield from _rows("preference", "all", [estimate_row(key, test, key)])
        yield (
            "preference",
            "all",
            f"{key}_p_value",
            test.get("p_value"),
            None,
            None,
            test["n_items"],
            test.get("test", ""),
        )
    yield from _summary_lines("preference_three_way", "all", pref["three_way"])


def _score_lines(scores: dict[str, Any] | None) -> Iterator[Line]:
    if not scores:
        return
    if scores.get("available") is False:
        yield "scores", "all", "unavailable", None, None, None, None, scores["reason"]
        return
    sources = [("human", scores["human"]), ("gold", scores["gold"])]
    if "reference" in scores:
        sources.append(("reference", scores["reference"]))
    sources += [(f"verifier:{name}", block) for name, block in scores.get("verifiers", {}).items()]
    for source, block in sources:
        if block.get("available") is False:
            yield f"scores_{source}", "all", "unavailable", None, None, None, None, block["reason"]
            continue
        for name, key in (("factscore", "factscore"), ("ragas_faithfulness", "faithfulness")):
            part = block[name]
            for system, entry in [("all", part["overall"]), *part["per_system"].items()]:
                est = entry[key]
                counts = (
                    f"supported {entry['supported']}, not supported {entry['not_supported']}, "
                    f"excluded {entry['excluded']}, no verdict {entry['no_verdict']}"
                )
                yield (
                    f"scores_{source}",
                    f"system:{system}",
                    name,
                    est["value"],
                    *(est["ci"] or (None, None)),
                    est["n_items"],
                    est["reason"] or counts,
                )
        for domain, entry in block["veriscore"]["by_domain"].items():
            yield (
                f"scores_{source}",
                f"domain:{domain}",
                "veriscore_k",
                entry["k"],
                None,
                None,
                entry["n_responses_for_k"],
                entry["k_source"],
            )
            for system, values in [*entry["systems"].items(), ("all", entry["all_systems"])]:
                est = values["f1_at_k"]
                yield (
                    f"scores_{source}",
                    f"domain:{domain}|system:{system}",
                    "veriscore_f1_at_k",
                    est["value"],
                    *(est["ci"] or (None, None)),
                    est["n_items"],
                    est["reason"] or "",
                )
    cred = scores["credibility"]
    if cred.get("available") is False:
        yield "credibility", "all", "unavailable", None, None, None, None, cred["reason"]
        return
    included = ", ".join(cred["source_types_included"])
    for system, entry in [("all", cred["overall"]), *cred["per_system"].items()]:
        est = entry["value"]
        yield (
            "credibility",
            f"system:{system}",
            "credibility",
            est["value"],
            None,
            None,
            est["n_items"],
            (
                est["reason"]
                or f"support {est['support']}, not support {est['not_support']}, irrelevant "
                f"{est['irrelevant']}; source types: {included}"
            ),
        )


def _judge_agreement(scope: str, block: dict[str, Any]) -> Iterator[Line]:
    if block.get("reason"):
        yield "pairwise_judge", scope, "unavailable", None, None, None, None, block["reason"]
        return
    rows = [
        estimate_row("non_tie_accuracy", block["non_tie_accuracy"]),
        estimate_row("cohen_kappa_5point", block["five_point"]["cohen_kappa"]),
        estimate_row("cohen_kappa_3way", block["three_way"]["cohen_kappa"]),
        estimate_row("ceiling_human_non_tie_accuracy", block["ceiling"]["non_tie_accuracy"]["human"]),
        estimate_row("ceiling_human_cohen_kappa_5point", block["ceiling"]["five_point"]["human"]["cohen_kappa"]),
        estimate_row("ceiling_human_cohen_kappa_3way", block["ceiling"]["three_way"]["human"]["cohen_kappa"]),
    ]
    yield from _rows("pairwise_judge", scope, rows)


def _judge_lines(judges: dict[str, Any] | None) -> Iterator[Line]:
    """Each pairwise judge against the human majority and the ceiling, its position effects, per domain."""
    for name, judge in (judges or {}).items():
        scope = f"judge:{name}"
        yield from _judge_agreement(scope, judge["agreement"])
        position = judge["position"]
        yield from _rows(
            "pairwise_judge",
            scope,
            [
                estimate_row("position_inconsistency", position["position_inconsistency"]),
                estimate_row("list_1_preferred", position["list_1_preferred"]),
            ],
        )
        for domain, block in judge["by_domain"].items():
            yield from _judge_agreement(f"{scope}/domain:{domain}", block)


ADJUDICATION_STATISTICS = (
    "queue",
    "items_adjudicated",
    "items_with_two_or_more",
    "adjudicator_agreement",
    "guidelines_unclear_share",
)


def _adaptive_lines(section: dict[str, Any] | None) -> Iterator[Line]:
    """Adaptive overlap: the rule, the items it closed below N and the labels not asked for."""
    if not section:
        return
    yield (
        "adaptive_overlap",
        "all",
        "n_items_closed_early",
        section["n_items_closed_early"],
        None,
        None,
        None,
        section["rule"],
    )
    yield "adaptive_overlap", "all", "labels_saved", section["labels_saved"], None, None, None, section["variable_n"]


def _adjudication_lines(section: dict[str, Any] | None) -> Iterator[Line]:
    if not section:
        return
    note = f"queue rule {section['rule']}; reference rule {section['reference_rule']}"
    for key in ADJUDICATION_STATISTICS:
        n = section["items_with_two_or_more"] if key == "adjudicator_agreement" else None
        yield "adjudication", "all", key, section[key], None, None, n, note


def _lines(report: dict[str, Any]) -> Iterator[Line]:
    for key in ("n_items", "n_items_annotated", "n_items_gold", "n_annotators", "n_annotations", "n_disagreements"):
        yield "study", report["study"], key, report[key], None, None, None, ""
    # which labels every number counts (metaeval.study_frame), each rule beside its count
    for key, rule in (
        ("n_annotations_in_agreement", "gold_rule"),
        ("n_items_check", "checks_rule"),
    ):
        if key in report:
            yield "study", report["study"], key, report[key], None, None, None, report.get(rule) or ""
    yield from _adaptive_lines(report.get("adaptive_overlap"))
    yield from _summary_lines("agreement", "all", report["agreement"])
    yield from _summary_lines("binary", "all", report["binary"])
    for domain, summary in (report["by_domain"] or {}).items():
        yield from _summary_lines("by_domain", f"domain:{domain}", summary)
        yield from _summary_lines("by_domain_binary", f"domain:{domain}", summary.get("binary"))
    yield from _preference_lines(report["preference"])
    yield from _score_lines(report["scores"])
    yield from _ppi_lines(report.get("ppi"))
    yield from _comparison_lines(report.get("verifier_comparisons"))
    yield from _judge_lines(report.get("pairwise_judges"))
    yield from _adjudication_lines(report.get("adjudication"))
    yield from _quality_lines(report)
    for entry in report["disagreements"]:
        labels = "; ".join(f"{who}={label}" for who, label in entry["labels"].items())
        yield "disagreement", f"item:{entry['item']}", entry["pattern"], None, None, None, len(entry["labels"]), labels


def _comparison_lines(section: dict[str, Any] | None) -> Iterator[Line]:
    """Per verifier pair: each paired difference with its interval, then the McNemar test (raw and Holm p)."""
    for entry in comparison_rows(section):
        row, scope = entry["row"], f"pair:{entry['pair']}"
        yield (
            "verifier_comparison",
            scope,
            f"difference[{row.key}]",
            row.value,
            row.ci_low,
            row.ci_high,
            entry["n"],
            row.note,
        )
        if entry["first"]:
            note = f"b={entry['b']}, c={entry['c']}; Holm p={entry['p_holm']}"
            yield "verifier_comparison", scope, "mcnemar_exact_p", entry["p"], None, None, entry["n"], note


def _ppi_lines(section: dict[str, Any] | None) -> Iterator[Line]:
    """Per verifier and group: the PPI++, human-only and verifier-only estimates of the share supported,
    FActScore and F1@K (``statistic`` names which, ``n`` counts claims, or responses for F1@K)."""
    for row in ppi_rows(section):
        scope = f"verifier:{row['verifier']}|{row['group']}"
        estimand, unit = row["estimand"], row["unit"]
        low, high = row["ppi_ci"] or (None, None)
        left_out = f"; {row['left_out']} {unit} left out" if row["left_out"] else ""
        note = f"n={row['n']} labelled, N={row['N']} unlabelled {unit}; lambda={row['lambda']}{left_out}"
        note = f"{note}; {row['ppi_reason']}" if row["ppi_reason"] else note
        yield "ppi", scope, f"ppi_{estimand}", row["ppi"], low, high, row["n"] + row["N"], note
        low, high = row["classical_ci"] or (None, None)
        yield "ppi", scope, f"human_only_{estimand}", row["classical"], low, high, row["n"], row["classical_reason"]
        yield "ppi", scope, f"verifier_only_{estimand}", row["verifier_only"], None, None, row["n"] + row["N"], unit


def _quality_lines(report: dict[str, Any]) -> Iterator[Line]:
    """The reference rule's counts, each annotator's quality, and the verifiers against the reference."""
    ref = report.get("reference")
    if ref:
        for source, count in ref["counts"].items():
            yield "reference", f"rule:{ref['rule']}", f"items[{source}]", count, None, None, ref["n_items"], ""
    quality = report.get("annotator_quality") or {}
    for who, entry in quality.get("annotators", {}).items():
        scope = f"annotator:{who}"
        for key in ("kappa_reference", "kappa_others", "gold_accuracy"):
            est = entry[key]
            yield (
                "annotator_quality",
                scope,
                key,
                est["value"],
                *(est["ci"] or (None, None)),
                est["n_items"],
                (est["reason"] or ""),
            )
        if "dawid_skene_accuracy" in entry:
            yield (
                "annotator_quality",
                scope,
                "dawid_skene_accuracy",
                entry["dawid_skene_accuracy"],
                None,
                None,
                (entry["n_labels"]),
                "",
            )
        if "mace_competence" in entry:
            yield (
                "annotator_quality",
                scope,
                "mace_competence",
                entry["mace_competence"],
                None,
                None,
                (entry["n_labels"]),
                "MACE (EM): probability of not guessing",
            )
        yield "annotator_quality", scope, "flagged", int(entry["flagged"]), None, None, None, quality["flag_rule"]
    for name, entry in (report.get("verifiers_vs_reference") or {}).items():
        for key in ("accuracy", "cohen_kappa"):
            est = entry[key]
            yield (
                "verifier_reference",
                f"verifier:{name}",
                key,
                est["value"],
                *(est["ci"] or (None, None)),
                (est["n_items"]),
                f"reference: {entry['reference_rule']}",
            )


def _with_warning(lines: Iterator[Line]) -> Iterator[tuple[Any, ...]]:
    for line in lines:
        n, ci_low, ci_high = line[6], line[4], line[5]
        has_interval = ci_low is not None and ci_high is not None
        yield (*line, small_n_warning(n if isinstance(n, int) else None, has_interval))


def report_csv(report: dict[str, Any]) -> str:
    """The whole report as CSV text (UTF-8, one number per row)."""
    return csv_text(CSV_COLUMNS, _with_warning(_lines(report)))
