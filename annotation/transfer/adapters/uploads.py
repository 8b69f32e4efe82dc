"""A pipeline's file uploaded on the import page or through the API, imported during the request.

The conversion needs the whole file (pairing two extractors' files by
response, whole-JSON exports), so these uploads are bounded by
IMPORT_FROM_UPLOAD_MAX_BYTES and imported at once; the outcome is kept as an
ImportJob like any upload, so the same job page shows it and its errors.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.utils import timezone

from annotation.errors import ImportFailed, ServiceError
from annotation.models import ImportJob, Study
from annotation.transfer.adapters.base import PAGE
from annotation.transfer.adapters.service import Importer, import_from
from annotation.transfer.adapters.source_labels import choice


def check_size(*uploads: UploadedFile | None) -> None:
    """Refuse uploads (together) bigger than IMPORT_FROM_UPLOAD_MAX_BYTES, naming the command to use instead."""
    size = sum(upload.size or 0 for upload in uploads if upload is not None)
    limit = settings.IMPORT_FROM_UPLOAD_MAX_BYTES
    if size > limit:
        raise ServiceError(
            f"the file(s) are {size:,} bytes; a pipeline's file is imported here up to {limit:,} bytes "
            "(use the import commands with --from for bigger files)"
        )


def import_upload_from(
    *,
    study: Study,
    what: str,
    source: str,
    upload: UploadedFile,
    pair: UploadedFile | None = None,
    systems: tuple[str, str] | None = None,
    verifier: str = "",
    update: bool = False,
    created_by: User | None = None,
    importers: dict[str, Importer] | None = None,
    source_labels: str | None = None,
    face: str = PAGE,
) -> ImportJob:
    """Import an uploaded pipeline file now and record the outcome (with its notes on `job.notes`).

    `source_labels`: what the labels the file carries beside its items become (adapters/source_labels.py);
    a value it does not know is a ServiceError before anything is stored, the job included. `face`: the page
    (the default) or the API, whose names of the options the errors use."""
    choice(source_labels, target=what)
    check_size(upload, pair)
    name = Path(upload.name or "upload").name[:255]
    job = ImportJob(
        study=study,
        what=what,
        file_name=name,
        file_format=(Path(name).suffix.lstrip(".").lower() or "json")[:8],
        update_existing=update,
        created_by=created_by,
        status=ImportJob.Status.RUNNING,
    )
    job.notes = []
    try:
        result = import_from(
            source=source,
            target=what,
            study=study,
            stream=upload,
            file_name=name,
            pair=pair,
            pair_name=Path(pair.name or "").name if pair is not None else "",
            systems=systems,
            verifier=verifier,
            update=update,
            importers=importers,
            source_labels=source_labels,
            face=face,
        )
    except ImportFailed as exc:
        job.status = ImportJob.Status.FAILED
        job.errors, job.error_count = [error.as_dict() for error in exc.errors], exc.total
    else:
        job.status = ImportJob.Status.SUCCEEDED
        job.created, job.updated = result.created, result.updated
        job.notes = result.notes
    job.finished_at = timezone.now()
    job.save()
    return job


def system_names(value: str) -> tuple[str, str] | None:
    """'A,B' (two extractors) or 'A' (the model that wrote the responses), from a form or the API."""
    names = [name.strip() for name in (value or "").split(",")]
    if not any(names):
        return None
    if len(names) > 2 or not all(names):
        raise ServiceError(f"systems takes one name or two, comma-separated (A,B); got {value!r}")
    return (names[0], names[-1]) if len(names) == 2 else (names[0], "")
