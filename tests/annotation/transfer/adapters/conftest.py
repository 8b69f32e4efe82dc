"""Helpers for the adapter tests: the real samples under tests/data/formats and command calls."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Annotation, Item
from metaeval.models import Prediction, Verifier
from tests.datasets import TEST_DATA

FORMATS = TEST_DATA / "formats"


def sample(*parts: str) -> Path:
    return FORMATS.joinpath(*parts)


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def refused(*args: str) -> str:
    """The error of a command that must fail."""
    with pytest.raises(CommandError) as caught:
        run(*args)
    return str(caught.value)


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def jsonl_text(*records: object) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


def stored(study) -> tuple[int, int, int]:
    """(items, annotations, predictions) of a study: what an import may have written."""
    return (
        Item.objects.filter(study=study).count(),
        Annotation.objects.filter(assignment__study=study).count(),
        Prediction.objects.filter(verifier__study=study).count() + Verifier.objects.filter(study=study).count(),
    )
