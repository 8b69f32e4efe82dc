"""Staging prediction imports: rows go into a private temporary table, then live in one short transaction.

Why, and how the temporary table works: annotation/lib/staging.py (the item and
annotation imports stage theirs the same way). The switch makes the verifiers
new to the study, then inserts the new predictions with one INSERT ... SELECT
and applies the `--update` replacements with one UPDATE ... FROM.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from annotation.errors import ImportFailed
from annotation.lib.formats import RecordError
from annotation.lib.rawsql import Names
from annotation.lib.staging import stage_rows, temporary_table
from annotation.models import Item, Study
from annotation.transfer.faces import CLI, again_to_replace

from ...models import Prediction, StagedPrediction, Verifier
from ..prediction_version import predictions_written

#: How the faces name the replace option of a predictions import (transfer/faces.py).
UPDATE = "update_predictions"

STAGED_FIELDS = [
    "line",
    "target",
    "verifier_name",
    "item_id",
    "label",
    "raw_label",
    "score",
    "rationale",
    "raw_output",
    "parse_status",
]
#: Prediction columns copied from a staged row, by the INSERT and by the UPDATE of the switch.
COPIED = ["label", "raw_label", "score", "rationale", "raw_output", "parse_status"]
MAX_REPORTED_CONFLICTS = 50


@dataclass(frozen=True)
class PredictionStaging:
    """A temporary table holding one import's predictions (StagedPrediction's columns)."""

    study: Study
    cache_key: str
    table: str  # quoted


@contextmanager
def prediction_staging_for(study: Study, *, cache_key: str) -> Iterator[PredictionStaging]:
    """A fresh temporary staging table for one prediction import, dropped afterwards."""
    prediction, verifier, staged = Names(Prediction), Names(Verifier), Names(StagedPrediction)
    shape = (
        f"SELECT p.{prediction.id} AS {staged.line}, p.{prediction.id} AS {staged.target}, "
        f"v.{verifier.name} AS {staged.verifier_name}, p.{prediction.item}, "
        + ", ".join(f"p.{getattr(prediction, name)}" for name in COPIED)
        + f" FROM {prediction.table} AS p JOIN {verifier.table} AS v ON v.{verifier.id} = p.{prediction.verifier}"
        " WHERE 1 = 0"
    )
    with temporary_table(shape) as table:
        yield PredictionStaging(study=study, cache_key=cache_key, table=table)


def stage_prediction_rows(staging: PredictionStaging, rows: Sequence[tuple]) -> None:
    """Write rows (tuples in STAGED_FIELDS order) to the staging table; takes no lock others wait on."""
    stage_rows(StagedPrediction, STAGED_FIELDS, staging.table, rows)


def switch_predictions_live(staging: PredictionStaging, *, now: datetime, face: str = CLI) -> int:
    """Make the staged rows the study's predictions in one transaction (how many replaced), or raise ImportFailed.

    Between staging and this switch someone may have made a verifier of the
    same name that is not an imported one, or another import may have given a
    staged (verifier, item) its prediction: those lines are named, nothing changes.
    """
    study = staging.study
    prediction, verifier, staged = Names(Prediction), Names(Verifier), Names(StagedPrediction)
    with transaction.atomic():
        Study.objects.select_for_update().get(pk=study.pk)
        _make_verifiers(staging)
        conflicts = _predicted_since(staging, face)
        if conflicts:
            raise ImportFailed(conflicts)
        stamp = connection.ops.adapt_datetimefield_value(now)
        no_orders = Prediction._meta.get_field("order_labels").get_db_prep_save([], connection)
        columns = [getattr(prediction, name) for name in COPIED]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {prediction.table} ({prediction.verifier}, {prediction.item}, {', '.join(columns)}, "
                f"{prediction.tokens_in}, {prediction.tokens_out}, {prediction.error}, {prediction.order_labels}, "
                f"{prediction.cache_key}, {prediction.created_at}, {prediction.updated_at}) "
                f"SELECT v.{verifier.id}, s.{staged.item_id}, {', '.join(f's.{column}' for column in columns)}, "
                "0, 0, '', %s, %s, %s, %s "
                f"FROM {staging.table} AS s JOIN {verifier.table} AS v "
                f"ON v.{verifier.study} = %s AND v.{verifier.name} = s.{staged.verifier_name} "
                f"WHERE s.{staged.target} IS NULL ORDER BY s.{staged.line}",
                [no_orders, staging.cache_key, stamp, stamp, study.pk],
            )
            # UPDATE ... FROM: PostgreSQL, and SQLite since 3.33.
            assignments = ", ".join(f"{column} = s.{column}" for column in columns)
            cursor.execute(
                f"UPDATE {prediction.table} SET {assignments}, {prediction.updated_at} = %s "
                f"FROM {staging.table} AS s WHERE s.{staged.target} = {prediction.table}.{prediction.id}",
                [stamp],
            )
            replaced = max(cursor.rowcount, 0)
            cursor.execute(
                f"SELECT v.{verifier.id} FROM {verifier.table} AS v WHERE v.{verifier.study} = %s "
                f"AND v.{verifier.name} IN (SELECT DISTINCT s.{staged.verifier_name} FROM {staging.table} AS s)",
                [study.pk],
            )
            predictions_written(row[0] for row in cursor.fetchall())
            return replaced


def _make_verifiers(staging: PredictionStaging) -> None:
    """Make the imported verifiers the staged rows name that the study does not have yet.

    A name that became another kind of verifier since the file was read is an error at its first line.
    """
    staged = Names(StagedPrediction)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {staged.verifier_name}, MIN({staged.line}) FROM {staging.table} GROUP BY {staged.verifier_name}"
        )
        first_lines = dict(cursor.fetchall())
    if not first_lines:
        return
    kinds = dict(Verifier.objects.filter(study=staging.study, name__in=list(first_lines)).values_list("name", "kind"))
    taken = [
        RecordError(
            first_lines[name],
            f"{name!r} became a {kind} verifier of this study while this file was being read; give "
            "imported predictions a name of their own",
            "verifier",
        )
        for name, kind in sorted(kinds.items(), key=lambda pair: first_lines[pair[0]])
        if kind != Verifier.Kind.IMPORTED
    ]
    if taken:
        raise ImportFailed(taken)
    Verifier.objects.bulk_create(
        Verifier(study=staging.study, name=name, kind=Verifier.Kind.IMPORTED)
        for name in sorted(first_lines, key=first_lines.__getitem__)
        if name not in kinds
    )


def _predicted_since(staging: PredictionStaging, face: str) -> list[RecordError]:
    """New staged predictions whose (verifier, item) another import has filled since this file was read."""
    prediction, verifier, staged, item = Names(Prediction), Names(Verifier), Names(StagedPrediction), Names(Item)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.{staged.line}, s.{staged.verifier_name}, i.{item.external_id} FROM {staging.table} AS s "
            f"JOIN {verifier.table} AS v ON v.{verifier.study} = %s AND v.{verifier.name} = s.{staged.verifier_name} "
            f"JOIN {prediction.table} AS p ON p.{prediction.verifier} = v.{verifier.id} "
            f"AND p.{prediction.item} = s.{staged.item_id} AND p.{prediction.cache_key} = %s "
            f"JOIN {item.table} AS i ON i.{item.id} = s.{staged.item_id} "
            f"WHERE s.{staged.target} IS NULL ORDER BY s.{staged.line} LIMIT %s",
            [staging.study.pk, staging.cache_key, MAX_REPORTED_CONFLICTS],
        )
        rows = cursor.fetchall()
    return [
        RecordError(
            line,
            f"verifier {name!r} got a prediction for item {external_id!r} from another import while this file "
            f"was being read; {again_to_replace(face, name=UPDATE)}",
            "item",
        )
        for line, name, external_id in rows
    ]
