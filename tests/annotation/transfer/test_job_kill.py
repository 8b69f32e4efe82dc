"""Killing the worker mid-job loses nothing, imports nothing twice and leaves no file.

A real ``manage.py worker`` runs a big item import (or a big export) against
this test's database and gets SIGKILL halfway. The job is left "running" with
its upload on disk and no item imported (the rows staged so far were in the
worker's private temporary table, gone with its connection), or with a
``.partial`` export file. ``resume_stale_jobs`` queues it again (removing the
partial file), and a second worker finishes it: every item imported exactly
once, the upload removed; the export whole, with every annotation once.
The same jobs on the RQ backend: tests/ops/test_rq_kill.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.lib.storage import scratch_dir
from annotation.models import ExportJob, ImportJob
from annotation.tasks import run_export_job, run_import_job
from tests.support.job_kill import (
    JOB_STALE_SECONDS,
    assert_export_whole,
    assert_import_whole,
    assert_killed_export_left_a_partial_file,
    assert_killed_import_changed_nothing,
    big_import_job,
    export_ended,
    export_is_writing,
    import_ended,
    import_is_staging,
    labelled_export_job,
)
from tests.support.worker import kill, start_db_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def start_worker(log: Path, var: Path) -> subprocess.Popen:
    return start_db_worker(log, {"CLAIMLAB_VAR_DIR": str(var), "CLAIMLAB_JOB_STALE_SECONDS": JOB_STALE_SECONDS})


def test_a_worker_killed_mid_import_is_recovered_without_duplicates_or_leftover_files(
    verification_study, settings, tmp_path
):
    var = tmp_path / "var"
    settings.VAR_DIR = var
    job, upload = big_import_job(verification_study)
    run_import_job.enqueue(job.pk)

    first = start_worker(tmp_path / "worker1.log", var)
    try:
        since: list = []
        wait_for(lambda: import_is_staging(job.pk, since), "the import to be staging", first, tmp_path / "worker1.log")
        kill(first)
    finally:
        stop(first)
    assert_killed_import_changed_nothing(job, upload)

    call_command("resume_stale_jobs", "--stale-after", "0", stdout=open(os.devnull, "w"))
    job.refresh_from_db()
    assert job.status == ImportJob.Status.QUEUED
    second = start_worker(tmp_path / "worker2.log", var)
    try:
        wait_for(lambda: import_ended(job.pk), "the re-queued import to end", second, tmp_path / "worker2.log", 300)
    finally:
        stop(second)
    assert_import_whole(job, upload)


def test_a_worker_killed_mid_export_leaves_no_partial_file_and_the_export_is_whole_after_resume(
    verification_study, settings, tmp_path
):
    var = tmp_path / "var"
    settings.VAR_DIR = var
    job = labelled_export_job(verification_study)
    run_export_job.enqueue(job.pk)

    first = start_worker(tmp_path / "worker1.log", var)
    try:
        wait_for(lambda: export_is_writing(job.pk), "the export to be writing", first, tmp_path / "worker1.log")
        kill(first)
    finally:
        stop(first)
    assert_killed_export_left_a_partial_file(job)

    call_command("resume_stale_jobs", "--stale-after", "0", stdout=open(os.devnull, "w"))
    job.refresh_from_db()
    assert job.status == ExportJob.Status.QUEUED
    assert not list(scratch_dir("exports").glob("*.partial"))
    second = start_worker(tmp_path / "worker2.log", var)
    try:
        wait_for(lambda: export_ended(job.pk), "the re-queued export to end", second, tmp_path / "worker2.log", 300)
    finally:
        stop(second)
    assert_export_whole(job)
