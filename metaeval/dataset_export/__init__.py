"""A study as a Hugging Face dataset folder: parquet files under ``data/`` and a dataset card.

``write_hf_dataset(study, folder, license=...)`` is the one entry point
(``manage.py export_dataset STUDY --format hf DIR``). The tables are built in
``tables``, the card in ``card``; this package only reads the study.
"""

from .writer import DatasetExport, write_hf_dataset

__all__ = ["DatasetExport", "write_hf_dataset"]
