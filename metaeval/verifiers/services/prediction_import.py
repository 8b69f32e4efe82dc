"""Importing predictions of verifiers run elsewhere (docs/formats.md), all or nothing.

One record per (item, verifier)::

    {"item": "c-0042", "verifier": "gpt-4o-veriscore", "label": "supported", "score": 0.93, "rationale": "..."}

Each new verifier name becomes an ``imported`` verifier of the study. Labels
are mapped to the study's labels through its aliases, raw label kept; the
score is optional. Any problem, on any line, leaves the database as it was
(verifiers created by the file included) and is reported by line and field,
with the same readers and error collector as the other imports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from annotation.errors import ErrorCollector, ImportResult, ServiceError
from annotation.lib.formats import MAX_LINE_BYTES, RecordError, json_type
from annotation.models import Item, Study
from annotation.transfer.adapters import import_from
from annotation.transfer.adapters.base import PREDICTIONS
from annotation.transfer.adapters.uploads import check_size
from annotation.vocab import canonical_label

from ...models import Prediction, Verifier

__all__ = [
    "IMPORTED_CACHE_KEY",
    "PREDICTION_FIELDS",
    "import_predictions",
    "import_predictions_from",
    "parse_prediction",
]

IMPORTED_CACHE_KEY = "imported"
PREDICTION_FIELDS = ("item", "verifier", "label", "score", "rationale")
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
    unknown = sorted(name for name in record if name not in PREDICTION_FIELDS)
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
) -> ImportResult:
    """Import predictions made elsewhere; ImportFailed (nothing changed) names every problem by line and field.

    A second prediction of the same verifier on the same item is an error,
    in the file or against what is stored, unless ``update`` is given.
    """
    if study.kind != Study.Kind.VERIFICATION:
        raise ServiceError("predictions are verdicts on claims: only verification studies take them")
    errors = ErrorCollector()
    result = ImportResult()
    now = timezone.now()
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        items = dict(Item.objects.filter(study=study).values_list("external_id", "pk"))
        verifiers = {
            name: (pk, kind)
            for name, pk, kind in Verifier.objects.filter(study=study).values_list("name", "pk", "kind")
        }
        stored = {
            (verifier_id, item_id): pk
            for pk, verifier_id, item_id in Prediction.objects.filter(
                verifier__study=study, verifier__kind=Verifier.Kind.IMPORTED, cache_key=IMPORTED_CACHE_KEY
            ).values_list("pk", "verifier_id", "item_id")
        }
        seen: dict[tuple[str, str], int] = {}
        new: list[Prediction] = []
        changed: list[Prediction] = []
        for line, record in errors.records(stream, fmt, result, max_line_bytes=max_line_bytes):
            row = parse_prediction(
                line, record, labels=study.labels, aliases=study.label_aliases, keep_unparseable=keep_unparseable
            )
            if isinstance(row, list):
                errors.extend(row)
                continue
            item_id = items.get(row.item)
            if item_id is None:
                errors.extend(
                    [RecordError(line, f"no item {row.item!r} in study {study.slug!r}; import the items first", "item")]
                )
                continue
            if (row.verifier, row.item) in seen:
                errors.extend(
                    [
                        RecordError(
                            line,
                            f"verifier {row.verifier!r} already has a prediction for item "
                            f"{row.item!r} on line {seen[(row.verifier, row.item)]}",
                            "item",
                        )
                    ]
                )
                continue
            seen[(row.verifier, row.item)] = line
            known = verifiers.get(row.verifier)
            if known is not None and known[1] != Verifier.Kind.IMPORTED:
                errors.extend(
                    [
                        RecordError(
                            line,
                            f"{row.verifier!r} is a {known[1]} verifier of this study; give "
                            "imported predictions a name of their own",
                            "verifier",
                        )
                    ]
                )
                continue
            if known is None:
                if errors:  # no point creating verifiers for a file that will be rolled back
                    continue
                verifier = Verifier.objects.create(study=study, name=row.verifier, kind=Verifier.Kind.IMPORTED)
                known = verifiers[row.verifier] = (verifier.pk, verifier.kind)
            existing = stored.get((known[0], item_id))
            if existing is not None and not update:
                errors.extend(
                    [
                        RecordError(
                            line,
                            f"verifier {row.verifier!r} already has a prediction for item "
                            f"{row.item!r}; use --update to replace it",
                            "item",
                        )
                    ]
                )
                continue
            if errors:
                continue
            prediction = Prediction(
                pk=existing,
                verifier_id=known[0],
                item_id=item_id,
                label=row.label,
                raw_label=row.raw_label,
                score=row.score,
                rationale=row.rationale,
                raw_output=row.raw_output,
                parse_status=(
                    Prediction.ParseStatus.OK if row.label is not None else Prediction.ParseStatus.UNPARSEABLE
                ),
                cache_key=IMPORTED_CACHE_KEY,
                created_at=now,
                updated_at=now,
            )
            (changed if existing is not None else new).append(prediction)
            if len(new) >= BATCH_SIZE:
                result.created += len(Prediction.objects.bulk_create(new))
                new.clear()
        errors.raise_if_any()
        result.created += len(Prediction.objects.bulk_create(new))
        if changed:
            Prediction.objects.bulk_update(
                changed,
                ["label", "raw_label", "score", "rationale", "raw_output", "parse_status", "updated_at"],
                batch_size=BATCH_SIZE,
            )
            result.updated = len(changed)
    return result


def import_predictions_from(
    *, study: Study, source: str, upload: UploadedFile, verifier: str = "", update: bool = False
) -> ImportResult:
    """A pipeline's verdict file (annotation/adapters), uploaded: bounded, then imported at once.

    A verdict outside the study's labels is kept as an unparseable prediction, raw text kept.
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
    )
