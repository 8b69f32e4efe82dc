"""PostgreSQL: an import of new predictions COPYs its rows straight into the prediction table, in one transaction.

Why, and why it is safe there, as for items: annotation/transfer/services/item_copy.py (staging
wrote every row twice, one COPY of 1,000 rows at a time: a million predictions took 4.6x a bare
COPY of the same rows). The rows of an uncommitted transaction are invisible to every other
connection, foreign keys are checked at commit, and a problem on any line rolls everything back.

What needs the database while the file is read (making a verifier the file names first, reading
the stored predictions of a verifier the study has) happens between two COPYs: the COPY is ended,
the query run, a new COPY opened. That is once per verifier the file names, a handful.

Prediction imports of one study are serialised by a transaction-level advisory lock
(`lock_prediction_imports`, taken by the staging switch too): an import reads the study's
verifiers and predictions after the one before it has committed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction

from annotation.lib.copy_text import OpenCopy, lock_imports
from annotation.lib.rawsql import Names
from annotation.models import Study

from ...models import Prediction, Verifier
from ..prediction_version import predictions_written

#: The advisory lock namespace of prediction imports (the study's id is the other key).
PREDICTION_IMPORT_LOCK = 73_502
#: The columns a new prediction's row gives, in COPY order.
COPY_COLUMNS = (
    "verifier",
    "item",
    "label",
    "raw_label",
    "score",
    "rationale",
    "raw_output",
    "parse_status",
    "tokens_in",
    "tokens_out",
    "error",
    "order_labels",
    "cache_key",
    "created_at",
    "updated_at",
)


def lock_prediction_imports(study: Study) -> None:
    """PostgreSQL: wait for the study's other prediction import to end; held until this transaction ends."""
    lock_imports(PREDICTION_IMPORT_LOCK, study.pk)


class PredictionCopy:
    """One import's COPY into the prediction table, with the verifiers it makes on the way.

    Made under the import lock: `verifiers` (the study's, name -> (pk, kind)) stays true until this
    transaction ends but for the imported verifiers the import itself makes.
    """

    def __init__(self, study: Study, *, cache_key: str, now: datetime) -> None:
        self.study = study
        self.cache_key = cache_key
        self.now = now
        self.verifiers: dict[str, tuple[int, str]] = {
            name: (pk, kind)
            for name, pk, kind in Verifier.objects.filter(study=study).values_list("name", "pk", "kind")
        }
        self.added: Counter[int] = Counter()  # verifier id -> predictions written (all new: a COPY adds rows only)
        self.made: set[int] = set()
        #: Called with the id of each verifier the import makes (it holds no stored prediction to read).
        self.on_made: Callable[[int], None] = lambda verifier_id: None
        self._no_orders = json.dumps([])  # order_labels of a prediction no run made, as Django's JSONField stores it
        prediction = Names(Prediction)
        self.copy = OpenCopy(prediction.table, [getattr(prediction, name) for name in COPY_COLUMNS])

    @contextmanager
    def between_copies(self) -> Iterator[None]:
        """Run queries: the COPY is ended before and a new one opened after."""
        open_before = self.copy.is_open
        self.copy.end()
        yield
        if open_before:
            self.copy.start()

    def add(self, row: Sequence[Any]) -> None:
        """Write one new prediction, a tuple in prediction_staging.STAGED_FIELDS order (no target)."""
        _line, _target, name, item_id, label, raw_label, score, rationale, raw_output, status = row
        known = self.verifiers.get(name)
        if known is None:
            with self.between_copies():
                (made,) = Verifier.objects.bulk_create(
                    [Verifier(study=self.study, name=name, kind=Verifier.Kind.IMPORTED)]
                )
                known = (made.pk, Verifier.Kind.IMPORTED)
            self.made.add(made.pk)
            self.on_made(made.pk)
            self.verifiers[name] = known
        verifier_id = known[0]
        self.added[verifier_id] += 1
        self.copy.write_row(
            (
                verifier_id,
                item_id,
                label,
                raw_label,
                score,
                rationale,
                raw_output,
                status,
                0,
                0,
                "",
                self._no_orders,
                self.cache_key,
                self.now,
                self.now,
            )
        )


@contextmanager
def prediction_copy_for(study: Study, *, cache_key: str, now: datetime) -> Iterator[PredictionCopy]:
    """A transaction holding the study's prediction-import lock and an open COPY into the prediction table.

    Leaving with an exception aborts the COPY and rolls everything back (the verifiers it made
    included); the caller ends the COPY and calls `finish_copy` before leaving normally, which commits.
    """
    with transaction.atomic():
        lock_prediction_imports(study)
        target = PredictionCopy(study, cache_key=cache_key, now=now)
        target.copy.start()
        try:
            yield target
        except BaseException as failure:
            target.copy.end(failure)
            raise
        target.copy.end()


def finish_copy(target: PredictionCopy) -> int:
    """Mark the verifiers written (their predictions changed: prediction_version.py), with how many
    predictions each gained; none replaced (0)."""
    target.copy.end()
    predictions_written(target.added, added=target.added, made=target.made)
    return 0
