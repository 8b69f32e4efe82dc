"""Background tasks of the annotation app (django-tasks API, any backend).

The tasks call the modules that run jobs; the modules that queue jobs import
the tasks. Nothing that runs a job imports this module, so no import is circular.
Each task takes the id of the request that queued it (config.request_id.enqueue)
and logs under it.
"""

from __future__ import annotations

from django_tasks import task

from annotation.transfer.services import export_runner, import_runner
from config.request_id import task_context


@task()
def run_import_job(job_id: int, request_id: str = "") -> dict:
    """Import a big uploaded file outside the request that uploaded it."""
    with task_context("run_import_job", request_id):
        job = import_runner.run_import_job(job_id=job_id)
    return {"status": job.status, "created": job.created, "updated": job.updated, "errors": job.error_count}


@task()
def run_export_job(job_id: int, request_id: str = "") -> dict:
    """Write a big annotation export to a file, outside the request that asked for it."""
    with task_context("run_export_job", request_id):
        job = export_runner.run_export_job(job_id=job_id)
    return {"status": job.status, "rows": job.rows}
