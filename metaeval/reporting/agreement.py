"""The agreement sections: all labels, their binary collapse, and per domain.

Which categories and which collapse a study uses is decided here, from the
study's declared labels, so that every face reports the same thing:
verification studies use their labels and ``binary_map``; preference studies
use the 5-point ordinal scale (``both_bad`` is not on it and is left out and
counted) and collapse to the preferred system, ties excluded (docs/architecture.md, Label vocabularies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from annotation.models import Study
from annotation.vocab import preference_parts
from metaeval import stats
from metaeval.label_rows import LabelRows

from .options import ReportOptions

__all__ = [
    "AgreementInputs",
    "categories_for",
    "binary_collapse",
    "agreement_table",
    "agreement_sections",
    "unavailable",
]


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


def left_out_causes(given: pd.Series, table: stats.RatingTable, n_raters: int, dropped: list[str]) -> dict[str, Any]:
    """Why Fleiss' kappa left items out of ``table``: counted per cause, so a note can say why.

    ``given`` is the number of labels each item received; ``dropped`` names the
    labels that did not reach the table (e.g. ``tie`` in a binary collapse,
    ``both_bad`` off the 5-point scale). An item is left out when it does not
    carry exactly ``n_raters`` ratings on the table: because it never received
    that many (``fewer_given``), because some of its labels were dropped
    (``lost_dropped``), or because it holds more (``more_given``).
    """
    kept = pd.Series(table.ratings_per_item, index=table.item_index)
    received = _aligned_counts(given, table.item_index)
    left = kept.to_numpy() != n_raters
    return {
        "fewer_given": int((left & (received < n_raters)).sum()),
        "lost_dropped": int((left & (received >= n_raters) & (kept.to_numpy() < n_raters)).sum()),
        "more_given": int((left & (kept.to_numpy() > n_raters)).sum()),
        "dropped_labels": dropped,
    }


def _aligned_counts(given: pd.Series, items: pd.Index) -> np.ndarray:
    """``given`` on ``items`` (0 where it has none). Why not always ``reindex``: hashing 100,000 item ids took 0.13 s
    of a big report's agreement sections, where ``given`` is usually on these very items already (the table's own
    counts; a domain's share of them, ``AgreementInputs.domain_summary``)."""
    if given.index is items or given.index.equals(items):
        return given.to_numpy()
    return given.reindex(items).fillna(0).to_numpy()


