"""Killing the worker mid-job loses nothing, imports nothing twice and leaves no file.

A real ``manage.py worker`` runs a big item import (or a big export) against
this test's database and gets SIGKILL halfway. The job is left "running" with
its upload on disk and no item imported (the rows staged so far were in the
worker's private temporary table, gone with its connection), or with a
``.partial`` export file. ``resume_stale_jobs`` queues it again (removing the
partial file), and a second worker finishes it: every item imported exactly
once, the upload removed; the export whole, with every annotation once.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.db.models import Count

from annotation.models import ExportJob, ImportJob, Item
from annotation.services import import_annotations, import_items
from annotation.storage import files, scratch_dir, stored_names
from annotation.tasks import run_export_job, run_import_job
from tests.support.worker import start_db_worker, stop, wait_for

from ..conftest import verification_item

N_ITEMS = 60_000
N_LABELLED = 20_000  # x 3 annotators: an export that takes the worker a few seconds

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def start_worker(log: Path, var: Path) -> subprocess.Popen:
    return start_db_worker(
        log,
        {
            "CLAIMLAB_VAR_DIR": str(var),
            "CLAIMLAB_JOB_STALE_SECONDS": "2",
        },
    )


def import_is_staging(job_id: int, since: list) -> bool:
    """The job has been running for two heartbeats (about a second) with no item live yet: it is
    reading and staging the file (60,000 items take several seconds more)."""
    job = ImportJob.objects.get(pk=job_id)
    if job.status != ImportJob.Status.RUNNING or job.heartbeat_at is None:
        return False
    if not since:
        since.append(job.heartbeat_at)
    beats = (job.heartbeat_at - since[0]).total_seconds()
    return beats >= 1.0 and not Item.objects.filter(study_id=job.study_id).exists()


def test_a_worker_killed_mid_import_is_recovered_without_duplicates_or_leftover_files(
    verification_study, settings, tmp_path
):
    var = tmp_path / "var"
    settings.VAR_DIR = var
    job = ImportJob.objects.create(study=verification_study, what="items", file_name="big.jsonl", file_format="jsonl")
    records = "".join(json.dumps(verification_item(f"k-{n:06d}")) + "\n" for n in range(N_ITEMS))
    upload = files().save(f"uploads/{job.pk}-kill.jsonl", ContentFile(records.encode()))
    ImportJob.objects.filter(pk=job.pk).update(file_path=upload)
    run_import_job.enqueue(job.pk)

    first = start_worker(tmp_path / "worker1.log", var)
    try:
        since: list = []
        wait_for(lambda: import_is_staging(job.pk, since), "the import to be staging", first, tmp_path / "worker1.log")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(15)
    finally:
        stop(first)

    job.refresh_from_db()
    assert job.status == ImportJob.Status.RUNNING and job.attempts == 1  # killed: nothing could mark it otherwise
    assert files().exists(upload)
    assert not Item.objects.filter(study=verification_study).exists()  # all or nothing: nothing committed

    call_command("resume_stale_jobs", "--stale-after", "0", stdout=open(os.devnull, "w"))
    job.refresh_from_db()
    assert job.status == ImportJob.Status.QUEUED
    second = start_worker(tmp_path / "worker2.log", var)
    try:
        wait_for(
            lambda: ImportJob.objects.get(pk=job.pk).status in (ImportJob.Status.SUCCEEDED, ImportJob.Status.FAILED),
            "the re-queued import to end",
            second,
            tmp_path / "worker2.log",
            timeout=300,
        )
    finally:
        stop(second)

    job.refresh_from_db()
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    assert (job.created, job.attempts, job.file_path) == (N_ITEMS, 2, "")
    items = Item.objects.filter(study=verification_study)
    assert items.count() == N_ITEMS
    assert not items.values("external_id").annotate(n=Count("pk")).filter(n__gt=1).exists()
    assert not files().exists(upload) and stored_names("uploads") == []


def test_a_worker_killed_mid_export_leaves_no_partial_file_and_the_export_is_whole_after_resume(
    verification_study, settings, tmp_path
):
    var = tmp_path / "var"
    settings.VAR_DIR = var
    import_items(
        study=verification_study,
        stream=io.BytesIO("".join(json.dumps(verification_item(f"e-{n}")) + "\n" for n in range(N_LABELLED)).encode()),
        fmt="jsonl",
    )
    labels = "".join(
        json.dumps({"item": f"e-{n}", "annotator": f"w{k}", "label": "supported", "justification": "x" * 400}) + "\n"
        for n in range(N_LABELLED)
        for k in range(3)
    )
    import_annotations(study=verification_study, stream=io.BytesIO(labels.encode()), fmt="jsonl")
    job = ExportJob.objects.create(study=verification_study, file_format="csv")
    run_export_job.enqueue(job.pk)

    def partial_is_growing() -> bool:
        return any(path.stat().st_size > 0 for path in scratch_dir("exports").glob(f"{job.pk}-*.partial"))

    first = start_worker(tmp_path / "worker1.log", var)
    try:
        wait_for(partial_is_growing, "the export to be writing", first, tmp_path / "worker1.log")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(15)
    finally:
        stop(first)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.RUNNING and job.file_path == ""
    assert list(scratch_dir("exports").glob(f"{job.pk}-*.partial"))  # what the dead worker left

    call_command("resume_stale_jobs", "--stale-after", "0", stdout=open(os.devnull, "w"))
    job.refresh_from_db()
    assert job.status == ExportJob.Status.QUEUED
    assert not list(scratch_dir("exports").glob("*.partial"))
    second = start_worker(tmp_path / "worker2.log", var)
    try:
        wait_for(
            lambda: ExportJob.objects.get(pk=job.pk).status in (ExportJob.Status.SUCCEEDED, ExportJob.Status.FAILED),
            "the re-queued export to end",
            second,
            tmp_path / "worker2.log",
            timeout=300,
        )
    finally:
        stop(second)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.SUCCEEDED, job.error
    assert (job.rows, job.attempts) == (3 * N_LABELLED, 2)
    with files().open(job.file_path, "rb") as exported:
        rows = list(csv.DictReader(io.TextIOWrapper(exported, encoding="utf-8", newline="")))
    assert len(rows) == 3 * N_LABELLED
    assert len({(row["item"], row["annotator"]) for row in rows}) == 3 * N_LABELLED
    assert stored_names("exports") == [job.file_path] and list(scratch_dir("exports").iterdir()) == []
