"""Proof on this machine that Claimlab scales out (issue 16 §4): two web hosts, two workers, nothing shared on disk.

Two gunicorn "hosts" on two ports, two RQ workers, one PostgreSQL database (made for
this test and dropped after), one Redis and a moto S3 server as the object store; each
process has its own working directory, var dir and temp dir. Through host A the
researcher uploads 50,000 items and a worker imports them; through host B, earlier
labels (so that the export is big enough to be caught mid-write); then 20 API
annotators label on both hosts while, through host B, the researcher asks for an
export; the worker writing it is killed -9, the other worker sees it gone and writes
the export again by itself; the dead worker's host, restarted (`manage.py
resume_stale_jobs`, as `make serve` runs first), removes the partial file it left; host
A serves the download (a redirect to the bucket).

Checks: no item over N, distinct annotators per item, every full item exactly N; the
export holds every annotation once; neither web host's var dir was ever seen holding a file
(polled all along: not the upload, not the export); one request id runs from host A's log to
the importing worker's; the workers' scratch dirs are empty at the end; the bucket holds
only the export (uploads deleted once imported).

Deselect it locally with `-m "not scaleout"`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
import signal
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.conftest import verification_item
from tests.support.redis_server import redis_server, rq_environment
from tests.support.s3 import keys, moto_server, s3_client, s3_environment
from tests.support.scale_out import (
    Annotators,
    DiskWatch,
    Machine,
    Multipart,
    call,
    end_all,
    production_environment,
    scratch_database,
    wait_for_job,
)
from tests.support.worker import kill

#: A bucket of this test's own: moto keeps the buckets of earlier tests in the same process.
BUCKET = f"claimlab-scale-{secrets.token_hex(4)}"

pytestmark = [pytest.mark.scaleout, pytest.mark.slow]

SLUG = "scale-out"
N = 3
N_ITEMS = 50_000
N_LABELLED = 5_000  # items given N earlier labels each (imported through host B): a multi-second export
N_ANNOTATORS = 20
LABELLING_SECONDS = 4.0  # annotators label this long before the export is asked for (and on during it)
STALE_SECONDS = 2  # CLAIMLAB_JOB_STALE_SECONDS: a killed worker's job is stale this soon

#: Run once by `manage.py shell -c`: the migration, then the accounts and the study (one process start, not two).
SETUP = """
import json
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from accounts.services import issue_token
from annotation.members.services import add_members
from annotation.studies.services import create_study
User = get_user_model()
researcher = User.objects.create(username="scale-researcher", password=make_password({password!r}))
annotators = User.objects.bulk_create([User(username=f"scale-annotator-{{k:02d}}", password="!") for k in range({n})])
study = create_study(slug={slug!r}, name="Scale-out", kind="verification", annotators_per_item={per_item},
                     created_by=researcher)
add_members(study=study, usernames=[user.username for user in annotators], role="annotator")
print(json.dumps([issue_token(user=user, name="scale-out").key for user in annotators]))
"""


def items_file() -> bytes:
    return "".join(json.dumps(verification_item(f"i-{n:05d}")) + "\n" for n in range(N_ITEMS)).encode()


def earlier_labels_file() -> bytes:
    """N labels by imported identities on each of the last N_LABELLED items (annotators start after it)."""
    return "".join(
        json.dumps(
            {"item": f"i-{n:05d}", "annotator": f"earlier-{k}", "label": "supported", "justification": "x" * 300}
        )
        + "\n"
        for n in range(N_ITEMS - N_LABELLED, N_ITEMS)
        for k in range(N)
    ).encode()


def writing_export(workers: list[Machine], job_id: int) -> Machine | None:
    """The worker whose scratch folder holds this export's `.partial` file with bytes in it, if any."""
    for worker in workers:
        for path in (worker.var / "scratch" / "exports").glob(f"{job_id}-*.partial"):
            try:
                if path.stat().st_size > 0:
                    return worker
            except FileNotFoundError:
                continue
    return None


def scalar(db: psycopg.Connection, sql: str, params: tuple) -> Any:
    row = db.execute(sql, params).fetchone()
    assert row is not None, (sql, params)
    return row[0]


def database_annotations(db: psycopg.Connection) -> Counter:
    """(item, annotator pseudonym, label) of every annotation of the study, as the export names them."""
    rows = db.execute(
        "SELECT i.external_id, m.pseudonym, a.label FROM annotation_annotation a "
        "JOIN annotation_assignment s ON s.id = a.assignment_id JOIN annotation_item i ON i.id = s.item_id "
        "JOIN annotation_study st ON st.id = s.study_id "
        "JOIN annotation_studymember m ON m.study_id = s.study_id AND m.user_id = s.annotator_id "
        "WHERE st.slug = %s",
        (SLUG,),
    ).fetchall()
    return Counter(rows)


