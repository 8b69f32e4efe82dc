"""The big import and export jobs the kill tests kill mid-way, and what "recovered" means for each.

Shared by the database-backend tests (tests/annotation/transfer/test_job_kill.py) and the
RQ ones (tests/ops/test_rq_kill.py): the same job, the same moment to kill,
the same checks after recovery, whichever queue carried the task.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from django.core.files.base import ContentFile
from django.db.models import Count

from annotation.lib.storage import files, scratch_dir, stored_names
from annotation.models import ExportJob, ImportJob, Item, Study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from tests.conftest import verification_item
from tests.support.worker import is_held

N_ITEMS = 10_000
N_LABELLED = 3_000  # x 3 annotators: an export of five chunks, killed after the first (held_worker.py)
#: Worker settings: job heartbeats every half second.
JOB_STALE_SECONDS = "2"


def big_import_job(study: Study) -> tuple[ImportJob, str]:
    """A queued-to-be item import of N_ITEMS from an upload in the file storage (the caller enqueues it);
    the job and the upload's storage name."""
    job = ImportJob.objects.create(study=study, what="items", file_name="big.jsonl", file_format="jsonl")
    records = "".join(json.dumps(verification_item(f"k-{n:06d}")) + "\n" for n in range(N_ITEMS))
    upload = files().save(f"uploads/{job.pk}-kill.jsonl", ContentFile(records.encode()))
    ImportJob.objects.filter(pk=job.pk).update(file_path=upload)
    return job, upload


def import_is_staging(job_id: int, log: Path) -> bool:
    """The worker logging to `log` was started with hold="import" and has stopped there: every
    record staged, nothing live (tests/support/held_worker.py)."""
    if not is_held(log):
        return False
    job = ImportJob.objects.get(pk=job_id)
    assert job.status == ImportJob.Status.RUNNING and not Item.objects.filter(study_id=job.study_id).exists()
    return True


def assert_killed_import_changed_nothing(job: ImportJob, upload: str) -> None:
    """What a SIGKILL mid-import leaves: the job 'running' (nothing could mark it), its upload, no item."""
    job.refresh_from_db()
    assert job.status == ImportJob.Status.RUNNING and job.attempts == 1
    assert files().exists(upload)
    assert not Item.objects.filter(study_id=job.study_id).exists()  # all or nothing: nothing committed


def import_ended(job_id: int) -> bool:
    return ImportJob.objects.get(pk=job_id).status in (ImportJob.Status.SUCCEEDED, ImportJob.Status.FAILED)


def assert_import_whole(job: ImportJob, upload: str) -> None:
    """The recovered import: done on its second attempt, every item once, the upload gone."""
    job.refresh_from_db()
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    assert (job.created, job.attempts, job.file_path) == (N_ITEMS, 2, ""), (job.created, job.attempts, job.file_path)
    items = Item.objects.filter(study_id=job.study_id)
    assert items.count() == N_ITEMS
    assert not items.values("external_id").annotate(n=Count("pk")).filter(n__gt=1).exists()
    assert not files().exists(upload) and stored_names("uploads") == []


def labelled_export_job(study: Study) -> ExportJob:
    """N_LABELLED items with three labels each and an export job of them (the caller enqueues it)."""
    import_items(
        study=study,
        stream=io.BytesIO("".join(json.dumps(verification_item(f"e-{n}")) + "\n" for n in range(N_LABELLED)).encode()),
        fmt="jsonl",
    )
    labels = "".join(
        json.dumps({"item": f"e-{n}", "annotator": f"w{k}", "label": "supported", "justification": "x" * 400}) + "\n"
        for n in range(N_LABELLED)
        for k in range(3)
    )
    import_annotations(study=study, stream=io.BytesIO(labels.encode()), fmt="jsonl")
    return ExportJob.objects.create(study=study, file_format="csv")


def export_is_writing(job_id: int, log: Path) -> bool:
    """The worker logging to `log` was started with hold="export" and has stopped there, its first
    chunk in the `.partial` file (tests/support/held_worker.py)."""
    return is_held(log) and any(path.stat().st_size > 0 for path in scratch_dir("exports").glob(f"{job_id}-*.partial"))


def assert_killed_export_left_a_partial_file(job: ExportJob) -> None:
    job.refresh_from_db()
    assert job.status == ExportJob.Status.RUNNING and job.file_path == ""
    assert list(scratch_dir("exports").glob(f"{job.pk}-*.partial"))  # what the dead worker left


def export_ended(job_id: int) -> bool:
    return ExportJob.objects.get(pk=job_id).status in (ExportJob.Status.SUCCEEDED, ExportJob.Status.FAILED)


def assert_export_whole(job: ExportJob) -> None:
    """The recovered export: done on its second attempt, every annotation once, no partial file left."""
    job.refresh_from_db()
    assert job.status == ExportJob.Status.SUCCEEDED, job.error
    assert (job.rows, job.attempts) == (3 * N_LABELLED, 2)
    with files().open(job.file_path, "rb") as exported:
        rows = list(csv.DictReader(io.TextIOWrapper(exported, encoding="utf-8", newline="")))
    assert len(rows) == 3 * N_LABELLED
    assert len({(row["item"], row["annotator"]) for row in rows}) == 3 * N_LABELLED
    assert stored_names("exports") == [job.file_path] and list(scratch_dir("exports").iterdir()) == []
