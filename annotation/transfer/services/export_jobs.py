"""Big exports: written to a file by a background task, then downloaded.

Long work never runs inside a request (docs/architecture.md, Mechanisms). A study with up to
EXPORT_INLINE_MAX_ROWS annotations is streamed straight from the request
(a few seconds at most; `selectors.export_runs_in_background` decides); a
bigger one gets an ExportJob that the `run_export_job` task writes to the file
storage (export_runner.py; var/exports, or the shared bucket), and the researcher downloads the file when
it is ready. A newer export of the same study and format replaces the older
file, so repeated exports do not fill the disk.

Besides the annotations (CSV, JSON Lines), a job can write a format another app builds and
registers (annotation/lib/export_formats.py): `hf`, the Hugging Face dataset as a zip (metaeval).
Those always run in the background, whatever the study's size.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from annotation.errors import ServiceError
from annotation.lib.export_formats import export_format
from annotation.models import ExportJob, Study
from annotation.tasks import run_export_job
from annotation.transfer.exports import CONTENT_TYPES
from config.request_id import enqueue


def request_export(*, study: Study, file_format: str, created_by: User | None = None) -> ExportJob:
    """Queue an export of the study's annotations; the task writes it after this transaction commits."""
    if file_format not in CONTENT_TYPES and export_format(file_format) is None:
        raise ServiceError(f"format must be csv, jsonl or hf, got {file_format!r}")
    job = ExportJob.objects.create(study=study, file_format=file_format, created_by=created_by)
    transaction.on_commit(lambda: enqueue(run_export_job, job.pk))
    return job
