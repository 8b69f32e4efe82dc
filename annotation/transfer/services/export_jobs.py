"""Big exports: written to a file by a background task, then downloaded.

Long work never runs inside a request (docs/architecture.md, Mechanisms). A study with up to
EXPORT_INLINE_MAX_ROWS annotations is streamed straight from the request
(a few seconds at most; `selectors.export_runs_in_background` decides); a
bigger one gets an ExportJob that the `run_export_job` task writes to the file
storage (export_runner.py; var/exports, or the shared bucket), and the researcher downloads the file when
it is ready. A newer export of the same study and format replaces the older
file, so repeated exports do not fill the disk.

Besides the annotations (CSV, JSON Lines), a job can write a format another app builds and
registers (annotation/lib/export_formats.py): `hf`, the Hugging Face dataset as a zip, and
`predictions-csv` / `predictions-jsonl`, the study's verifier predictions (metaeval).
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


def request_export(*, study: Study, file_format: str, created_by: User | None = None, license: str = "") -> ExportJob:
    """Queue an export of the study's annotations; the task writes it after this transaction commits.

    `license`: the `hf` dataset card's licence (checked by the format's builder, stored on the job so a
    re-queued job writes the same card); the annotation formats take none."""
    registered = export_format(file_format)
    if file_format not in CONTENT_TYPES and registered is None:
        raise ServiceError(f"format must be one of {', '.join(ExportJob.Format.values)}, got {file_format!r}")
    if registered is not None:
        license = registered.check_options({"license": license}).get("license", "")
    elif license:
        raise ServiceError(
            f"a licence is written into the Hugging Face dataset's card only, not a {file_format} export"
        )
    job = ExportJob.objects.create(study=study, file_format=file_format, created_by=created_by, license=license)
    transaction.on_commit(lambda: enqueue(run_export_job, job.pk))
    return job
