"""Importing predictions of verifiers run elsewhere (docs/formats.md), all or nothing.

One record per (item, verifier)::

    {"item": "c-0042", "verifier": "gpt-4o-veriscore", "label": "supported", "score": 0.93, "rationale": "..."}

Each new verifier name becomes an ``imported`` verifier of the study. Labels
are mapped to the study's labels through its aliases, raw label kept; the
score is optional. Any problem, on any line, leaves the database as it was
(verifiers created by the file included) and is reported by line and field,
with the same readers and error collector as the other imports. On PostgreSQL
an import of new predictions COPYs them straight into their table in its own
transaction while the file is read (prediction_copy.py); otherwise the file is
read and checked with no transaction open, its rows staged in a private table,
and made live in one short transaction (prediction_staging.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from annotation.errors import ErrorCollector, ImportResult, ServiceError
from annotation.lib.copy_text import copies_directly
from annotation.lib.formats import MAX_LINE_BYTES, RecordError, json_type
from annotation.lib.gc_pause import paused_collection
from annotation.models import Item, Study
from annotation.transfer.adapters import import_from
from annotation.transfer.adapters.base import PAGE, PREDICTIONS
from annotation.transfer.adapters.uploads import check_size
from annotation.transfer.faces import CLI, to_replace
from annotation.vocab import canonical_label

from ...models import Prediction, Verifier
from .prediction_copy import finish_copy, lock_prediction_imports, prediction_copy_for
from .prediction_staging import (
    UPDATE,
    prediction_staging_for,
    stage_prediction_rows,
    switch_predictions_live,
)

__all__ = [
    "IMPORTED_CACHE_KEY",
    "PREDICTION_FIELDS",
    "import_predictions",
    "import_predictions_from",
    "parse_prediction",
]

IMPORTED_CACHE_KEY = "imported"
PREDICTION_FIELDS = ("item", "verifier", "label", "score", "rationale")
#: The predictions export's other columns (verifiers/prediction_export.py): read past, so an export re-imports as
#: it is; what they say (raw text, tokens, the call's error) belongs to the run that made the prediction.
EXPORT_ONLY_FIELDS = (
    "raw_label",
    "parse_status",
    "error",
    "latency_ms",
    "tokens_in",
    "tokens_out",
    "order_labels",
    "raw_output",
)
KNOWN_FIELDS = frozenset((*PREDICTION_FIELDS, *EXPORT_ONLY_FIELDS))
MAX_NAME = 100
MAX_ID = 200
MAX_LABEL = 200
MAX_RATIONALE = 100_000
BATCH_SIZE = 1000


@dataclass
class PredictionRow:
    line: int
    item: str
    verifier: str
    label: str | None
    raw_label: str
    score: float | None
    rationale: str
    raw_output: str = ""


def _text(record: dict, name: str, errors: list[RecordError], line: int, *, limit: int, required: bool) -> str:
    value = record.get(name)
    # The common case first (four fields a line, a million lines): a string within its limit that
    # stripping would leave as it is (the rationale is not stripped: it only must not be blank).
    if type(value) is str and len(value) <= limit and value[:1].strip() and (name == "rationale" or value[-1:].strip()):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            errors.append(RecordError(line, "is required and must be a non-empty string", name))
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, int) and name != "item"):
        errors.append(RecordError(line, f"must be a string, got {json_type(value)}", name))
        return ""
    text = str(value).strip() if name != "rationale" else str(value)
    if len(text) > limit:
        errors.append(RecordError(line, f"is {len(text):,} characters long; the limit is {limit:,}", name))
        return ""
    return text


def _filled(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())


def _score(record: dict, errors: list[RecordError], line: int) -> float | None:
    value = record.get("score")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        errors.append(RecordError(line, "must be a number, got boolean", "score"))
        return None
    if isinstance(value, str):  # CSV cells are text
        try:
            value = float(value.strip())
        except ValueError:
            errors.append(RecordError(line, f"must be a number, got {value!r}", "score"))
            return None
    if not isinstance(value, (int, float)):
        errors.append(RecordError(line, f"must be a number, got {json_type(value)}", "score"))
        return None
    if not math.isfinite(value) or abs(value) > 1e12:
        errors.append(RecordError(line, f"must be a finite number, got {value!r}", "score"))
        return None
    return float(value)


def parse_prediction(
    line: int,
    record: dict[str, Any],
    *,
    labels: list[str],
    aliases: dict[str, str],
    keep_unparseable: bool = False,
) -> PredictionRow | list[RecordError]:
    """One record as a row to store, or its problems by field (no database access).

    With ``keep_unparseable`` (the pipelines' adapters, annotation/adapters), a label outside the
    study's vocabulary, or none, is what the verifier said all the same: it is kept as an
    unparseable prediction (label None, raw text kept) rather than refused.
    """
    errors: list[RecordError] = []
    unknown = [] if record.keys() <= KNOWN_FIELDS else sorted(set(record) - KNOWN_FIELDS)
    if unknown:
        errors.append(
            RecordError(
                line,
                f"unknown field(s) {', '.join(map(repr, unknown))}; expected some of {', '.join(PREDICTION_FIELDS)}",
                unknown[0] if len(unknown) == 1 else None,
            )
        )
    item = _text(record, "item", errors, line, limit=MAX_ID, required=True)
    verifier = _text(record, "verifier", errors, line, limit=MAX_NAME, required=True)
    limit = MAX_RATIONALE if keep_unparseable else MAX_LABEL
    unanswered = not _filled(record.get("label")) and (
        _filled(record.get("error")) or record.get("parse_status") == Prediction.ParseStatus.UNPARSEABLE
    )
    if unanswered and not keep_unparseable:
        errors.append(
            RecordError(
                line,
                "is empty: this exported prediction is a failed call or an unparseable answer, not a verdict; "
                "leave the row out",
                "label",
            )
        )
        return errors
    raw = _text(record, "label", errors, line, limit=limit, required=not keep_unparseable)
    label = canonical_label(raw, labels, aliases) if raw else None
    raw_output = ""
    if keep_unparseable and label is None:
        raw, raw_output = raw[:MAX_LABEL], raw
    elif raw and label is None:
        errors.append(RecordError(line, f"{raw!r} is not one of the study's labels ({', '.join(labels)})", "label"))
    score = _score(record, errors, line)
    rationale = _text(record, "rationale", errors, line, limit=MAX_RATIONALE, required=False)
    if errors:
        return errors
    return PredictionRow(line, item, verifier, label, raw, score, rationale, raw_output)


def import_predictions(
    *,
    study: Study,
    stream: IO[bytes],
    fmt: str,
    update: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    keep_unparseable: bool = False,
    face: str = CLI,
) -> ImportResult:
    """Import predictions made elsewhere; ImportFailed (nothing changed) names every problem by line and field.

    A second prediction of the same verifier on the same item is an error,
    in the file or against what is stored, unless ``update`` is given.

    Written as the item imports are (annotation/transfer/services/item_import.py): on PostgreSQL,
    without ``update``, COPYd into the prediction table in the import's own transaction, the
    verifiers it names made in it (prediction_copy.py); otherwise staged a batch at a time in a
    private table with no transaction open, then switched live with the verifiers new to the study
    in one short transaction (prediction_staging.py). Annotators keep labelling throughout. A problem
    on any line, even the last, leaves nothing live. `face`: where the import
    was asked for, so an error that asks for ``update`` names it as that face does (transfer/faces.py).
    """
    if study.kind != Study.Kind.VERIFICATION:
        raise ServiceError("predictions are verdicts on claims: only verification studies take them")
    errors = ErrorCollector()
    result = ImportResult()
    now = timezone.now()
    items = dict(Item.objects.filter(study=study).values_list("external_id", "pk"))
    read = partial(
        _rows_to_store,
        study,
        stream,
        fmt,
        items,
        update,
        errors,
        result,
        face=face,
        max_line_bytes=max_line_bytes,
        keep_unparseable=keep_unparseable,
    )
    with paused_collection():
        if copies_directly(update=update):
            with prediction_copy_for(study, cache_key=IMPORTED_CACHE_KEY, now=now) as target:
                stored = StoredPredictions(around_reads=target.between_copies)
                target.on_made = stored.holds_none
                for row in read(target.verifiers, stored):
                    target.add(row)
                if errors:
                    raise errors.fail()
                result.updated = finish_copy(target)
            return result
        verifiers = {
            name: (pk, kind)
            for name, pk, kind in Verifier.objects.filter(study=study).values_list("name", "pk", "kind")
        }
        with prediction_staging_for(study, cache_key=IMPORTED_CACHE_KEY) as staging:
            batch: list[tuple] = []
            for row in read(verifiers, StoredPredictions()):
                batch.append(row)
                if len(batch) >= BATCH_SIZE:
                    stage_prediction_rows(staging, batch)
                    batch.clear()
            if errors:
                raise errors.fail()
            stage_prediction_rows(staging, batch)
            with transaction.atomic():
                lock_prediction_imports(study)
                result.updated = switch_predictions_live(staging, now=now, face=face)
    return result


def _rows_to_store(
    study: Study,
    stream: IO[bytes],
    fmt: str,
    items: dict[str, int],
    update: bool,
    errors: ErrorCollector,
    result: ImportResult,
    verifiers: dict[str, tuple[int, str]],
    stored: StoredPredictions,
    *,
    face: str,
    max_line_bytes: int,
    keep_unparseable: bool,
) -> Iterator[tuple]:
    """The file's predictions to write, as tuples in prediction_staging.STAGED_FIELDS order, counted on `result`.

    Problems go to `errors`; after the first the rest of the file is still checked, no row given.
    `verifiers`: the study's, name -> (pk, kind) (an import that copies adds those it makes).
    """
    seen: dict[str, dict[int, int]] = {}  # verifier -> item pk -> first line (ints shared with `items`: compact)
    for line, record in errors.records(stream, fmt, result, max_line_bytes=max_line_bytes):
        row = parse_prediction(
            line, record, labels=study.labels, aliases=study.label_aliases, keep_unparseable=keep_unparseable
        )
        if isinstance(row, list):
            errors.extend(row)
            continue
        problem, existing = _check(row, study=study, items=items, verifiers=verifiers, stored=stored, seen=seen)
        if problem is not None:
            errors.extend([problem])
            continue
        if not update and existing is not None:
            errors.extend(
                [
                    RecordError(
                        line,
                        f"verifier {row.verifier!r} already has a prediction for item "
                        f"{row.item!r}; {to_replace(face, name=UPDATE)}",
                        "item",
                    )
                ]
            )
            continue
        if errors:
            continue  # the import will fail: check the rest, store nothing more
        if existing is None:
            result.created += 1
        yield _staged_row(row, items[row.item], existing)


class StoredPredictions:
    """The imported predictions a file may replace, read per verifier when the file first names it.

    Why not all of the study's at once: a study at verifier scale holds a million predictions (a dict of
    them ~200 MB and seconds to read), and a file that brings a new verifier replaces none of them.
    """

    def __init__(self, around_reads: Callable[[], AbstractContextManager[None]] = nullcontext) -> None:
        self._by_verifier: dict[int, dict[int, int]] = {}
        self._around_reads = around_reads  # an import that copies reads between its COPYs (prediction_copy.py)

    def holds_none(self, verifier_id: int) -> None:
        """A verifier just made: nothing stored to read."""
        self._by_verifier[verifier_id] = {}

    def of(self, verifier_id: int) -> dict[int, int]:
        """item pk -> the verifier's imported prediction on it."""
        if verifier_id not in self._by_verifier:
            with self._around_reads():
                self._by_verifier[verifier_id] = dict(
                    Prediction.objects.filter(verifier_id=verifier_id, cache_key=IMPORTED_CACHE_KEY)
                    .order_by()
                    .values_list("item_id", "pk")
                )
        return self._by_verifier[verifier_id]


