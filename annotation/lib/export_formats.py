"""Background export formats that another app builds: a registry the export runner reads.

Why a registry: the Hugging Face dataset (parquet files and a dataset card, zipped) is built by
metaeval (metaeval/dataset_export/), and so are a verification study's predictions (`predictions-csv`,
`predictions-jsonl`: metaeval/verifiers/prediction_export.py); metaeval builds on annotation; annotation imports neither
metaeval nor accounts (.importlinter). metaeval registers its builder when it starts
(metaeval/apps.py); without it the format is refused when an export is requested. The CSV and
JSON Lines exports are annotation's own (transfer/exports.py) and are not registered here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: (study, path, options) -> the number of rows written (annotations, or what the format's `counts` names); `options` are the job's checked options
#: (e.g. {"license": "cc-by-4.0"}, the format's `check_options`). Writes the file at `path` whole or not at all,
#: and leaves no other file behind: anything it needs on the way goes into names beginning with
#: `path.name` (the export job's scratch names, which recovery removes when a worker dies).
FileBuilder = Callable[[Any, Path, dict[str, str]], int]
#: The options a researcher asked for -> the same, checked and normalised; ServiceError names a bad one.
OptionsCheck = Callable[[dict[str, str]], dict[str, str]]


def _no_options(options: dict[str, str]) -> dict[str, str]:
    """A format without options refuses any."""
    given = sorted(name for name, value in options.items() if value)
    if given:
        from annotation.errors import ServiceError

        raise ServiceError(f"this export format takes no option {', '.join(given)}")
    return {}


@dataclass(frozen=True)
class ExportFormat:
    """A background export format: its name (ExportJob.file_format), what a download is called
    (`<study slug>-<suffix>`) and served as, and the function that writes the file."""

    name: str
    title: str
    suffix: str
    content_type: str
    build: FileBuilder
    check_options: OptionsCheck = _no_options
    #: What the build's count counts, as a singular noun (the export page: "12 predictions written").
    counts: str = "annotation"


_formats: dict[str, ExportFormat] = {}


def register_export_format(export_format: ExportFormat) -> None:
    _formats[export_format.name] = export_format


def export_format(name: str) -> ExportFormat | None:
    """The registered format of this name; None when no app registered it."""
    return _formats.get(name)
