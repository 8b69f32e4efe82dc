"""The agreement sections: all labels, their binary collapse, and per domain.

Which categories and which collapse a study uses is decided here, from the
study's declared labels, so that every face reports the same thing:
verification studies use their labels and ``binary_map``; preference studies
use the 5-point ordinal scale (``both_bad`` is not on it and is left out and
counted) and collapse to the preferred system, ties excluded (docs/architecture.md, Label vocabularies).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from annotation.models import Study
from annotation.vocab import preference_parts
from metaeval import stats

from .options import ReportOptions

__all__ = ["categories_for", "binary_collapse", "agreement_table", "agreement_sections", "unavailable"]


def unavailable(reason: str) -> dict[str, Any]:
    """A section that cannot be computed, and why (never an empty or zero result)."""
    return {"available": False, "reason": reason}


def categories_for(study: Study) -> list[str]:
    """The ordered categories agreement is computed on."""
    if study.is_preference:
        return [label for label in study.labels if label in stats.PREFERENCE_LABELS]
    return list(study.labels)


def binary_collapse(study: Study) -> tuple[dict[str, str | None], list[str]] | None:
    """(label -> binary category or None, binary categories), or None without a collapse."""
    if study.is_preference:
        if len(study.systems) != 2:
            return None
        systems = list(study.systems)
        mapping = {label: _preferred_system(label, systems) for label in categories_for(study)}
        return mapping, systems
    if not study.binary_map:
        return None
    mapping = {label: study.binary_map.get(label) for label in categories_for(study)}
    return mapping, ["positive", "negative"]


def _preferred_system(label: str, systems: list[str]) -> str | None:
    index, _ = preference_parts(label)
    return None if index is None else systems[index]


def agreement_table(frame: pd.DataFrame, study: Study) -> tuple[stats.RatingTable, int]:
    """The rating table on the study's categories and the number of labels left off it."""
    cats = categories_for(study)
    on_scale = frame["label"].isin(cats).to_numpy()
    return stats.build_table(frame.loc[on_scale, ["item", "annotator", "label"]], cats), int((~on_scale).sum())


def _summary(table: stats.RatingTable, study: Study, options: ReportOptions, *, binary: bool) -> dict[str, Any]:
    collapse = binary_collapse(study) if binary else None
    kwargs: dict[str, Any] = {
        "ordinal": study.is_preference,
        "n_resamples": options.n_resamples,
        "ci": options.n_resamples > 0,
        "confidence": options.confidence,
        "seed": options.seed,
        "n_raters": study.annotators_per_item,
    }
    if collapse is None:
        out = stats.agreement_summary(table, **kwargs)
        if binary:
            out["binary"] = unavailable("the study declares no binary collapse of its labels")
        return out
    mapping, cats = collapse
    out = stats.agreement_summary(table, **kwargs)
    out["binary"] = stats.agreement_summary(table.collapse(mapping, cats), **{**kwargs, "ordinal": False})
    out["binary"]["collapse"] = mapping
    return out


def agreement_sections(frame: pd.DataFrame, study: Study, options: ReportOptions) -> dict[str, Any]:
    """``agreement``, ``binary`` and ``by_domain`` (the latter two when asked for), and ``human_ceiling``.

    Fleiss' kappa uses the items that carry all ``annotators_per_item``
    ratings and says how many were left out; the generalised kappa and
    alpha use every item with two or more. The human ceiling scores each
    annotator against the majority of the others: the bar a verifier is
    later held to, and the annotator a low kappa may come from.
    """
    table, off_scale = agreement_table(frame, study)
    full = _summary(table, study, options, binary=options.binary)
    binary = full.pop("binary", None)
    full["n_labels_off_scale"] = off_scale
    out: dict[str, Any] = {
        "agreement": full,
        "binary": binary if options.binary else None,
        "by_domain": None,
        "human_ceiling": stats.json_ready(stats.human_ceiling(table)),
    }
    if options.by_domain:
        domain_of = frame.drop_duplicates("item").set_index("item")["domain"]
        item_domains = domain_of.reindex(table.item_index).to_numpy()
        out["by_domain"] = {
            str(domain): _summary(table.select_items(item_domains == domain), study, options, binary=options.binary)
            for domain in sorted(set(item_domains.tolist()))
        }
    return out
