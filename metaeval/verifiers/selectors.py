"""Reads of the verifier tables: scoped to one study, one query per table, never a query per item."""

from __future__ import annotations

from typing import Any

import pandas as pd
from django.db.models import Count, Q, QuerySet

from annotation.models import Item, Study

from ..models import ACTIVE_RUN_STATUSES, Prediction, Verifier, VerifierRun
from .presets import PRESETS
from .runner.spec import LabelMapper

__all__ = [
    "PREDICTION_COLUMNS",
    "current_predictions",
    "fitting_presets",
    "recent_runs",
    "run_status",
    "study_verifiers",
]

PREDICTION_COLUMNS = [
    "verifier_id",
    "item",
    "label",
    "raw_label",
    "score",
    "rationale",
    "parse_status",
    "error",
    "tokens_in",
    "tokens_out",
    "response_id",
    "system",
    "pk",
]


def study_verifiers(study: Study) -> QuerySet[Verifier]:
    """The study's verifiers with their prediction counts, by name."""
    return (
        Verifier.objects.filter(study=study)
        .annotate(
            n_predictions=Count("predictions"),
            n_active_runs=Count("runs", filter=Q(runs__status__in=ACTIVE_RUN_STATUSES), distinct=True),
        )
        .order_by("name")
    )


#: The baselines a study can have, by kind (the names services.verifiers.BASELINE_NAMES gives new ones).
BASELINE_KINDS = (Verifier.Kind.BASELINE_MAJORITY, Verifier.Kind.BASELINE_OVERLAP)


def missing_baselines(study: Study) -> list[str]:
    """Labels of the baseline kinds the study does not have yet (the page offers to add only those)."""
    present = set(Verifier.objects.filter(study=study, kind__in=BASELINE_KINDS).values_list("kind", flat=True))
    return [str(Verifier.Kind(kind).label) for kind in BASELINE_KINDS if kind not in present]


def recent_runs(study: Study, limit: int = 20) -> QuerySet[VerifierRun]:
    """The study's latest runs, newest first, with their verifiers."""
    return (
        VerifierRun.objects.filter(verifier__study=study)
        .select_related("verifier")
        .order_by("-created_at", "-pk")[:limit]
    )


def run_status(run: VerifierRun) -> dict[str, Any]:
    """What a progress bar needs: counts, status, timings (the JSON the page's poller reads)."""
    return {
        "id": run.pk,
        "verifier": run.verifier.name,
        "verifier_id": run.verifier_id,
        "status": run.status,
        "active": run.is_active,
        "total": run.total,
        "done": run.done,
        "errors": run.errors,
        "unparseable": run.unparseable,
        "cached": run.cached,
        "tokens_in": run.tokens_in,
        "tokens_out": run.tokens_out,
        "estimated_cost": None if run.estimated_cost is None else float(run.estimated_cost),
        "limit": run.limit,
        "concurrency": run.effective_concurrency,
        "error_message": run.error_message,
        "heartbeat_at": run.heartbeat_at.isoformat() if run.heartbeat_at else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "created_at": run.created_at.isoformat() if run.created_at else None,
    }


def current_predictions(study: Study) -> pd.DataFrame:
    """Per (verifier, item) the latest prediction: a verifier edited since (new cache keys) is read as it is now."""
    rows = (
        Prediction.objects.filter(verifier__study=study)
        .order_by("verifier_id", "item_id", "-pk")
        .values_list(
            "verifier_id",
            "item__external_id",
            "label",
            "raw_label",
            "score",
            "rationale",
            "parse_status",
            "error",
            "tokens_in",
            "tokens_out",
            "item__response_id",
            "item__system",
            "pk",
        )
    )
    frame = pd.DataFrame.from_records(list(rows), columns=PREDICTION_COLUMNS)
    return frame.drop_duplicates(subset=["verifier_id", "item"], keep="first").reset_index(drop=True)


def verifier_verdicts(study: Study) -> dict[str, pd.Series]:
    """Per verifier with predictions (by name), its current label by item id; None where it has none
    readable. What the report's factuality scores from verifiers count. One query."""
    rows = (
        Prediction.objects.filter(verifier__study=study)
        .order_by("verifier__name", "item_id", "-pk")
        .values_list("verifier__name", "item__external_id", "label")
    )
    frame = pd.DataFrame.from_records(list(rows), columns=["verifier", "item", "label"])
    frame = frame.drop_duplicates(subset=["verifier", "item"], keep="first")
    return {str(name): group.set_index("item")["label"] for name, group in frame.groupby("verifier", sort=True)}


def fitting_presets(study: Study) -> list[str]:
    """Presets whose verdicts map onto the study's labels without a label map (a form's sensible first choice)."""
    mapper = LabelMapper(study.labels, study.label_aliases, {})
    return [
        preset_id
        for preset_id, preset in PRESETS.items()
        if preset_id != "custom"
        and preset.pairwise == study.is_preference
        and not mapper.unmapped(preset.prediction_labels)
    ]


def item_systems(study: Study) -> pd.DataFrame:
    """Every item with its response and system (for system-level scores)."""
    rows = Item.objects.filter(study=study).values_list("external_id", "response_id", "system")
    return pd.DataFrame.from_records(list(rows), columns=["item", "response_id", "system"])