def assert_n_per_item(db: psycopg.Connection) -> int:
    """No item over N, every item's annotators distinct, its counter true, every full item exactly N;
    the number of full items."""
    per_item = db.execute(
        "SELECT i.external_id, i.slots_taken, count(s.id) FILTER (WHERE s.slot IS NOT NULL), "
        "count(DISTINCT s.annotator_id), count(s.id), count(s.id) FILTER (WHERE s.status = 'submitted') "
        "FROM annotation_item i JOIN annotation_study st ON st.id = i.study_id "
        "LEFT JOIN annotation_assignment s ON s.item_id = i.id WHERE st.slug = %s GROUP BY i.id",
        (SLUG,),
    ).fetchall()
    assert len(per_item) == N_ITEMS
    over = [row for row in per_item if row[2] > N or row[1] > N]
    assert over == [], over[:5]
    repeated = [row for row in per_item if row[3] != row[4]]
    assert repeated == [], repeated[:5]  # nobody twice on one item
    miscounted = [row for row in per_item if row[1] != row[2]]
    assert miscounted == [], miscounted[:5]
    full = [row for row in per_item if row[1] == N]
    assert all(row[2] == row[3] == N for row in full)
    done = [row for row in per_item if row[5] == N]
    assert all(row[4] == N for row in done)
    return len(done)


