"""The ``predictions`` config: a study's verifier predictions as parquet, written a batch at a time.

The columns of the predictions export (metaeval/verifiers/prediction_export.py), values as stored:
``order_labels`` as JSON text (as ``evidence_judgements`` in ``annotations``), null where the database
has null. Why streamed, unlike the other configs: a verifier-scale study holds a million predictions,
and the export must stay in bounded memory and within 2x of a bare ``COPY TO`` of the rows. On
PostgreSQL pyarrow's CSV reader (C++, threaded) parses the database's own CSV of the rows
(``copied_csv``); on SQLite the rows come from a cursor a batch at a time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from django.db import connection

from annotation.models import Study
from metaeval.models import Prediction
from metaeval.verifiers.prediction_export import EXPORT_COLUMNS, copied_csv, prediction_rows

__all__ = ["PREDICTION_SCHEMA", "WrittenConfig", "has_predictions", "write_prediction_parquet"]

PREDICTION_SCHEMA = pa.schema(
    [
        ("item", pa.string()),
        ("verifier", pa.string()),
        ("label", pa.string()),
        ("score", pa.float64()),
        ("rationale", pa.string()),
        ("raw_label", pa.string()),
        ("parse_status", pa.string()),
        ("error", pa.string()),
        ("latency_ms", pa.int64()),
        ("tokens_in", pa.int64()),
        ("tokens_out", pa.int64()),
        ("order_labels", pa.string()),
        ("raw_output", pa.string()),
    ]
)
#: Rows per record batch (SQLite), each a parquet row group: bounds the memory.
BATCH_ROWS = 20_000


@dataclass(frozen=True)
class WrittenConfig:
    """A config already written to its files: what the dataset card needs of it (a pa.Table's two attributes)."""

    schema: pa.Schema
    num_rows: int


def has_predictions(study: Study) -> bool:
    return Prediction.objects.filter(verifier__study=study).exists()


def write_prediction_parquet(study: Study, path: Path) -> WrittenConfig:
    """Write the study's predictions to the parquet file ``path``; its schema and row count."""
    rows = 0
    with pq.ParquetWriter(path, PREDICTION_SCHEMA) as writer:
        for batch in _batches(study):  # a row group each (~7,000 rows; bigger ones cost memory, not speed)
            writer.write_batch(batch)
            rows += batch.num_rows
    return WrittenConfig(schema=PREDICTION_SCHEMA, num_rows=rows)


def _batches(study: Study):  # -> Iterator[pa.RecordBatch]
    if connection.vendor == "postgresql":
        yield from _parsed_batches(study)
        return
    source = prediction_rows(study)
    json_at = EXPORT_COLUMNS.index("order_labels")
    while chunk := list(islice(source, BATCH_ROWS)):
        columns = list(zip(*chunk, strict=True))
        columns[json_at] = tuple(json.dumps(value, ensure_ascii=False) for value in columns[json_at])
        yield pa.RecordBatch.from_arrays(
            [pa.array(column, type=field.type) for column, field in zip(columns, PREDICTION_SCHEMA, strict=True)],
            schema=PREDICTION_SCHEMA,
        )


def _parsed_batches(study: Study):  # -> Iterator[pa.RecordBatch]
    """PostgreSQL: its CSV parsed by pyarrow. An unquoted empty cell is NULL, a quoted one empty text (as
    PostgreSQL writes them); nothing else is read as null ("NULL", "NA" are text)."""
    convert = pa_csv.ConvertOptions(
        column_types=PREDICTION_SCHEMA,
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )
    # 1 MB blocks: pyarrow's streaming CSV reader holds several times its block size (8 MB blocks took
    # 240 MB for a million predictions, 1 MB blocks 60 MB, for the same speed).
    read = pa_csv.ReadOptions(block_size=1 << 20, use_threads=False)
    parse = pa_csv.ParseOptions(newlines_in_values=True)
    with copied_csv(study) as stream:
        reader = pa_csv.open_csv(stream, read_options=read, parse_options=parse, convert_options=convert)
        for batch in reader:
            yield batch.select(PREDICTION_SCHEMA.names).cast(PREDICTION_SCHEMA)
