"""Background tasks of the annotation app (django-tasks API, any backend)."""

from __future__ import annotations

from django_tasks import task


@task()
def run_import_job(job_id: int) -> dict:
    """Import a big uploaded file outside the request that uploaded it."""
    from .services.import_jobs import run_import_job as run

    job = run(job_id=job_id)
    return {"status": job.status, "created": job.created, "updated": job.updated, "errors": job.error_count}


@task()
def run_export_job(job_id: int) -> dict:
    """Write a big annotation export to a file, outside the request that asked for it."""
    from .services.export_jobs import run_export_job as run

    job = run(job_id=job_id)
    return {"status": job.status, "rows": job.rows}