def _check(
    row: PredictionRow,
    *,
    study: Study,
    items: dict[str, int],
    verifiers: dict[str, tuple[int, str]],
    stored: StoredPredictions,
    seen: dict[str, dict[int, int]],
) -> tuple[RecordError | None, int | None]:
    """A row against the study and the file so far: its problem, or the stored prediction it replaces."""
    line = row.line
    if row.item not in items:
        return RecordError(line, f"no item {row.item!r} in study {study.slug!r}; import the items first", "item"), None
    item_id = items[row.item]
    first = seen.setdefault(row.verifier, {}).setdefault(item_id, line)
    if first != line:
        message = f"verifier {row.verifier!r} already has a prediction for item {row.item!r} on line {first}"
        return RecordError(line, message, "item"), None
    known = verifiers.get(row.verifier)
    if known is None:
        return None, None  # a verifier new to the study, made when the rows go live
    if known[1] != Verifier.Kind.IMPORTED:
        message = (
            f"{row.verifier!r} is a {known[1]} verifier of this study; give imported predictions a name of their own"
        )
        return RecordError(line, message, "verifier"), None
    return None, stored.of(known[0]).get(item_id)


def _staged_row(row: PredictionRow, item_id: int, target: int | None) -> tuple:
    """A prediction as a tuple in prediction_staging.STAGED_FIELDS order (see annotation/lib/bulk.py for why tuples)."""
    status = Prediction.ParseStatus.OK if row.label is not None else Prediction.ParseStatus.UNPARSEABLE
    return (
        row.line,
        target,
        row.verifier,
        item_id,
        row.label,
        row.raw_label,
        row.score,
        row.rationale,
        row.raw_output,
        str(status),
    )


def import_predictions_from(
    *, study: Study, source: str, upload: UploadedFile, verifier: str = "", update: bool = False, face: str = PAGE
) -> ImportResult:
    """A pipeline's verdict file (annotation/adapters), uploaded: bounded, then imported at once.

    A verdict outside the study's labels is kept as an unparseable prediction, raw text kept. `face`: the page
    (the default) or the API, whose names of the options the errors use.
    """
    check_size(upload)
    return import_from(
        source=source,
        target=PREDICTIONS,
        study=study,
        stream=upload,
        file_name=Path(upload.name or "").name,
        verifier=verifier,
        update=update,
        importers={PREDICTIONS: partial(import_predictions, keep_unparseable=True)},
        face=face,
    )
