"""Issue 34: the Hugging Face dataset as a background export job (report page and API).

The job's zip holds exactly what `manage.py export_dataset --format hf` writes for the same study:
the same file names, the same README.md card and the same parquet tables (read with pyarrow and
`datasets`). annotation knows the format only through its registry (annotation/lib/export_formats.py),
which metaeval fills when it starts.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.lib.export_formats import export_format
from annotation.lib.storage import scratch_dir, stored_names
from annotation.members.services import add_members
from annotation.models import ExportJob
from annotation.studies.services import create_study
from annotation.transfer.services.export_jobs import request_export
from annotation.transfer.services.export_runner import run_export_job
from annotation.transfer.services.recovery import recover_lost_jobs
from metaeval import client as client_module
from metaeval.dataset_export import archive
from metaeval.dataset_export.archive import write_hf_zip
from tests.support.factscore_pref import make_study

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def var(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"


def downloaded(response) -> bytes:
    return b"".join(response.streaming_content)


def command_folder(study, tmp_path: Path) -> Path:
    folder = tmp_path / "cli"
    call_command("export_dataset", study.slug, str(folder), "--format", "hf")
    return folder


def files_of(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())


def assert_same_dataset(zipped: bytes, folder: Path, tmp_path: Path) -> None:
    """The zip, unpacked, is the folder export_dataset wrote: file list, card text, parquet tables."""
    unpacked = tmp_path / "unzipped"
    with zipfile.ZipFile(io.BytesIO(zipped)) as archive_file:
        assert sorted(archive_file.namelist()) == files_of(folder)
        archive_file.extractall(unpacked)
    assert "README.md" in files_of(folder) and any(name.endswith(".parquet") for name in files_of(folder))
    assert (unpacked / "README.md").read_text(encoding="utf-8") == (folder / "README.md").read_text(encoding="utf-8")
    for name in files_of(folder):
        if name.endswith(".parquet"):
            ours, theirs = pq.read_table(unpacked / name), pq.read_table(folder / name)
            assert ours.schema == theirs.schema and ours.equals(theirs), name
    for config in (path.name for path in (folder / "data").iterdir()):
        ours = datasets.load_dataset(str(unpacked), config, cache_dir=str(tmp_path / "c1"))["train"]
        theirs = datasets.load_dataset(str(folder), config, cache_dir=str(tmp_path / "c2"))["train"]
        assert ours.features == theirs.features and ours.to_list() == theirs.to_list(), config


def test_metaeval_registers_the_hf_format_with_the_export_runner():
    registered = export_format("hf")
    assert registered is not None and registered.content_type == "application/zip"
    assert export_format("xlsx") is None


def test_the_api_queues_the_hf_export_and_its_zip_is_what_export_dataset_writes(client, researcher, tmp_path):
    study = make_study(researcher=researcher)
    client.force_login(researcher)
    response = client.post(
        reverse("api-export-create", args=[study.slug]), {"format": "hf"}, content_type="application/json"
    )
    assert response.status_code == 202
    job = response.json()
    assert (job["status"], job["format"], job["download_url"]) == ("queued", "hf", None)
    assert response["Location"] == reverse("api-export-job", args=[study.slug, job["id"]])

    run_export_job(job_id=job["id"])
    done = client.get(response["Location"]).json()
    assert (done["status"], done["rows"], done["error"]) == ("succeeded", 360, "")
    file = client.get(done["download_url"])
    assert file.status_code == 200 and file["Content-Type"] == "application/zip"
    assert file["Content-Disposition"] == f'attachment; filename="{study.slug}-hf-dataset.zip"'
    folder = command_folder(study, tmp_path)
    assert {path.parent.name for path in (folder / "data").rglob("*.parquet")} == {
        "annotations",
        "items",
        "preference_pairs",
    }
    assert_same_dataset(downloaded(file), folder, tmp_path)
    assert list(scratch_dir("exports").iterdir()) == []  # no folder, no .partial left behind


def test_the_report_page_starts_the_hf_export_and_links_its_job(
    client, researcher, loaded_verification_study, tmp_path
):
    study = loaded_verification_study
    client.force_login(researcher)
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'id="hf-export-start"' in page and "Hugging Face dataset (zip)" in page
    assert f'action="{reverse("annotation:study_export_request", args=[study.slug])}"' in page
    assert "csrfmiddlewaretoken" in page.split('id="hf-export"')[1].split("</form>")[0]
    assert 'id="hf-export-latest"' not in page

    response = client.post(reverse("annotation:study_export_request", args=[study.slug]), {"format": "hf"})
    job = ExportJob.objects.get()
    assert job.file_format == "hf" and response.url == reverse("annotation:export_job", args=[study.slug, job.pk])
    waiting = client.get(response.url).content.decode()
    assert "Queued" in waiting and 'http-equiv="refresh"' in waiting and "Hugging Face dataset" in waiting
    assert 'id="hf-export-latest"' in client.get(reverse("metaeval:report", args=[study.slug])).content.decode()

    run_export_job(job_id=job.pk)
    ready = client.get(response.url).content.decode()
    assert 'id="export-download"' in ready and "Download the dataset (zip)" in ready
    report = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    download = reverse("annotation:export_job_download", args=[study.slug, job.pk])
    assert download in report.split('id="hf-export-latest"')[1]
    assert_same_dataset(downloaded(client.get(download)), command_folder(study, tmp_path), tmp_path)


def test_hf_exports_are_for_the_studys_researchers_only(client, make_user, annotator, loaded_verification_study):
    study = loaded_verification_study
    job = request_export(study=study, file_format="hf")
    run_export_job(job_id=job.pk)
    other = create_study(slug="other", name="Other", kind="verification")
    outsider = make_user("olga")
    add_members(study=other, usernames=[outsider.username], role="researcher")
    reads = [
        reverse("annotation:export_job", args=[study.slug, job.pk]),
        reverse("annotation:export_job_download", args=[study.slug, job.pk]),
        reverse("api-export-job", args=[study.slug, job.pk]),
        reverse("api-export-download", args=[study.slug, job.pk]),
        reverse("metaeval:report", args=[study.slug]),
    ]

    def start(route: str, **extra) -> int:
        return client.post(route, {"format": "hf"}, **extra).status_code

    api, page = (
        reverse("api-export-create", args=[study.slug]),
        reverse("annotation:study_export_request", args=[study.slug]),
    )
    client.force_login(outsider)
    assert [client.get(route).status_code for route in reads] == [404] * 5
    assert (start(api, content_type="application/json"), start(page)) == (404, 404)
    client.force_login(annotator)
    assert [client.get(route).status_code for route in reads] == [403] * 5
    assert (start(api, content_type="application/json"), start(page)) == (403, 403)
    assert ExportJob.objects.count() == 1


def test_a_newer_hf_export_replaces_the_older_zip_and_leaves_other_formats(loaded_verification_study):
    study = loaded_verification_study
    first, csv, second = (request_export(study=study, file_format=fmt) for fmt in ("hf", "csv", "hf"))
    for job in (first, csv, second):
        run_export_job(job_id=job.pk)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.file_path == "" and second.file_path.endswith("-verif-hf-dataset.zip")
    assert len(stored_names("exports")) == 2


def test_a_failed_hf_build_says_why_and_leaves_no_file(loaded_verification_study, monkeypatch):
    def full_disk(study, folder, **options):
        (folder / "data").mkdir(parents=True)
        raise OSError("No space left on device")

    monkeypatch.setattr(archive, "write_hf_dataset", full_disk)
    job = request_export(study=loaded_verification_study, file_format="hf")
    run_export_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.error, job.file_path) == ("failed", "OSError: No space left on device", "")
    assert stored_names("exports") == [] and list(scratch_dir("exports").iterdir()) == []


def test_a_killed_hf_export_is_cleaned_up_queued_again_and_finishes(
    loaded_verification_study, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """What a worker killed mid-build leaves: the job running for a worker that is gone, the dataset
    folder (and its `.partial`) and a `.partial` zip in the scratch folder. The generic export recovery
    removes them (they are named after the job) and queues the job again; the next run finishes it."""
    settings.JOB_MAX_ATTEMPTS = 3
    job = request_export(study=loaded_verification_study, file_format="hf")
    seen: list[Path] = []
    real = archive.write_hf_dataset
    monkeypatch.setattr(
        archive,
        "write_hf_dataset",
        lambda study, folder, **options: seen.append(folder) or real(study, folder, **options),
    )
    scratch = scratch_dir("exports")
    zip_name = f"{job.pk}-0123abcd-verif-hf-dataset.zip"
    for leftover in (f"{zip_name}.d/data/items", f"{zip_name}.d.partial/data/annotations"):
        (scratch / leftover).mkdir(parents=True)
        (scratch / leftover / "train-00000-of-00001.parquet").write_bytes(b"PAR1 half")
    (scratch / f"{zip_name}.partial").write_bytes(b"PK half a zip")
    ExportJob.objects.filter(pk=job.pk).update(status="running", worker="killed-worker", attempts=1)

    with django_capture_on_commit_callbacks(execute=False) as queued:
        [recovered] = recover_lost_jobs({"killed-worker"})
    assert recovered.pk == job.pk and len(queued) == 1
    job.refresh_from_db()
    assert job.status == "queued" and list(scratch.iterdir()) == []

    run_export_job(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.rows) == ("succeeded", 6)
    assert [folder.name.split("-", 1)[0] for folder in seen] == [str(job.pk)]  # its folder was named after the job
    assert list(scratch.iterdir()) == []


def test_write_hf_zip_refuses_nothing_the_command_accepts(loaded_verification_study, tmp_path):
    """Written whole: the zip is there and nothing else beside it."""
    target = tmp_path / "out" / "9-x-verif-hf-dataset.zip"
    target.parent.mkdir()
    assert write_hf_zip(loaded_verification_study, target) == 6
    assert [path.name for path in target.parent.iterdir()] == [target.name]
    with zipfile.ZipFile(target) as archive_file:
        assert "README.md" in archive_file.namelist()


def test_the_notebook_client_asks_for_the_hf_export(loaded_verification_study, researcher, monkeypatch, tmp_path):
    """metaeval.client.hf_dataset: POST format hf, wait for the job, unzip the download (the HTTP calls
    go to the Django test client here; the live-server client tests cover the transport)."""
    from django.test import Client

    web = Client()
    web.force_login(researcher)
    calls: list[tuple[str, str, dict | None]] = []

    def request(self, method, path, params=None, *, body=None):
        calls.append((method, path, body))
        response = web.post(path, body, content_type="application/json") if method == "POST" else web.get(path)
        if response.status_code >= 400:
            raise client_module.ClaimlabError(response.status_code, response.json()["detail"])
        return downloaded(response) if response.streaming else response.content

    def worker_turn(seconds: float) -> None:
        for job in ExportJob.objects.filter(status=ExportJob.Status.QUEUED):
            run_export_job(job_id=job.pk)

    monkeypatch.setattr(client_module.Claimlab, "_request", request)
    monkeypatch.setattr(client_module.time, "sleep", worker_turn)
    lab = client_module.Claimlab("http://testserver", token="t")
    folder = lab.hf_dataset(loaded_verification_study.slug, tmp_path / "hf")
    assert calls[0] == ("POST", "/api/studies/verif/exports", {"format": "hf"})
    assert files_of(folder) == files_of(command_folder(loaded_verification_study, tmp_path))
    with pytest.raises(ValueError, match="not an empty folder"):
        lab.hf_dataset(loaded_verification_study.slug, folder)


def test_the_licence_chosen_on_the_page_or_in_the_api_is_in_the_zips_card(client, researcher, tmp_path):
    """Stored on the job, so a job re-queued after a lost worker writes the same card."""
    study = make_study(researcher=researcher)
    client.force_login(researcher)
    response = client.post(
        reverse("api-export-create", args=[study.slug]),
        {"format": "hf", "license": "CC-BY-4.0"},
        content_type="application/json",
    )
    assert response.status_code == 202 and response.json()["license"] == "cc-by-4.0"
    run_export_job(job_id=response.json()["id"])
    done = client.get(response["Location"]).json()
    with zipfile.ZipFile(io.BytesIO(downloaded(client.get(done["download_url"])))) as zipped:
        card = zipped.read("README.md").decode()
    assert 'license: "cc-by-4.0"' in card
    page = client.get(reverse("metaeval:report", args=[study.slug])).content.decode()
    assert 'name="license"' in page and '<option value="mit">' in page
    client.post(reverse("annotation:study_export_request", args=[study.slug]), {"format": "hf", "license": "mit"})
    assert ExportJob.objects.latest("pk").license == "mit"


def test_an_unknown_licence_or_one_on_a_csv_export_is_refused_by_name(client, researcher):
    study = make_study(researcher=researcher)
    client.force_login(researcher)
    url = reverse("api-export-create", args=[study.slug])
    refused = client.post(url, {"format": "hf", "license": "llama9"}, content_type="application/json")
    assert refused.status_code == 400 and "licence 'llama9' is not one of" in refused.content.decode()
    on_csv = client.post(url, {"format": "csv", "license": "mit"}, content_type="application/json")
    assert on_csv.status_code == 400 and "Hugging Face dataset's card only" in on_csv.content.decode()
    assert not ExportJob.objects.exists()
