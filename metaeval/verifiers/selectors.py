"""Reads of the verifier tables: scoped to one study, one query per table, never a query per item."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import pandas as pd
from django.core.cache import cache
from django.db.models import Count, Q, QuerySet

from annotation.models import Item, Study

from ..models import ACTIVE_RUN_STATUSES, Prediction, Verifier, VerifierRun
from ..selectors import FrameRead, read_frames
from .prediction_version import PREDICTION_COUNTS_SECONDS, count_key
from .presets import PRESETS
from .runner.spec import LabelMapper

__all__ = [
    "PREDICTION_COLUMNS",
    "current_predictions",
    "rationales",
    "study_items",
    "verifier_verdicts",
    "fitting_presets",
    "prediction_counts",
    "recent_runs",
    "run_status",
    "study_verifiers",
]

PREDICTION_COLUMNS = [
    "verifier_id",
    "item",
    "label",
    "score",
    "parse_status",
    "error",
    "tokens_in",
    "tokens_out",
    "response_id",
    "system",
    "pk",
    "item_row",
]


def study_verifiers(study: Study) -> list[Verifier]:
    """The study's verifiers by name, each with `n_predictions` (prediction_counts) and `n_active_runs`."""
    verifiers: list[Verifier] = list(
        Verifier.objects.filter(study=study)
        .annotate(n_active_runs=Count("runs", filter=Q(runs__status__in=ACTIVE_RUN_STATUSES), distinct=True))
        .order_by("name")
    )
    counts = prediction_counts(verifiers)
    for verifier in verifiers:
        verifier.n_predictions = counts.get(verifier.pk, 0)  # type: ignore[attr-defined]
    return verifiers


def prediction_counts(verifiers: Collection[Verifier]) -> dict[int, int]:
    """Predictions per verifier id, each verifier's counted once per version of its predictions
    (``predictions_version``, as the verifiers were read).

    Counting them is a pass over every prediction (issue 35: at a million the verifiers page grew
    x8-10), and a verifier's change only when its ``predictions_version`` moves (both write paths
    move it in their transaction: prediction_version.py), so each count is kept in the cache under
    its verifier's version; an import that adds rows it counted keeps the new count itself
    (`predictions_written(added=...)`). A count is kept only if its verifier's version is the same
    after counting: one taken while a write committed could hold rows of the next version.
    """
    versions = {verifier.pk: verifier.predictions_version for verifier in verifiers}
    keys = {
        verifier.pk: count_key(verifier.pk, verifier.created_at, verifier.predictions_version) for verifier in verifiers
    }
    kept = cache.get_many(list(keys.values()))
    counts = {verifier_id: kept[key] for verifier_id, key in keys.items() if key in kept}
    missing = [verifier_id for verifier_id in keys if verifier_id not in counts]
    if missing:
        rows = Prediction.objects.filter(verifier_id__in=missing).values_list("verifier_id").annotate(n=Count("pk"))
        fresh = dict.fromkeys(missing, 0) | dict(rows.order_by())
        still = dict(Verifier.objects.filter(pk__in=missing).values_list("pk", "predictions_version"))
        cache.set_many(
            {
                keys[verifier_id]: n
                for verifier_id, n in fresh.items()
                if still.get(verifier_id) == versions[verifier_id]
            },
            PREDICTION_COUNTS_SECONDS,
        )
        counts.update(fresh)
    return counts


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


def current_predictions(study: Study, items: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (verifier, item) the latest prediction: a verifier edited since (new cache keys) is read as it is now.

    Rows by verifier id, then item id (PREDICTION_COLUMNS; no rationale: a million of them would be most of
    the frame, and the report shows a few, read by ``rationales``); ``item_row`` is the item's row in ``items``
    (the report's sections find a prediction's claim by it, not by a million item ids). ``items``: the study's items with their
    primary key ``id``, ``item``, ``response_id`` and ``system`` (the study frame's ``rows.items``, read in
    the same snapshot), whose text the frame shares; None: read here. A prediction on an item not among
    them (imported after they were read) is left out, as the labels leave it out: the study's fingerprint
    has changed with it.

    Why not one ORM query: at a million predictions its tuples, one str per cell, held ~1 GB and took
    8 s, read twice per report; the columns (``metaeval.selectors.read_frames``) and the items' shared
    text hold ~0.1 GB.
    """
    if items is None:
        items = study_items(study)
    # not raw_label: no report section reads it, and a million of them were 60 MB more while read
    columns = ["verifier_id", "item_id", "label", "score", "parse_status", "error", "tokens_in"]
    columns += ["tokens_out", "pk"]
    (rows,) = read_frames(
        FrameRead(
            Prediction.objects.filter(verifier__study=study).order_by().values_list(*columns),
            columns,
            numbers=("verifier_id", "item_id", "tokens_in", "tokens_out", "pk"),
            floats=("score",),
            repeated=("label", "parse_status", "error"),
        )
    )
    verifier, item, pk = (rows[name].to_numpy() for name in ("verifier_id", "item_id", "pk"))
    order = np.lexsort((-pk, item, verifier))  # by verifier, item, newest first
    newest = np.ones(len(order), dtype=bool)  # the first of each (verifier, item)
    newest[1:] = (verifier[order][1:] != verifier[order][:-1]) | (item[order][1:] != item[order][:-1])
    kept = order[newest]
    place = pd.Index(items["id"]).get_indexer(item[kept])
    kept, place = kept[place >= 0], place[place >= 0]
    return pd.DataFrame(
        {
            "verifier_id": verifier[kept],
            "item": items["item"].array.take(place),
            **{name: rows[name].array.take(kept) for name in ("label", "score", "parse_status", "error")},
            **{name: rows[name].to_numpy()[kept] for name in ("tokens_in", "tokens_out")},
            "response_id": items["response_id"].array.take(place),
            "system": items["system"].array.take(place),
            "pk": pk[kept],
            "item_row": place,
        },
        columns=PREDICTION_COLUMNS,
    )


def study_items(study: Study) -> pd.DataFrame:
    """The study's items as ``current_predictions`` reads them: primary key ``id``, ``item`` (the external id),
    ``response_id``, ``system``."""
    (items,) = read_frames(
        FrameRead(
            Item.objects.filter(study=study).order_by().values_list("pk", "external_id", "response_id", "system"),
            ["id", "item", "response_id", "system"],
            ("id",),
            repeated=("response_id", "system"),
        )
    )
    return items


def rationales(pks: Collection[int]) -> dict[int, str]:
    """The rationale of each of these predictions (the few a report shows)."""
    return dict(Prediction.objects.filter(pk__in=list(pks)).values_list("pk", "rationale"))


def verifier_verdicts(study: Study, predictions: pd.DataFrame | None = None) -> dict[str, pd.Series]:
    """Per verifier with predictions (by name), its current label by item id (in item id order); None where it
    has none readable. What the report's factuality scores from verifiers count. ``predictions``: the
    study's ``current_predictions`` when the caller has them (the report: one read for every section)."""
    predictions = current_predictions(study) if predictions is None else predictions
    if predictions.empty:
        return {}
    names = dict(Verifier.objects.filter(study=study).values_list("pk", "name"))
    named = predictions["verifier_id"].map(names).to_numpy()
    return {str(name): group.set_index("item")["label"] for name, group in predictions.groupby(named, sort=True)}


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