def _summaries(
    table: stats.RatingTable,
    study: Study,
    options: ReportOptions,
    *,
    binary: bool,
    given: pd.Series,
    off_scale: list[str],
    on_summary: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The agreement on ``table`` and (``binary``) on its binary collapse, or why there is none.

    Both come from one bootstrap when the collapse keeps every item (``_shared_bootstrap``).
    ``on_summary`` is handed the agreement on ``table`` before the collapse's is assembled.
    """
    collapsed = _collapsed(table, study, off_scale) if binary else None
    own, theirs = _shared_bootstrap(table, collapsed, study, options)
    out = _agreement(table, study, options, given=given, dropped=off_scale, distributions=own)
    if on_summary is not None:
        on_summary(out)
    if not binary:
        return out, None
    if collapsed is None:
        return out, unavailable(NO_BINARY_COLLAPSE)
    summary = _agreement(
        collapsed.table, study, options, given=given, dropped=collapsed.dropped, distributions=theirs, ordinal=False
    )
    summary["collapse"] = collapsed.mapping
    return out, summary


def _summary(table: stats.RatingTable, study: Study, options: ReportOptions, **given: Any) -> dict[str, Any]:
    """``_summaries`` as one section, the binary collapse's under ``binary`` (as each domain shows them)."""
    out, collapsed = _summaries(table, study, options, **given)
    if collapsed is not None:
        out["binary"] = collapsed
    return out


def _summary_options(study: Study, options: ReportOptions) -> dict[str, Any]:
    return {
        "ordinal": study.is_preference,
        "n_resamples": options.n_resamples,
        "ci": options.n_resamples > 0,
        "confidence": options.confidence,
        "seed": options.seed,
        "n_raters": study.slots_per_item,
    }


def _agreement(
    table: stats.RatingTable,
    study: Study,
    options: ReportOptions,
    *,
    given: pd.Series,
    dropped: list[str],
    distributions: dict[str, Any] | None,
    ordinal: bool | None = None,
) -> dict[str, Any]:
    """``agreement_summary`` of ``table`` (from ``distributions`` when drawn already), with why Fleiss left items out."""
    settings = _summary_options(study, options)
    if ordinal is not None:
        settings["ordinal"] = ordinal
    out = stats.agreement_summary(table, **settings, distributions=distributions)
    out["fleiss_kappa"]["left_out_causes"] = left_out_causes(given, table, study.slots_per_item, dropped)
    if study.is_adaptive:
        out["fleiss_kappa"] = {
            **stats.Estimate.undefined(ADAPTIVE_FLEISS, 0, n_raters=study.slots_per_item).to_dict(),
            "n_items_left_out": out["n_items"],
            "left_out_causes": out["fleiss_kappa"]["left_out_causes"],
        }
        out["variable_n"] = VARIABLE_N_RULE.format(
            n_min=study.adaptive_min_n, n=study.annotators_per_item, k=study.adaptive_agreement
        )
    return out


#: Why Fleiss' fixed-N kappa is not given for an adaptive-overlap study (issue 33).
ADAPTIVE_FLEISS = (
    "not given with adaptive overlap: it needs the same number of labels on every item, and only the items "
    "whose first answers disagreed get all N, so it would measure agreement on those alone"
)

#: How the agreement of an adaptive-overlap study treats its items' varying numbers of labels.
VARIABLE_N_RULE = (
    "adaptive overlap: items have {n_min} to {n} labels (more only while fewer than {k} answers agreed). "
    "Krippendorff's alpha, the generalised Fleiss kappa (Conger / Fleiss with varying raters), percent "
    "agreement, AC1 and the pairwise Cohen kappas use every item with two or more labels; Fleiss' fixed-N "
    "kappa is not given. Items that got more labels are the ones whose first answers disagreed, so these "
    "statistics are not those of a study with N labels on every item: compare them with a fixed-N pilot, not "
    "with published fixed-N values"
)


NO_BINARY_COLLAPSE = "the study declares no binary collapse of its labels"


@dataclass(frozen=True)
class _Collapsed:
    """A table's binary collapse (``binary_collapse``): the collapsed table, the mapping, the labels it drops."""

    table: stats.RatingTable
    mapping: dict[str, str | None]
    dropped: list[str]


def _collapsed(table: stats.RatingTable, study: Study, off_scale: list[str]) -> _Collapsed | None:
    collapse = binary_collapse(study)
    if collapse is None:
        return None
    mapping, cats = collapse
    dropped = off_scale + [label for label, target in mapping.items() if target is None]
    return _Collapsed(table.collapse(mapping, cats), mapping, dropped)


def _shared_bootstrap(
    table: stats.RatingTable, collapsed: _Collapsed | None, study: Study, options: ReportOptions
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Bootstrap distributions of the table and its collapse drawn once, or (None, None): each draws its own.

    Drawn once only when the collapse keeps every item: a collapse that drops items (a
    preference study's all-tie items) resamples fewer items, as its own bootstrap does.
    """
    if options.n_resamples <= 0 or collapsed is None or not collapsed.table.item_index.equals(table.item_index):
        return None, None
    n_raters = study.slots_per_item
    requests = [
        stats.BootstrapRequest(table, stats.summary_statistics(ordinal=study.is_preference), n_raters),
        stats.BootstrapRequest(collapsed.table, stats.summary_statistics(), n_raters),
    ]
    own, theirs = stats.bootstrap_distributions(requests, n_resamples=options.n_resamples, seed=options.seed)
    return own, theirs


@dataclass(frozen=True)
class _Agreed:
    """What the agreement sections read of the labels: their table, the labels left off it, the labels per item."""

    table: stats.RatingTable
    n_off_scale: int
    off_scale: list[str]  # the labels left off, by name
    given: pd.Series  # how many labels each item received, on the scale or not, by item
    domains: Callable[[], np.ndarray]  # each of the table's items' domain

    @classmethod
    def of(cls, labels: pd.DataFrame | LabelRows, study: Study) -> _Agreed:
        cats = categories_for(study)
        if isinstance(labels, LabelRows):
            table, n_off_scale, off_scale = labels.rating_table(cats)
            given = labels.labels_per_item() if n_off_scale else None
            domains = partial(labels.domains_of, table.item_index)
        else:
            table, n_off_scale = agreement_table(labels, study)
            off_scale = sorted({str(label) for label in labels["label"].unique() if label not in cats})
            given = labels.groupby("item").size() if n_off_scale else None
            domains = partial(_domains_in_frame, labels, table.item_index)
        if given is None:
            # with every label on the scale, the table's own counts (one label per item and annotator):
            # grouping 300,000 item ids again cost 0.12 s of a big report's first sections
            given = pd.Series(table.ratings_per_item, index=table.item_index)
        return cls(table, n_off_scale, off_scale, given, domains)


def _domains_in_frame(frame: pd.DataFrame, items: pd.Index) -> np.ndarray:
    return frame.drop_duplicates("item").set_index("item")["domain"].reindex(items).to_numpy()


def agreement_sections(
    labels: pd.DataFrame | LabelRows,
    study: Study,
    options: ReportOptions,
    *,
    on_overall: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """``agreement``, ``binary`` and ``by_domain`` (the latter two when asked for), and ``human_ceiling``.

    ``labels`` is ``label_frame``'s frame, or its rows as codes (``LabelRows``: the report's
    first sections then never lay out the labels' strings). Fleiss' kappa uses the items that
    carry all ``annotators_per_item`` ratings and says how many were left out; the generalised
    kappa and alpha use every item with two or more. The human ceiling scores each
    annotator against the majority of the others: the bar a verifier is
    later held to, and the annotator a low kappa may come from.

    ``on_overall`` is handed the sections as soon as the agreement on all labels and the
    human ceiling are computed (``binary`` and ``by_domain`` still None). The binary collapse
    shares the bootstrap of the labels it collapses; each domain costs another (on fewer items).
    """
    return AgreementInputs.of(labels, study, options).sections(on_overall)


@dataclass(frozen=True)
class AgreementInputs:
    """What the agreement sections are computed from, read off the labels. The per-domain sections read nothing
    else (no database, no shared frame): a report's build computes them alongside (``reporting.alongside``: in a
    forked process of their own, or on a thread) while it computes its later sections."""

    agreed: _Agreed
    study: Study
    options: ReportOptions
    domains: np.ndarray | None  # each of the table's items' domain (``by_domain`` only)

    @classmethod
    def of(cls, labels: pd.DataFrame | LabelRows, study: Study, options: ReportOptions) -> AgreementInputs:
        agreed = _Agreed.of(labels, study)
        return cls(agreed, study, options, agreed.domains() if options.by_domain else None)

    def sections(self, on_overall: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """``agreement_sections``' result; ``on_overall`` as there."""
        out = self.overall(on_overall)
        out["by_domain"] = self.by_domain()
        return out

    def overall(self, on_overall: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """The sections but ``by_domain`` (None here): the agreement on all labels, its binary collapse (when asked
        for) and the human ceiling; ``on_overall`` as in ``agreement_sections``."""
        agreed, study, options = self.agreed, self.study, self.options
        table = agreed.table
        out: dict[str, Any] = {"agreement": None, "binary": None, "by_domain": None, "human_ceiling": None}

        def overall(full: dict[str, Any]) -> None:
            full["n_labels_off_scale"] = agreed.n_off_scale
            out["agreement"] = full
            out["human_ceiling"] = stats.json_ready(stats.human_ceiling(table))
            if on_overall is not None:
                on_overall(dict(out))

        _, out["binary"] = _summaries(
            table,
            study,
            options,
            binary=options.binary,
            given=agreed.given,
            off_scale=agreed.off_scale,
            on_summary=overall,
        )
        return out

    @property
    def n_items(self) -> int:
        """How many items the agreement is computed on (what its bootstraps resample)."""
        return self.agreed.table.n_items

    def domain_names(self) -> list[Any]:
        """The domains of the ``by_domain`` section, in its order (none unless asked for)."""
        return [] if self.domains is None else sorted(set(self.domains.tolist()))

    def domain_summary(self, domain: Any) -> dict[str, Any]:
        """One domain's entry of the ``by_domain`` section: its agreement, from a bootstrap of its own."""
        if self.domains is None:
            raise ValueError("the agreement per domain was not asked for")
        agreed, options = self.agreed, self.options
        in_domain = self.domains == domain
        table = agreed.table.select_items(in_domain)
        given = agreed.given[in_domain] if agreed.given.index is agreed.table.item_index else agreed.given
        return _summary(table, self.study, options, binary=options.binary, given=given, off_scale=agreed.off_scale)

    def by_domain(self) -> dict[str, Any] | None:
        """The ``by_domain`` section (None unless asked for): each domain's agreement, from a bootstrap of its own."""
        if self.domains is None:
            return None
        return {str(domain): self.domain_summary(domain) for domain in self.domain_names()}
