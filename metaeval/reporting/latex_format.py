"""The report's tables as LaTeX (booktabs), for the paper: one ``tabular`` per table, or all in ``report.tex``.

Built from the same rows as the page and the CSV (``present.py``), so the
numbers are the ones the page shows. Cell text (annotator, system, domain
and verifier names are researcher input) is escaped, so a name holding
``& % _ # $`` cannot break the document. An interval on fewer than
``SMALL_N`` items carries a dagger and the table a note saying why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .ppi import ppi_rows
from .present import (
    SMALL_N,
    Row,
    agreement_rows,
    ceiling_rows,
    condition_rows,
    credibility_rows,
    domain_rows,
    pair_rows,
    preference_rows,
    question_blocks,
    score_rows,
    small_n_warning,
    veriscore_rows,
)
from .verifier_comparisons import comparison_rows

__all__ = ["LatexTable", "escape", "report_tables", "table_tex", "report_tex", "TABLE_NAMES"]

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_SPECIAL_RE = re.compile("|".join(re.escape(char) for char in _SPECIAL))
DASH = "--"
DAGGER = r"$^{\dagger}$"


def escape(text: Any) -> str:
    """Text safe inside a LaTeX cell: the ten special characters escaped, line breaks as spaces."""
    plain = " ".join(str(text).split())
    return _SPECIAL_RE.sub(lambda match: _SPECIAL[match.group(0)], plain)


def _num(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    if isinstance(value, int):
        return f"{value:,}".replace(",", "{,}")
    return f"{float(value):.{digits}f}"


def _p(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    return "$<$ 0.0001" if float(value) < 0.0001 else f"{float(value):.4f}"


def _ci(low: Any, high: Any, n: Any) -> str:
    if low is None or high is None:
        return DASH
    mark = DAGGER if small_n_warning(n if isinstance(n, int) else None, True) else ""
    return f"[{low:.3f}, {high:.3f}]{mark}"


def _pair_ci(bounds: Any, n: Any) -> str:
    low, high = bounds or (None, None)
    return _ci(low, high, n)


def _row_ci(row: Row) -> str:
    return _ci(row.ci_low, row.ci_high, row.n)


def _estimate_ci(estimate: dict[str, Any] | None) -> str:
    estimate = estimate or {}
    low, high = estimate.get("ci") or (None, None)
    return _ci(low, high, estimate.get("n_items"))


@dataclass
class LatexTable:
    """One table: its name (the download's), a caption, the column heads and aligns, the cells (already LaTeX)."""

    name: str
    caption: str
    head: list[str]
    align: str
    rows: list[list[str]] = field(default_factory=list)

    @property
    def small_n(self) -> bool:
        return any(DAGGER in cell for row in self.rows for cell in row)


def _estimates(name: str, caption: str, rows: list[Row], n_label: str = "Items") -> LatexTable:
    return LatexTable(
        name,
        caption,
        ["Statistic", "Value", "95\\% CI", n_label],
        "lrlr",
        [[escape(row.name), _num(row.value), _row_ci(row), _num(row.n)] for row in rows],
    )


def _agreement_tables(report: dict[str, Any]) -> list[LatexTable]:
    tables = []
    if report["agreement"] and report["agreement"].get("consensus"):
        tables.append(_estimates("agreement", "Agreement on all labels", agreement_rows(report["agreement"])))
        binary = agreement_rows(report.get("binary"))
        if binary:
            categories = " vs ".join(str(c) for c in report["binary"].get("categories", []))
            tables.append(_estimates("binary", f"Agreement on the binary collapse ({escape(categories)})", binary))
        pairs = pair_rows(report["agreement"])
        if pairs:
            tables.append(_estimates("pairs", "Pairwise Cohen's kappa", pairs, "Shared items"))
        ceiling = ceiling_rows(report.get("human_ceiling"))
        if ceiling:
            tables.append(
                LatexTable(
                    "ceiling",
                    "Each annotator against the majority of the others",
                    ["Annotator", "Items", "Accuracy", "Cohen's $\\kappa$"],
                    "lrrr",
                    [
                        [
                            escape(row["annotator"]),
                            _num(row["n_items"]),
                            _num(row["accuracy"].value),
                            _num(row["kappa"].value),
                        ]
                        for row in ceiling
                    ],
                )
            )
        domains = domain_rows(report.get("by_domain"))
        if domains:
            tables.append(
                LatexTable(
                    "domains",
                    "Agreement per domain",
                    [
                        "Domain",
                        "Items",
                        "Labels",
                        "Fleiss' $\\kappa$",
                        "95\\% CI",
                        "Krippendorff's $\\alpha$",
                        "95\\% CI",
                    ],
                    "lrrrlrl",
                    [
                        [
                            escape(row["domain"] or "(none)"),
                            _num(row["n_items"]),
                            _num(row["n_annotations"]),
                            _num(row["fleiss_kappa"].value),
                            _row_ci(row["fleiss_kappa"]),
                            _num(row["krippendorff_alpha"].value),
                            _row_ci(row["krippendorff_alpha"]),
                        ]
                        for row in domains
                    ],
                )
            )
    return tables


def _preference_tables(report: dict[str, Any]) -> list[LatexTable]:
    pref = report.get("preference")
    if not pref or pref.get("available") is False:
        return []
    keys = ("wins", "wins_strong", "wins_slight", "ties", "losses", "losses_strong", "losses_slight")
    counts = LatexTable(
        "preference",
        "Preferences per system",
        ["System", "Wins", "strong", "slight", "Ties", "Losses", "strong", "slight"],
        "lrrrrrrr",
        [[escape(row["system"]), *(_num(row[key]) for key in keys)] for row in preference_rows(pref["counts"])],
    )
    first = escape(report["systems"][0]) if report.get("systems") else "A"
    tests = [
        (f"{first} preferred, per judgement", pref["sign_test"]),
        (f"{first} preferred, per item (majority)", pref["sign_test_items"]),
        ("List 1 wins (position bias)", pref["position_bias"]),
    ]
    signs = LatexTable(
        "sign_tests",
        "Sign tests and position bias",
        ["Test", "Share", "95\\% CI", "$n$", "$p$"],
        "lrlrr",
        [
            [name, _num(t.get("value")), _estimate_ci(t), _num(t.get("n_items")), _p(t.get("p_value"))]
            for name, t in tests
        ],
    )
    return [counts, signs]


def _k_note(veriscore: dict[str, Any]) -> str:
    """Where K came from, in the caption: one K for every source's table (reporting.scores.shared_k)."""
    source = veriscore.get("k_from")
    return f"; $K$ from {escape(source)}, the same for every source" if source else ""


def _score_tables(report: dict[str, Any]) -> list[LatexTable]:
    scores = report.get("scores")
    if not scores or scores.get("available") is False:
        return []
    tables = []
    for source, title in (("human", "from the human majority"), ("gold", "from gold labels")):
        block = scores[source]
        if block.get("available") is False:
            continue
        tables.append(
            LatexTable(
                f"factscore_{source}",
                f"FActScore {title}",
                ["System", "FActScore", "95\\% CI", "Responses", "Supported", "Not supported"],
                "lrlrrr",
                [
                    [
                        escape(row["system"]),
                        _num(row["estimate"].value),
                        _row_ci(row["estimate"]),
                        _num(row["n_responses"]),
                        _num(row["supported"]),
                        _num(row["not_supported"]),
                    ]
                    for row in score_rows(block["factscore"], "factscore")
                ],
            )
        )
        tables.append(
            LatexTable(
                f"veriscore_{source}",
                f"VeriScore F1@K {title}" + _k_note(block["veriscore"]),
                ["Domain", "$K$", "System", "F1@K", "95\\% CI", "Precision", "Recall"],
                "lrlrlrr",
                [
                    [
                        escape(row["domain"] or "(none)"),
                        _num(row["k"]),
                        escape(row["system"]),
                        _num(row["estimate"].value),
                        _row_ci(row["estimate"]),
                        _num(row.get("precision")),
                        _num(row.get("recall")),
                    ]
                    for row in veriscore_rows(block["veriscore"])
                ],
            )
        )
    cred = scores.get("credibility")
    if cred and cred.get("available") is not False:
        tables.append(
            LatexTable(
                "credibility",
                "Facts\\&Evidence credibility",
                ["System", "Credibility", "Support", "Not support", "Irrelevant"],
                "lrrrr",
                [
                    [
                        escape(row["system"]),
                        _num(row["value"]["value"]),
                        _num(row["value"].get("support")),
                        _num(row["value"].get("not_support")),
                        _num(row["value"].get("irrelevant")),
                    ]
                    for row in credibility_rows(cred)
                ],
            )
        )
    return tables


def _verifier_tables(report: dict[str, Any]) -> list[LatexTable]:
    verifiers = report.get("verifiers") or {}
    if not verifiers:
        return []

    def value(entry: Any) -> Any:
        return entry.get("value") if isinstance(entry, dict) else None

    return [
        LatexTable(
            "verifiers",
            "Automatic verifiers against the human majority",
            ["Verifier", "Items", "Accuracy", "Balanced acc.", "Cohen's $\\kappa$", "95\\% CI", "Macro-F1"],
            "lrrrrlr",
            [
                [
                    escape(name),
                    _num(row.get("n") or 0),
                    _num(value(row.get("accuracy"))),
                    _num(value(row.get("balanced_accuracy"))),
                    _num(value(row.get("cohen_kappa"))),
                    _estimate_ci(row.get("cohen_kappa")),
                    _num(value(row.get("macro_f1"))),
                ]
                for name, row in verifiers.items()
            ],
        )
    ]


def _annotator_tables(report: dict[str, Any]) -> list[LatexTable]:
    quality = report.get("annotator_quality") or {}
    annotators = quality.get("annotators") or {}
    if not annotators:
        return []
    rule = escape(quality.get("reference_rule", ""))
    return [
        LatexTable(
            "annotators",
            f"Each annotator against the reference ({rule}), the majority of the others and gold",
            ["Annotator", "Items", "$\\kappa$ ref.", "95\\% CI", "$\\kappa$ others", "Gold acc.", "DS acc.", "Flag"],
            "lrrlrrrl",
            [
                [
                    escape(who),
                    _num(entry["kappa_reference"]["n_items"]),
                    _num(entry["kappa_reference"]["value"]),
                    _estimate_ci(entry["kappa_reference"]),
                    _num(entry["kappa_others"]["value"]),
                    _num(entry["gold_accuracy"]["value"]),
                    _num(entry.get("dawid_skene_accuracy")),
                    "flagged" if entry["flagged"] else "",
                ]
                for who, entry in annotators.items()
            ],
        )
    ]


def _question_tables(report: dict[str, Any]) -> list[LatexTable]:
    """Agreement on each extra question, and the per-claim shares (issue 32)."""
    blocks = question_blocks(report.get("questions"))
    rows = [
        [escape(block["key"]), escape(row.name), _num(row.value), _row_ci(row), _num(row.n)]
        for block in blocks
        for row in block["agreement_rows"]
    ]
    tables = []
    if rows:
        tables.append(
            LatexTable(
                "questions",
                "Agreement on the extra questions",
                ["Question", "Statistic", "Value", "95\\% CI", "Units"],
                "llrlr",
                rows,
            )
        )
    claims = [
        [
            escape(block["key"]),
            escape(entry["row"].name),
            _num(entry["row"].value),
            _row_ci(entry["row"]),
            f"{_num(entry['k'])}/{_num(entry['n'])}" if entry["n"] is not None else DASH,
        ]
        for block in blocks
        for entry in block["per_claim_rows"]
    ]
    if claims:
        tables.append(
            LatexTable(
                "questions_per_claim",
                "Share of claims judged positive, per system",
                ["Question", "System", "Share", "95\\% CI", "$k/n$"],
                "llrlr",
                claims,
            )
        )
    return tables


def _condition_tables(report: dict[str, Any]) -> list[LatexTable]:
    """The conditions compared (issue 32): each measure per condition and each difference from the baseline."""
    rows = [
        [
            escape(entry["measure"]),
            escape(entry["what"]),
            _num(entry["row"].value),
            _row_ci(entry["row"]),
            f"{_num(entry['k'])}/{_num(entry['n'])}" if entry["n"] is not None else DASH,
            _num(entry["p"]) if entry["p"] is not None else "",
        ]
        for entry in condition_rows(report.get("conditions"))
    ]
    if not rows:
        return []
    return [
        LatexTable(
            "conditions",
            "Conditions compared",
            ["Measure", "Condition", "Value", "95\\% CI", "$k/n$", "$p$"],
            "llrlrr",
            rows,
        )
    ]


def _ppi_tables(report: dict[str, Any]) -> list[LatexTable]:
    """Prediction-powered estimates (issue 33): PPI++ beside the human-only and verifier-only ones, for the share
    supported, FActScore and F1@K; n and N count claims, or responses for F1@K."""
    rows = [
        [
            escape(row["verifier"]),
            escape(row["group"]),
            _num(row["ppi"]),
            _pair_ci(row["ppi_ci"], row["n"]),
            _num(row["classical"]),
            _pair_ci(row["classical_ci"], row["n"]),
            _num(row["verifier_only"]),
            f"{_num(row['n'])}/{_num(row['N'])}" + (" resp." if row["unit"] == "responses" else ""),
        ]
        for row in ppi_rows(report.get("ppi"))
    ]
    if not rows:
        return []
    return [
        LatexTable(
            "ppi",
            "Factuality estimated by prediction-powered inference (PPI++), beside the human-only and verifier-only "
            "estimates: share of claims supported, FActScore and F1@K ($n/N$: labelled / unlabelled claims; "
            "responses for F1@K)",
            ["Verifier", "Estimate", "PPI++", "95\\% CI", "Human only", "95\\% CI", "Verifier only", "$n/N$"],
            "llrlrlrr",
            rows,
        )
    ]


def _comparison_tables(report: dict[str, Any]) -> list[LatexTable]:
    """Verifier pairs (issue 33): paired differences with bootstrap intervals, exact McNemar, Holm."""
    rows = [
        [
            escape(entry["pair"]) if entry["first"] else "",
            escape(entry["measure"]),
            _num(entry["row"].value),
            _row_ci(entry["row"]),
            _num(entry["n"]),
            f"{_num(entry['b'])}/{_num(entry['c'])}" if entry["first"] else "",
            _p(entry["p_holm"]) if entry["first"] else "",
        ]
        for entry in comparison_rows(report.get("verifier_comparisons"))
    ]
    if not rows:
        return []
    return [
        LatexTable(
            "verifier_comparisons",
            "Verifiers compared on the same claims: paired differences (A $-$ B) and exact McNemar tests, "
            "Holm-corrected",
            ["Pair", "Measure", "Difference", "95\\% CI", "Claims", "$b/c$", "Holm $p$"],
            "llrlrrr",
            rows,
        )
    ]


_BUILDERS: tuple[Callable[[dict[str, Any]], list[LatexTable]], ...] = (
    _agreement_tables,
    _preference_tables,
    _score_tables,
    _ppi_tables,
    _verifier_tables,
    _comparison_tables,
    _annotator_tables,
    _question_tables,
    _condition_tables,
)
#: Every table name a report may have, in document order (the per-table download route accepts these).
TABLE_NAMES = (
    "agreement",
    "binary",
    "pairs",
    "ceiling",
    "domains",
    "preference",
    "sign_tests",
    "factscore_human",
    "veriscore_human",
    "factscore_gold",
    "veriscore_gold",
    "credibility",
    "ppi",
    "verifiers",
    "verifier_comparisons",
    "annotators",
    "questions",
    "questions_per_claim",
    "conditions",
)


def report_tables(report: dict[str, Any]) -> dict[str, LatexTable]:
    """The report's tables that have something to show, by name, in document order."""
    return {table.name: table for builder in _BUILDERS for table in builder(report)}


def table_tex(table: LatexTable, *, label_prefix: str = "") -> str:
    """One ``table`` float with a booktabs ``tabular`` (needs ``\\usepackage{booktabs}``)."""
    lines = [
        "\\begin{table}[ht]",
        "\\centering",
        f"\\caption{{{table.caption}}}",
        f"\\label{{tab:{escape(label_prefix)}{table.name.replace('_', '-')}}}",
        f"\\begin{{tabular}}{{{table.align}}}",
        "\\toprule",
        " & ".join(table.head) + " \\\\",
        "\\midrule",
        *(" & ".join(row) + " \\\\" for row in table.rows),
        "\\bottomrule",
        "\\end{tabular}",
    ]
    if table.small_n:
        lines.append(f"\\par\\smallskip\\footnotesize {DAGGER} interval on fewer than {SMALL_N} items: unreliable.")
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


def report_tex(report: dict[str, Any]) -> str:
    """A complete LaTeX document holding every table of the report (compiles with pdflatex)."""
    prefix = f"{report['study']}-"
    body = "\n".join(table_tex(table, label_prefix=prefix) for table in report_tables(report).values())
    title = escape(f"{report['name']} ({report['study']})")
    return (
        "\\documentclass{article}\n"
        "\\usepackage[T1]{fontenc}\n"
        "\\usepackage[utf8]{inputenc}\n"
        "\\usepackage{booktabs}\n"
        "\\begin{document}\n"
        f"\\section*{{Report: {title}}}\n"
        f"% {report['n_items']} items, {report['n_annotations']} labels, {report['n_annotators']} annotators.\n"
        f"{body or 'No table has anything to show yet.'}\n"
        "\\end{document}\n"
    )
