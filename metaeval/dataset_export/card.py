"""The dataset card (README.md): a YAML header the Hub reads, then what a reader needs to use the data.

The header declares the configs and their parquet files, each config's
features and split sizes, the licence, and under ``claimlab`` the label
vocabulary, the annotator count and the agreement figures of the study
report (``metaeval.reporting.agreement``, same numbers as the report).
YAML is written by hand (strings JSON-quoted, which YAML reads as they are)
so the card needs no YAML library.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa

from annotation.crowd.selectors import exclusion_rule
from annotation.models import Study
from metaeval.reference import RULE_DESCRIPTIONS
from metaeval.reporting.agreement import agreement_sections
from metaeval.reporting.build import gold_rule
from metaeval.reporting.options import ReportOptions
from metaeval.study_frame import StudyFrame

from .tables import Tables

__all__ = ["AGREEMENT_FIGURES", "agreement_figures", "dataset_card", "features", "to_yaml"]

AGREEMENT_FIGURES = (
    "fleiss_kappa",
    "fleiss_kappa_generalized",
    "krippendorff_alpha",
    "percent_agreement",
    "gwet_ac1",
    "mean_cohen_kappa",
)
UNKNOWN_LICENSE = "other"


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML of dicts, lists and scalars."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, Mapping | list | tuple) and item:
                lines.append(f"{pad}{key}:")
                lines.append(to_yaml(item, indent + 2))
            else:
                empty = "{}" if isinstance(item, Mapping) else "[]" if isinstance(item, list | tuple) else None
                lines.append(f"{pad}{key}: {empty or _scalar(item)}")
    elif isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, Mapping | list | tuple) and item:
                nested = to_yaml(item, indent + 2).lstrip()
                lines.append(f"{pad}- {nested}")
            else:
                lines.append(f"{pad}- {_scalar(item)}")
    else:
        lines.append(pad + _scalar(value))
    return "\n".join(lines)


def _dtype(arrow: pa.DataType) -> dict[str, Any]:
    if pa.types.is_list(arrow):
        return {"sequence": _dtype(arrow.value_type)["dtype"]}
    names = {pa.string(): "string", pa.int64(): "int64", pa.float64(): "float64", pa.bool_(): "bool"}
    return {"dtype": names.get(arrow, str(arrow))}


def features(schema: pa.Schema) -> list[dict[str, Any]]:
    """The Hub's ``dataset_info.features`` for an Arrow schema."""
    return [{"name": column.name, **_dtype(column.type)} for column in schema]


def agreement_figures(frame: StudyFrame, *, n_resamples: int = 1000) -> dict[str, Any]:
    """The report's agreement coefficients (value, 95% interval, items) on the labels its agreement counts
    (the study frame's ``agreed_rows``: gold items by the study's setting, check items and participants
    by its rules), so the card's numbers are the report's."""
    if not len(frame.agreed_rows):
        return {"reason": "no labels that agreement counts (" + gold_rule(frame.study) + ")"}
    summary = agreement_sections(frame.agreed_rows, frame.study, ReportOptions(n_resamples=n_resamples))["agreement"]
    out: dict[str, Any] = {}
    for name in AGREEMENT_FIGURES:
        estimate = summary.get(name)
        if estimate is None:
            continue
        if hasattr(estimate, "to_dict"):
            estimate = estimate.to_dict()
        out[name] = {
            "value": estimate.get("value"),
            "ci_95": list(estimate["ci"]) if estimate.get("ci") else None,
            "n_items": estimate.get("n_items"),
            **({"reason": estimate["reason"]} if estimate.get("reason") else {}),
        }
    return out


def _config(name: str, *, default: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"config_name": name, "data_files": [{"split": "train", "path": f"data/{name}/*.parquet"}]}
    if default:
        entry["default"] = True
    return entry


class ConfigTable(Protocol):
    """What the card reads of a config: a pa.Table, or a config streamed to its file (predictions.WrittenConfig)."""

    @property
    def schema(self) -> pa.Schema: ...

    @property
    def num_rows(self) -> int: ...


def _info(name: str, table: ConfigTable) -> dict[str, Any]:
    return {
        "config_name": name,
        "features": features(table.schema),
        "splits": [{"name": "train", "num_examples": table.num_rows}],
    }


def _figure_lines(figures: Mapping[str, Any]) -> list[str]:
    if "reason" in figures:
        return [f"Agreement: not available ({figures['reason']})."]
    lines = ["| coefficient | value | 95% interval | items |", "|---|---|---|---|"]
    for name, figure in figures.items():
        value = "undefined" if figure["value"] is None else f"{figure['value']:.3f}"
        interval = "" if not figure["ci_95"] else f"[{figure['ci_95'][0]:.3f}, {figure['ci_95'][1]:.3f}]"
        lines.append(f"| {name} | {value} | {interval} | {figure['n_items']} |")
    return lines