def test_two_hosts_two_workers_one_database_redis_and_bucket_share_nothing_on_disk_and_survive_a_killed_worker(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:
        phases[name] = round(time.monotonic() - started, 1)

    with scratch_database() as database_url, redis_server(tmp_path) as redis_url, moto_server() as endpoint:
        bucket = s3_client(endpoint)
        bucket.create_bucket(Bucket=BUCKET)  # its own: moto keeps other tests' buckets for the process
        env = production_environment(
            database_url,
            {
                **rq_environment(redis_url),
                **s3_environment(endpoint_url=endpoint, bucket=BUCKET),
                "CLAIMLAB_JOB_STALE_SECONDS": str(STALE_SECONDS),
            },
        )
        host_a, host_b = Machine(tmp_path, "host-a", env), Machine(tmp_path, "host-b", env)
        workers = [Machine(tmp_path, "worker-1", env), Machine(tmp_path, "worker-2", env)]
        machines = [host_a, host_b, *workers]
        migrating = Machine(tmp_path, "migrate", env)
        try:
            # Every process boots while the database is migrated; /readyz says when a host can serve.
            host_a.start_host()
            host_b.start_host()
            for worker in workers:
                worker.start_worker()
            password = "scale-out-" + "p" * 20
            tokens = json.loads(
                migrating.manage("shell", "-c", SETUP.format(password=password, n=N_ANNOTATORS, slug=SLUG, per_item=N))
                .strip()
                .splitlines()[-1]
            )
            phase("migrated and set up")
            host_a.wait_ready()
            host_b.wait_ready()
            phase("hosts ready")

            watch_folders = {f"{m.name}/var": m.var for m in machines} | {f"{m.name}/tmp": m.tmp for m in machines}
            with DiskWatch(watch_folders) as watch, psycopg.connect(database_url, autocommit=True) as db:
                status, issued = call(
                    host_a.base, "POST", "/api/auth/token/", body={"username": "scale-researcher", "password": password}
                )
                assert status == 201, issued
                researcher = issued["token"]

                # Host A takes the upload of 50,000 items; a worker imports it from the bucket.
                upload_id = f"scale-out-upload-{secrets.token_hex(6)}"  # as a load balancer would set it
                status, job = call(
                    host_a.base,
                    "POST",
                    f"/api/studies/{SLUG}/items/import",
                    researcher,
                    Multipart("file", "items.jsonl", items_file(), "application/x-ndjson"),
                    request_id=upload_id,
                )
                assert status == 202, job
                job = wait_for_job(host_a.base, f"/api/studies/{SLUG}/imports/{job['id']}", researcher, machines)
                assert (job["status"], job["created"]) == ("succeeded", N_ITEMS), job
                # One request id from the upload on host A to the log of the worker that imported it.
                assert [m.name for m in machines if upload_id in m.log.read_text()] in (
                    ["host-a", "worker-1"],
                    ["host-a", "worker-2"],
                )
                phase("50,000 items imported")

                # Host B takes a file of earlier labels (a background import as well).
                status, job = call(
                    host_b.base,
                    "POST",
                    f"/api/studies/{SLUG}/annotations/import",
                    researcher,
                    Multipart("file", "labels.jsonl", earlier_labels_file(), "application/x-ndjson"),
                )
                assert status == 202, job
                job = wait_for_job(host_b.base, f"/api/studies/{SLUG}/imports/{job['id']}", researcher, machines)
                assert (job["status"], job["created"]) == ("succeeded", N * N_LABELLED), str(job) + "\n".join(
                    f"{worker.name}: ...{worker.log.read_text()[-3000:]}" for worker in workers
                )
                phase("earlier labels imported")

                annotators = Annotators([host_a.base, host_b.base], tokens, SLUG)
                annotators.start()
                time.sleep(LABELLING_SECONDS)
                labels_before_export = annotators.labels  # reported: how many more came during the export

                # Through host B the researcher asks for the export; the worker writing it is killed -9.
                status, export = call(
                    host_b.base, "POST", f"/api/studies/{SLUG}/exports", researcher, {"format": "csv"}
                )
                assert status == 202, export
                export_path = f"/api/studies/{SLUG}/exports/{export['id']}"
                deadline = time.monotonic() + 120
                while (victim := writing_export(workers, export["id"])) is None:
                    assert time.monotonic() < deadline, "no worker started writing the export: " + "\n".join(
                        f"{worker.name}: ...{worker.log.read_text()[-3000:]}" for worker in workers
                    )
                    for machine in machines:
                        machine.alive()
                    time.sleep(0.02)
                survivor = next(worker for worker in workers if worker is not victim)
                # The survivor is paused while the annotators stop, so that the export it re-runs sees
                # every label (else the rerun could start before the last ones and miss them).
                os.killpg(survivor.alive().pid, signal.SIGSTOP)
                try:
                    kill(victim.alive())
                    phase("writing worker killed")
                    annotators.stop()
                    phase("annotators stopped")
                    left = list((victim.var / "scratch" / "exports").glob(f"{export['id']}-*.partial"))
                    assert left, "the killed worker left no partial export: it was not killed mid-write"
                    status, running = call(host_b.base, "GET", export_path, researcher)
                    assert (running["status"], running["download_url"]) == ("running", None), running
                    expected = database_annotations(db)  # nobody labels any more: the export must hold these
                finally:
                    os.killpg(survivor.alive().pid, signal.SIGCONT)
                assert annotators.unexpected == Counter(), annotators.unexpected
                assert all(annotators.labels_by_host[base] > 0 for base in (host_a.base, host_b.base))

                # No command and no cron: the surviving worker sees the killed one gone (its pid is dead
                # on this host) and queues the export again, then writes it.
                done = wait_for_job(host_b.base, export_path, researcher, [host_a, host_b, survivor])
                phase("export written by the other worker")
                survivor_log = survivor.log.read_text()
                assert f"export job {export['id']}: worker died (attempt 1); queued again" in survivor_log
                assert f"export job {export['id']} finished" in survivor_log
                assert scalar(db, "SELECT attempts FROM annotation_exportjob WHERE id = %s", (export["id"],)) == 2

                # The dead worker's host comes back as `make serve` starts one: resume_stale_jobs first, which
                # removes the partial file the killed worker left on this host's disk (no other host can).
                assert list((victim.var / "scratch" / "exports").iterdir())
                recovered = victim.manage("resume_stale_jobs")
                assert "0 stale job(s) handled" in recovered, recovered
                assert not list((victim.var / "scratch" / "exports").iterdir())  # its partial file removed

                assert (done["status"], done["rows"]) == ("succeeded", sum(expected.values())), done
                assert scalar(db, "SELECT attempts FROM annotation_exportjob WHERE id = %s", (export["id"],)) == 2
                assert f"export job {export['id']} finished" in survivor.log.read_text()

                # Host A serves the download: a redirect to a presigned URL of the bucket, not the bytes.
                status, redirect = call(host_a.base, "GET", done["download_url"], researcher)
                assert status == 302, redirect
                assert redirect["location"].startswith(f"{endpoint}/{BUCKET}/exports/{export['id']}-")
                with urllib.request.urlopen(redirect["location"], timeout=60) as response:
                    exported = response.read()
                rows = list(csv.DictReader(io.StringIO(exported.decode("utf-8"))))
                assert Counter((row["item"], row["annotator"], row["label"]) for row in rows) == expected
                assert len(rows) == sum(expected.values()) == N * N_LABELLED + annotators.labels
                complete = assert_n_per_item(db)
                assert complete >= N_LABELLED
                phase("checked")
        finally:
            end_all(machines)

        # Nothing on one host's disk was needed by another: the files went through the bucket.
        for host in (host_a, host_b):
            assert watch.seen[f"{host.name}/var"] == set(), watch.seen[f"{host.name}/var"]
            assert host.files(host.tmp) == []  # the request's upload temp file (host A and B) is gone
        for worker in workers:
            seen = watch.seen[f"{worker.name}/var"]
            assert all(name.startswith("scratch/") for name in seen), seen
            assert worker.files(worker.var) == []
        downloads = [
            name for worker in workers for name in watch.seen[f"{worker.name}/var"] if name.endswith(".download")
        ]
        assert downloads  # the imports were read from a copy downloaded to the worker's own scratch
        assert keys(bucket, BUCKET) == [
            urlsplit(redirect["location"]).path.removeprefix(f"/{BUCKET}/")
        ]  # uploads deleted
    phase("stopped")
    print(
        f"scale-out phases (s since start): {phases}; {annotators.labels} API labels "
        f"({annotators.labels - labels_before_export} while the export ran), {sum(annotators.retried.values())} "
        "claim contentions retried"
    )
