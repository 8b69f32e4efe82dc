"""The report's account of an adaptive-overlap study (issue 33): the rule, the items it closed early and
the labels that saved (annotation/workbench/adaptive.py opens and closes the items)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Sum

from annotation.models import Item, Study

from .agreement import VARIABLE_N_RULE

__all__ = ["adaptive_overlap_section"]


def adaptive_overlap_section(study: Study) -> dict[str, Any] | None:
    """None for a study with a fixed N; else the rule, items closed below N and the labels not asked for."""
    if not study.is_adaptive:
        return None
    n = study.annotators_per_item
    closed = Item.objects.filter(study=study, closed_after__isnull=False).aggregate(
        items=Count("pk"), labels=Sum("closed_after")
    )
    items_closed = int(closed["items"] or 0)
    return {
        "n_min": study.adaptive_min_n,
        "n_max": n,
        "agreement_needed": study.adaptive_agreement,
        "rule": (
            f"every item gets {study.adaptive_min_n} annotators, and another, up to {n}, only while fewer than "
            f"{study.adaptive_agreement} of its answers agree"
            + (" (in direction: which list won, or a tie)" if study.is_preference else "")
        ),
        "n_items_closed_early": items_closed,
        "labels_saved": items_closed * n - int(closed["labels"] or 0),
        "variable_n": VARIABLE_N_RULE.format(n_min=study.adaptive_min_n, n=n, k=study.adaptive_agreement),
    }
