"""Writing the dataset folder whole or not at all."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from annotation.errors import ServiceError
from annotation.models import Study

from .card import UNKNOWN_LICENSE, ConfigTable, agreement_figures, dataset_card
from .licenses import dataset_license
from .predictions import has_predictions, write_prediction_parquet
from .tables import PairCounts, build_tables

__all__ = ["DatasetExport", "write_hf_dataset"]

FILE_NAME = "train-00000-of-00001.parquet"


@dataclass(frozen=True)
class DatasetExport:
    """What was written: the folder and the rows per config."""

    folder: Path
    rows: dict[str, int]
    pairs_left_out: PairCounts | None


def write_hf_dataset(
    study: Study, folder: Path, *, license: str = UNKNOWN_LICENSE, n_resamples: int = 1000
) -> DatasetExport:
    """Write ``folder`` (new or empty) as a Hugging Face dataset: ``data/<config>/*.parquet`` and README.md.

    Everything is written into a sibling ``.partial`` folder first and moved
    into place at the end, so a failed export leaves nothing behind.
    """
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ServiceError(f"{folder} exists and is not an empty folder; choose a new folder")
    if not folder.parent.exists():
        raise ServiceError(f"the folder {folder.parent} does not exist")
    license = dataset_license(license)  # refused (ServiceError) before anything is written
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        items = partial / "data" / "items"
        items.mkdir(parents=True)
        # the items written as they are read: a verifier-scale study has a million (tables.ITEM_BATCH_ROWS)
        tables = build_tables(study, items_to=items / FILE_NAME)
        configs: list[tuple[str, ConfigTable]] = [("annotations", tables.annotations), ("items", tables.items)]
        if tables.pairs is not None:
            configs.append(("preference_pairs", tables.pairs))
        figures = agreement_figures(tables.frame, n_resamples=n_resamples)
        for name, table in configs:
            if name == "items":
                continue
            assert isinstance(table, pa.Table)  # only the items are written as built
            target = partial / "data" / name
            target.mkdir(parents=True)
            pq.write_table(table, target / FILE_NAME)
        if has_predictions(study):  # streamed to its file: a verifier-scale study holds a million (predictions.py)
            target = partial / "data" / "predictions"
            target.mkdir(parents=True)
            configs.append(("predictions", write_prediction_parquet(study, target / FILE_NAME)))
        card = dataset_card(study, tables, configs, license=license, figures=figures)
        (partial / "README.md").write_text(card, encoding="utf-8")
        if folder.exists():
            folder.rmdir()
        partial.rename(folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return DatasetExport(
        folder=folder, rows={name: table.num_rows for name, table in configs}, pairs_left_out=tables.pair_counts
    )
