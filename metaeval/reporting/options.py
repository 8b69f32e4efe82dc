"""What a report is asked to contain; one object shared by page, CLI and API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..reference import unavailable_rule_reason

__all__ = ["InvalidOption", "ReportOptions", "options_from_query"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


class InvalidOption(ValueError):
    """A report option in a query that is not one of the values it takes."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class ReportOptions:
    """``by_domain`` / ``binary`` add those sections (the CLI's flags).

    ``source_types`` keeps only those evidence source types in credibility
    (None = all); ``exclude_source_types`` drops some. ``k`` fixes VeriScore's
    K (None: the median number of countable claims per response, per domain),
    e.g. to compare with a file's own F1@K. ``reference`` names the rule
    that gives each item one reference label for the per-annotator quality
    and the verifiers' agreement (reference.py: gold, majority, dawid_skene;
    adjudicated rules once adjudication exists). Bootstrap settings are fixed by
    default so that the same data always gives the same intervals.
    """

    by_domain: bool = False
    binary: bool = False
    n_resamples: int = 1000
    confidence: float = 0.95
    seed: int = 0
    source_types: tuple[str, ...] | None = None
    exclude_source_types: tuple[str, ...] = ()
    k: int | None = None
    reference: str | None = None  # None: the study's own rule (Study.reference_rule)
    include_screened_out: bool = False  # crowd studies: count screened-out participants' labels too
    ppi_labelled_share: float | None = None  # PPI: treat only this seeded random share of labelled claims as labelled

    def __post_init__(self) -> None:
        reason = unavailable_rule_reason(self.reference) if self.reference is not None else None
        if reason:
            raise ValueError(reason)
        if self.k is not None and not 1 <= self.k <= 100_000:
            raise ValueError("k must be between 1 and 100,000")
        if not 0 <= self.n_resamples <= 100_000:
            raise ValueError("n_resamples must be between 0 and 100,000")
        if not 0 < self.confidence < 1:
            raise ValueError("confidence must be between 0 and 1")
        if self.ppi_labelled_share is not None and not 0 < self.ppi_labelled_share <= 1:
            raise ValueError("ppi_labelled_share must be above 0 and at most 1")

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["source_types"] = list(self.source_types) if self.source_types is not None else None
        out["exclude_source_types"] = list(self.exclude_source_types)
        return out


def _split(values: list[str]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def options_from_query(
    query: Mapping[str, Any], *, by_domain: bool | None = None, binary: bool | None = None
) -> ReportOptions:
    """Options from a GET query (``by_domain``, ``binary``, ``source_type``, ``exclude_source_type``, ``k``,
    ``reference``, ``include_screened_out``, ``ppi_labelled_share``).

    ``source_type`` and ``exclude_source_type`` may repeat or hold commas.
    ``by_domain`` / ``binary`` arguments override the query (the page always
    shows both).
    """

    def flag(name: str) -> bool:
        value = str(query.get(name, "")).strip().lower()
        if value not in _TRUE | _FALSE:
            raise InvalidOption(name, f"{name} must be true or false, got {query.get(name)!r}")
        return value in _TRUE

    def many(name: str) -> list[str]:
        getlist = getattr(query, "getlist", None)
        return list(getlist(name)) if getlist else ([query[name]] if name in query else [])

    included = _split(many("source_type"))
    raw_k = str(query.get("k", "")).strip()
    if raw_k and not (raw_k.isdigit() and 1 <= int(raw_k) <= 100_000):
        raise InvalidOption("k", f"k must be a whole number from 1 to 100,000, got {query.get('k')!r}")
    raw_share = str(query.get("ppi_labelled_share", "")).strip()
    try:
        share = float(raw_share) if raw_share else None
    except ValueError:
        share = -1.0
    if share is not None and not 0 < share <= 1:
        raise InvalidOption(
            "ppi_labelled_share", f"ppi_labelled_share must be a number above 0 and at most 1, got {raw_share!r}"
        )
    reference = str(query.get("reference", "") or "").strip() or None
    reason = unavailable_rule_reason(reference) if reference is not None else None
    if reason:
        raise InvalidOption("reference", reason)
    return ReportOptions(
        reference=reference,
        k=int(raw_k) if raw_k else None,
        by_domain=flag("by_domain") if by_domain is None else by_domain,
        binary=flag("binary") if binary is None else binary,
        source_types=included or None,
        exclude_source_types=_split(many("exclude_source_type")),
        include_screened_out=flag("include_screened_out"),
        ppi_labelled_share=share,
    )


def page_options(query: Mapping[str, Any] | None = None) -> ReportOptions:
    """The report page's options: the query's, with the binary and per-domain sections always shown."""
    return options_from_query(query or {}, by_domain=True, binary=True)
