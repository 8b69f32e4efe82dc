"""The dataset folder as one zip: what a background export job (``format=hf``) hands out.

The export runner (annotation/transfer/services/export_runner.py) calls ``write_hf_zip`` through
the registry annotation exposes (annotation/lib/export_formats.py; metaeval/apps.py registers it
as the format ``hf``):
the zip holds exactly the files ``write_hf_dataset`` writes (``manage.py export_dataset``), at its
root: ``README.md`` and ``data/<config>/train-00000-of-00001.parquet``.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from annotation.models import Study

from .card import UNKNOWN_LICENSE
from .writer import write_hf_dataset

__all__ = ["write_hf_zip"]


def write_hf_zip(study: Study, path: Path, *, license: str = "") -> int:
    """Write the study's Hugging Face dataset as a zip at ``path``, whole or not at all; its annotations.

    The folder is built beside the zip (``<name>.d``, its own ``.partial`` first) and removed at the
    end: those names begin with the job's, so a worker killed meanwhile leaves nothing that the
    export recovery does not remove (annotation/transfer/services/recovery.py).
    """
    path = Path(path)
    folder = path.with_name(path.name + ".d")
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(folder, ignore_errors=True)
    try:
        written = write_hf_dataset(study, folder, license=license or UNKNOWN_LICENSE)
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for file in sorted(p for p in folder.rglob("*") if p.is_file()):
                archive.write(file, file.relative_to(folder).as_posix())
        partial.replace(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        partial.unlink(missing_ok=True)
    return written.rows["annotations"]
