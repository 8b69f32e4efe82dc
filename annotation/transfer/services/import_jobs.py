"""Uploaded imports: stored as an ImportJob, run now (small) or by a task (big).

Long work never runs inside a request (docs/architecture.md, Mechanisms): uploads larger than
IMPORT_INLINE_MAX_BYTES are saved in the file storage (annotation/lib/storage.py: var/uploads,
or the shared bucket that every worker reads) and imported by the `run_import_job` task; smaller ones are imported at once so the researcher
sees the outcome, or the line-numbered errors, immediately. Either way
import_runner.py runs the job.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from annotation.errors import ServiceError
from annotation.lib.formats import detect_format
from annotation.lib.storage import UPLOADS, files
from annotation.models import ImportJob, Study
from annotation.tasks import run_import_job
from annotation.transfer.faces import WEB
from annotation.transfer.services.import_runner import run_import
from config.request_id import enqueue


def submit_import(
    *,
    study: Study,
    what: str,
    upload: UploadedFile,
    file_format: str | None = None,
    update: bool = False,
    created_by: User | None = None,
    face: str = WEB,
) -> ImportJob:
    """Record an uploaded import and run it now or queue it, by size.

    `face` (transfer/faces.py: PAGE or API) names the options in the errors of an import run now; the
    job does not store it, so a queued one's errors name both the page's field and the API's.
    """
    if what not in ImportJob.What.values:
        raise ServiceError(f"can import {', '.join(ImportJob.What.values)}, not {what!r}")
    try:
        fmt = detect_format(upload.name or "", file_format or None)
    except ValueError as exc:
        raise ServiceError(str(exc)) from None
    if upload.size is not None and upload.size > settings.IMPORT_UPLOAD_MAX_BYTES:
        raise ServiceError(
            f"the file is {upload.size:,} bytes; the upload limit is {settings.IMPORT_UPLOAD_MAX_BYTES:,} "
            "(use the import_items / import_annotations commands for bigger files)"
        )
    job = ImportJob.objects.create(
        study=study,
        what=what,
        file_name=Path(upload.name or "upload").name[:255],
        file_format=fmt,
        update_existing=update,
        created_by=created_by,
    )
    if (upload.size or 0) <= settings.IMPORT_INLINE_MAX_BYTES:
        upload.seek(0)
        run_import(job, upload, face=face)
        return job
    upload.seek(0)
    try:
        job.file_path = files().save(f"{UPLOADS}/{job.pk}-{uuid.uuid4().hex}.{fmt}", upload)
    except Exception:  # the file store away (a 503 for the client): no job without its file is left queued
        job.delete()
        raise
    job.save(update_fields=["file_path"])
    transaction.on_commit(lambda: enqueue(run_import_job, job.pk))
    return job
