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

from collections.abc import Iterable

from django.db.models import F

from ..models import Verifier


def predictions_written(verifier_ids: Iterable[int]) -> None:
    """In the writing transaction: the predictions of these verifiers changed (an UPDATE of their rows,
    which also orders two writers of one verifier's predictions)."""
    Verifier.objects.filter(pk__in=list(verifier_ids)).update(predictions_version=F("predictions_version") + 1)
