"""Killing the worker mid-import loses nothing, imports nothing twice and leaves no file.

A real ``manage.py db_worker`` runs a big item import against this test's
database. Once the import is writing (it holds the database's write lock), the
worker gets SIGKILL. The job is left "running" with its upload on disk and no
item imported (the import is one transaction). ``resume_stale_jobs`` queues it
again, and a second worker imports every item exactly once and removes the upload.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Count

from annotation.models import ImportJob, Item
from annotation.services.import_jobs import upload_dir
from annotation.tasks import run_import_job
from tests.support.worker import start_db_worker, stop, wait_for

from ..conftest import verification_item

N_ITEMS = 60_000

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def start_worker(log: Path, var: Path) -> subprocess.Popen:
    return start_db_worker(
        log,
        {
            "CLAIMLAB_VAR_DIR": str(var),
            "CLAIMLAB_JOB_STALE_SECONDS": "2",
        },
    )


def import_is_writing(job_id: int) -> bool:
    """The job is running and its transaction holds the write lock (SQLite), or it is merely running (PostgreSQL)."""
    if ImportJob.objects.get(pk=job_id).status != ImportJob.Status.RUNNING:
        return False
    if connection.vendor != "sqlite":
        return True
    probe = sqlite3.connect(connection.settings_dict["NAME"], timeout=0)
    try:
        probe.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return True  # locked: the import is inside its transaction
    else:
        probe.rollback()
        return False
    finally:
        probe.close()


def test_a_worker_killed_mid_import_is_recovered_without_duplicates_or_leftover_files(
    verification_study, settings, tmp_path
):
    var = tmp_path / "var"
    settings.VAR_DIR = var
    job = ImportJob.objects.create(study=verification_study, what="items", file_name="big.jsonl", file_format="jsonl")
    upload = upload_dir() / f"{job.pk}-kill.jsonl"
    with upload.open("w") as target:
        for n in range(N_ITEMS):
            target.write(json.dumps(verification_item(f"k-{n:06d}")) + "\n")
    ImportJob.objects.filter(pk=job.pk).update(file_path=str(upload))
    run_import_job.enqueue(job.pk)

    first = start_worker(tmp_path / "worker1.log", var)
    try:
        wait_for(lambda: import_is_writing(job.pk), "the import to be writing", first, tmp_path / "worker1.log")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(15)
    finally:
        stop(first)

    job.refresh_from_db()
    assert job.status == ImportJob.Status.RUNNING and job.attempts == 1  # killed: nothing could mark it otherwise
    assert upload.exists()
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
    assert not upload.exists() and not list(upload_dir().iterdir())