def dataset_card(
    study: Study,
    tables: Tables,
    configs: Sequence[tuple[str, ConfigTable]],
    *,
    license: str,
    figures: Mapping[str, Any],
) -> str:
    """README.md: YAML header, then description, configs, label vocabulary, agreement, caveats."""
    header: dict[str, Any] = {
        "license": license or UNKNOWN_LICENSE,
        "pretty_name": study.name,
        "configs": [_config(name, default=name == "annotations") for name, _ in configs],
        "dataset_info": [_info(name, table) for name, table in configs],
        "claimlab": {
            "study": study.slug,
            "kind": study.kind,
            "label_vocabulary": list(study.labels),
            "systems": list(study.systems),
            "annotators_per_item": study.slots_per_item,
            "n_annotators": tables.n_annotators,
            "n_items": tables.items.num_rows,
            "n_annotations": tables.annotations.num_rows,
            "reference_rule": tables.frame.rule,
            "reference_label": RULE_DESCRIPTIONS[tables.frame.rule],
            "gold_rule": gold_rule(study),
            "checks_rule": tables.frame.checks_rule(),
            "participants_rule": exclusion_rule(study),
            "agreement": dict(figures),
        },
    }
    if tables.pair_counts is not None:
        header["claimlab"]["preference_pairs_left_out"] = tables.pair_counts.as_dict()
    body = [
        "---",
        to_yaml(header),
        "---",
        "",
        f"# {study.name}",
        "",
        f"Exported from Claimlab study `{study.slug}` ({study.get_kind_display().lower()}): "
        f"{tables.items.num_rows} items, {tables.annotations.num_rows} annotations by "
        f"{tables.n_annotators} annotators (pseudonyms), {study.slots_per_item} per item.",
        "",
        "## Licence",
        "",
        (
            f"`{license}`, as stated by whoever exported the study."
            if license and license != UNKNOWN_LICENSE
            else "Unknown (`other`): the exporter stated no licence. Check the licences of the source texts "
            "and of the labels before sharing this dataset."
        ),
        "",
        "## Configs",
        "",
        "- `annotations` (default): one row per (item, annotator), the columns of Claimlab's CSV/JSONL "
        "export; `label` is the canonical label, `raw_label` what was given. The labels are those the "
        "study's report counts: crowd participants who withdrew or were screened out, skipped items and, "
        "unless the study counts them, labels that check items got as ordinary items are left out.",
        "- `items`: one row per item with its content, `annotators` and `labels` (same order), "
        f"`reference_label` by the study's reference rule `{tables.frame.rule}` "
        f"({RULE_DESCRIPTIONS[tables.frame.rule]}; null where it gives none), `reference_source` (which "
        "source gave it), `adjudicated_label` (null where nobody adjudicated the item or its adjudicators "
        "differ) and `is_check` (the item is an attention or qualification check).",
    ]
    if tables.pairs is not None and tables.pair_counts is not None:
        left_out = tables.pair_counts
        body += [
            "- `preference_pairs`: TRL-style `prompt` / `chosen` / `rejected` rows, one per item with a "
            f"preferred system by the study's reference rule `{tables.frame.rule}` applied to the judgements' "
            "directions (an adjudicator's choice where the rule reads adjudications; a majority direction is "
            "more than half preferring the same system, whatever the strength). `prompt` is the item's "
            "question and text, `chosen` the preferred system's claims "
            "one per line, `rejected` the other list. Left out: "
            f"{left_out.ties} ties, {left_out.both_bad} both bad, {left_out.no_majority} without a majority, "
            f"{left_out.unlabelled} unlabelled, {left_out.missing_list} with a missing list.",
        ]
    predictions = dict(configs).get("predictions")
    if predictions is not None:
        body += [
            f"- `predictions`: the study's automatic verifiers' predictions, {predictions.num_rows} rows, one per "
            "(verifier, item): the canonical `label` (null for a failed call or an unparseable answer), "
            "`raw_label`, `score`, `rationale`, `parse_status`, `error`, `latency_ms`, tokens, `order_labels` "
            "(pairwise judges: the verdict of each presentation order, JSON) and the model's `raw_output`. "
            "The columns of Claimlab's predictions export.",
        ]
    body += [
        "",
        "## Label vocabulary",
        "",
        ", ".join(f"`{label}`" for label in study.labels)
        + (
            f" (a = `{study.systems[0]}`, b = `{study.systems[1]}`)."
            if study.is_preference and len(study.systems) == 2
            else "."
        ),
        "",
        "## Agreement",
        "",
        f"From Claimlab's report of the study (the labels its agreement counts: {gold_rule(study)}"
        + (f"; {tables.frame.checks_rule()}" if tables.frame.checks_rule() else "")
        + "; 95% percentile bootstrap intervals over items, 1,000 resamples, seeded):",
        "",
        *_figure_lines(figures),
        "",
        "## Loading",
        "",
        "```python",
        "from datasets import load_dataset",
        'annotations = load_dataset("parquet", data_dir="data/annotations")["train"]',
        'items = load_dataset("parquet", data_dir="data/items")["train"]',
        *(['predictions = load_dataset("parquet", data_dir="data/predictions")["train"]'] if predictions else []),
        "```",
        "",
    ]
    return "\n".join(body)
