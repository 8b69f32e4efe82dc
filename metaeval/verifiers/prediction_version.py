"""Each verifier's predictions version: one number that moves with every write of its predictions.

At a million predictions, counting them (or taking their latest ``updated_at``) on every report
view and verifiers page made those grow with the study (issue 35: the verifiers page x8-10, the
warm report x1.6). Predictions are only ever written in two places, an import's switch
(prediction_staging.py) and a run's stored batch (runner/chunks.py), and never deleted but with
their verifier or study; both call ``predictions_written`` in their transaction, so a reader of
the versions (metaeval.selectors.report_fingerprint, verifiers.selectors.prediction_counts) sees
them move exactly when the predictions do.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime

from django.core.cache import cache
from django.db import transaction
from django.db.models import F

from ..models import Verifier

#: How long a verifier's count of predictions is kept under its version (a new write makes a new key at once).
PREDICTION_COUNTS_SECONDS = 24 * 3600


def count_key(verifier_id: int, created_at: datetime, version: int) -> str:
    """The cache key of a verifier's number of predictions at one version (verifiers.selectors.prediction_counts);
    with its creation time, so a verifier made with a recycled id (SQLite) never reads another's count."""
    return f"verifier-prediction-count:v1:{verifier_id}:{created_at.timestamp()}:{version}"


def predictions_written(
    verifier_ids: Iterable[int], *, added: Mapping[int, int] | None = None, made: Collection[int] = ()
) -> None:
    """In the writing transaction: the predictions of these verifiers changed (an UPDATE of their rows,
    which also orders two writers of one verifier's predictions).

    `added`: how many predictions the write added per verifier, when it knows exactly (an import that
    COPYs only new rows), and `made`: the verifiers it made (none before). Once the transaction commits,
    the count kept for each verifier's previous version (or 0 for one made) plus what was added is kept
    for its new version, so the verifiers page's next view does not count a million predictions again.
    """
    ids = sorted(set(verifier_ids))
    Verifier.objects.filter(pk__in=ids).update(predictions_version=F("predictions_version") + 1)
    if added:
        versions = {
            pk: (created_at, version)
            for pk, created_at, version in Verifier.objects.filter(pk__in=list(added)).values_list(
                "pk", "created_at", "predictions_version"
            )
        }
        made = set(made)
        transaction.on_commit(lambda: _carry_counts(versions, dict(added), made))


def _carry_counts(versions: dict[int, tuple[datetime, int]], added: dict[int, int], made: set[int]) -> None:
    """Keep each verifier's count at its new version: the previous version's kept count plus what was added."""
    for verifier_id, (created_at, version) in versions.items():
        before = 0 if verifier_id in made else cache.get(count_key(verifier_id, created_at, version - 1))
        if before is not None:
            cache.set(
                count_key(verifier_id, created_at, version),
                before + added.get(verifier_id, 0),
                PREDICTION_COUNTS_SECONDS,
            )
