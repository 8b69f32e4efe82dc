"""The real published datasets the tests read, carried in the repository under ``tests/data/``.

``tests/data/README.md`` lists them (source, licence, which tests read them);
``tests/data/make_subset.py`` regenerates the reduced copies from the
published files.  Large files are gzipped: open them with :func:`open_text`.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import TextIO

TEST_DATA = Path(__file__).resolve().parent / "data"


def open_text(path: Path, encoding: str = "utf-8") -> TextIO:
    """A text stream of ``path``, decompressed when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding)
    return path.open(encoding=encoding)


def read_jsonl(path: Path) -> list[dict]:
    """Every non-blank line of a (possibly gzipped) JSONL file, parsed."""
    with open_text(path) as lines:
        return [json.loads(line) for line in lines if line.strip()]
