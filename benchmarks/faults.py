"""A fault matrix on one machine (issue 31): what each fault does to labels, answers and jobs.

The stack is the production-like one of docs/deploy.md, all on 127.0.0.1: gunicorn (started
as benchmarks/annotate_load.py starts it: production settings, the psycopg pool on
PostgreSQL) on PostgreSQL (`--db postgres`: a database of its own, `claimlab_faults`, made
fresh and dropped at the end) or on a SQLite file (`--db sqlite`), one `manage.py worker`
(the database queue, or RQ with `--queue rq`), a private redis-server (`REDIS_URL`: the
shared cache and the verifier endpoint limiter; the queue too with `--queue rq`), a moto
S3 server as the object store (uploads waiting for import, exports) and a fake
OpenAI-compatible endpoint (tests/support/fake_openai.py) for verifier runs.

Each row of the matrix is one fault, on a fresh labelling study: 20 API annotators (threads,
one token each, `--think` seconds between labels) label; after `--warmup` seconds a job
is queued (an item import, an export, a verifier run or a report build, by fault); once
the job runs, the fault hits it:

  web-worker       kill -9 of one gunicorn worker (its master starts another)      job: export
  worker-import    kill -9 of the background worker mid-import                     job: import
  worker-export    kill -9 of the background worker mid-export                     job: export
  worker-verifier  kill -9 of the background worker mid-verifier-chunk             job: verifier run
  worker-report    kill -9 of the background worker mid-report-build               job: report build
  postgres         restart of PostgreSQL (pg_ctlcluster ... restart)               job: import
  redis            redis-server stopped for `--outage` seconds, then started again  job: verifier run
  s3               the object store stopped for `--outage` seconds, then started    job: export
  sqlite-lock      a write lock held on the SQLite file for `--outage` seconds     job: import

A killed background worker is started again 2 s later, as a supervisor (systemd, `make
serve`'s loop) would; nothing else is done for the job: no `resume_stale_jobs` or
`resume_stale_runs` from cron. The annotators go on for `--after` seconds after the fault
ended, then stop; the row then waits until its job has ended and `/readyz` answers 200
again, at most `--deadline` seconds after the fault began (a job still running then is
reported as "not recovered" with its state).

Measured per row: labels acknowledged (200) to the clients; lost (acknowledged but not in
the database), duplicated (one annotator twice on an item), over N (an item with more than
N answers or slots); 5xx answers (500 / 503 / other), requests with no answer at all
(connection refused or reset, time-out); how long `/readyz` was not 200; the job's end
state; the recovery time (fault start until the job ended and `/readyz` is 200 again).
Baseline, in the same run with the same clients: each job kind once without a fault
("none" rows); a fault row's job time (queued to ended) is also given as a ratio of it.

Goal (issue 31): 0 lost, 0 duplicated, 0 over N, 0 x 5xx, and recovery within the
fault-free job time + the outage + 10 s. The last line says which rows met it.

    python benchmarks/faults.py [--db postgres|sqlite] [--faults web-worker,postgres] [--annotators 20]
        [--queue database|rq] [--outage 30] [--deadline 180]

PostgreSQL's restart restarts the machine's cluster (every database on it): needs root or
the postgres user. Faults that do not apply to the chosen database are skipped
(postgres on SQLite, sqlite-lock on PostgreSQL).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
from annotate_load import (  # noqa: E402 (the benchmarks folder is not a package)
    LABELS,
    N,
    free_port,
    issue_tokens,
    request,
    server_env,
    setup_study,
    start_server,
    stop_servers,
    vacuum,
)

PG_SERVER = "postgres://postgres@127.0.0.1:5432"
PG_DATABASE = "claimlab_faults"
BUCKET = "claimlab-faults"
SLUG = "bench-faults"
ENDPOINT = "fake"  # the operator endpoint (CLAIMLAB_ENDPOINTS) of the verifier runs
WORKER_RESTART_SECONDS = 2.0  # a supervisor's restart delay


@dataclass(frozen=True)
class Fault:
    name: str
    what: str
    job: str  # import | export | verifier | report
    databases: tuple[str, ...] = ("postgres", "sqlite")


FAULTS = [
    Fault("web-worker", "kill -9 of a gunicorn worker", "export"),
    Fault("worker-import", "kill -9 of the worker mid-import", "import"),
    Fault("worker-export", "kill -9 of the worker mid-export", "export"),
    Fault("worker-verifier", "kill -9 of the worker mid-verifier-chunk", "verifier"),
    Fault("worker-report", "kill -9 of the worker mid-report-build", "report"),
    Fault("postgres", "restart of PostgreSQL", "import", ("postgres",)),
    Fault("redis", "Redis stopped for the outage", "verifier"),
    Fault("s3", "object store stopped for the outage", "export"),
    Fault("sqlite-lock", "SQLite write lock held for the outage", "import", ("sqlite",)),
]
BY_NAME = {fault.name: fault for fault in FAULTS}


# --- the stack ------------------------------------------------------------------------------------------------


class Redis:
    """A private redis-server on a fixed port, stoppable and startable again (append-only file: it keeps its data)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")
        options = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes"]
        self.process = subprocess.Popen(
            [binary, *options, "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        import redis

        client = redis.Redis.from_url(self.url)
        for _ in range(200):
            with contextlib.suppress(redis.ConnectionError):
                client.ping()
                client.close()
                return
            time.sleep(0.05)
        raise SystemExit(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)


class ObjectStore:
    """moto's S3 server in this process on a fixed port; its buckets live on while it is stopped."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server: Any = None

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


class Worker:
    """`manage.py worker` in a session of its own, under a supervisor (a side thread) that starts it again
    2 s after it exited, as systemd's Restart=always would; `kill` is kill -9 of it and everything it
    started (RQ's work horse too). `exits` lists the exit codes seen (the supervisor's restarts)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.process: subprocess.Popen | None = None
        self.exits: list[int] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.supervisor = threading.Thread(target=self._supervise, daemon=True)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), "worker", "--no-reload"],
            cwd=REPO,
            env=self.env,
            stdout=self.log.open("a"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        if not self.supervisor.is_alive():
            self.supervisor.start()

    def _supervise(self) -> None:
        while not self.closing.wait(0.5):
            with self.lock:
                code = self.process.poll() if self.process is not None else None
                if code is None:
                    continue
                self.exits.append(code)
            if self.closing.wait(WORKER_RESTART_SECONDS):
                return
            with self.lock:
                self.start()

    def kill(self) -> None:
        from tests.support.worker import kill

        with self.lock:
            if self.process is not None and self.process.poll() is None:
                kill(self.process)

    def close(self) -> None:
        self.closing.set()
        if self.supervisor.is_alive():
            self.supervisor.join(10)
        self.kill()


def gunicorn_workers(master: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{master}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def postgres_version() -> str:
    versions = sorted(Path("/etc/postgresql").iterdir(), key=lambda path: int(path.name) if path.name.isdigit() else 0)
    if not versions:
        raise SystemExit("no PostgreSQL cluster under /etc/postgresql")
    return versions[-1].name


# --- the clients ----------------------------------------------------------------------------------------------


class Annotators:
    """API annotators labelling until stopped; every answer counted by status, every acknowledged label kept.

    A failed submit (5xx, or no answer) is sent again for the same assignment up to 3 times, 1 s
    apart, as the workbench's background submit retries; a 4xx drops the assignment.
    """

    def __init__(self, base: str, tokens: list[str], slug: str, think: float) -> None:
        self.base, self.tokens, self.slug, self.think = base, tokens, slug, think
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.acked: list[int] = []
        self.statuses: Counter[int] = Counter()
        self.no_answer: Counter[str] = Counter()
        self.threads = [threading.Thread(target=self._label, args=(k,), daemon=True) for k in range(len(tokens))]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        deadline = time.monotonic() + 90  # request() times out after 60 s
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))

    def _count(self, status: int) -> None:
        with self.lock:
            self.statuses[status] += 1

    def _label(self, k: int) -> None:
        token, rng = self.tokens[k], random.Random(k)
        current: int | None = None
        tries = 0
        while not self.stop_event.is_set():
            submitting = current is not None
            try:
                if current is None:
                    status, data, _ = request(self.base, "POST", f"/api/studies/{self.slug}/assignments/next", token)
                    self._count(status)
                    if status == 200:
                        current = data["assignment"]["id"]
                    else:
                        self.stop_event.wait(0.5)
                    continue
                status, data, _ = request(
                    self.base,
                    "POST",
                    f"/api/assignments/{current}/submit",
                    token,
                    {"label": rng.choice(LABELS), "next": True},
                )
                self._count(status)
                if status == 200:
                    with self.lock:
                        self.acked.append(current)
                    following = data.get("next")
                    current = following["assignment"]["id"] if following else None
                    tries = 0
                    self.stop_event.wait(self.think)
                elif status >= 500 and tries < 3:
                    tries += 1
                    self.stop_event.wait(1.0)
                else:
                    current, tries = None, 0
                    self.stop_event.wait(0.5)
            except Exception as exc:  # no answer: refused, reset, timed out (or an answer that was not JSON)
                with self.lock:
                    self.no_answer[type(exc).__name__] += 1
                if submitting and tries < 3:
                    tries += 1
                else:
                    current, tries = None, 0
                self.stop_event.wait(1.0)


class Probe:
    """GET /readyz every half second from a side thread: (seconds since `origin`, status; 0 = no answer)."""

    def __init__(self, base: str, origin: float) -> None:
        self.base, self.origin = base, origin
        self.samples: list[tuple[float, int]] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Probe:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join(30)

    def _run(self) -> None:
        import urllib.request

        while not self.stop_event.is_set():
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=5) as response:
                    status = response.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            except Exception:
                status = 0
            self.samples.append((time.monotonic() - self.origin, status))
            self.stop_event.wait(0.5)

    @property
    def ready(self) -> bool:
        return bool(self.samples) and self.samples[-1][1] == 200

    def not_ready_seconds(self) -> float:
        return sum(0.5 for _, status in self.samples if status != 200)

    def ready_again(self) -> float | None:
        """When /readyz last turned 200 (seconds since origin); None if it is not 200 now."""
        if not self.ready:
            return None
        last_bad = max((t for t, status in self.samples if status != 200), default=None)
        if last_bad is None:
            return 0.0
        return min(t for t, status in self.samples if t > last_bad)


# --- the jobs -------------------------------------------------------------------------------------------------


class Job:
    """One background job of a kind, queued through the services the API calls; its state read from the database."""

    def __init__(self, kind: str, number: int, fixtures: Fixtures) -> None:
        from django.conf import settings
        from django.utils import timezone

        self.kind, self.number, self.fixtures = kind, number, fixtures
        self.pk = 0  # the job's row (import, export, verifier run); a report build has none
        self.options: Any = None
        self.database_queue = "django_tasks_db" in str(settings.TASKS["default"]["BACKEND"])
        self.queued_at = timezone.now()

    def queue(self) -> None:
        from django.utils import timezone

        self.queued_at = timezone.now()
        if self.kind == "import":
            from django.core.files.uploadedfile import SimpleUploadedFile

            from annotation.studies.services import create_study
            from annotation.transfer.services.import_jobs import submit_import

            study = create_study(slug=f"{SLUG}-import-{self.number}", name="Fault import", kind="verification")
            upload = SimpleUploadedFile("items.jsonl", self.fixtures.import_file, content_type="application/x-ndjson")
            self.pk = submit_import(study=study, what="items", upload=upload, file_format="jsonl").pk
        elif self.kind == "export":
            from annotation.transfer.services.export_jobs import request_export

            self.pk = request_export(study=self.fixtures.labelled_study(), file_format="csv").pk
        elif self.kind == "verifier":
            from metaeval.verifiers.services import start_run
            from metaeval.verifiers.services.verifiers import create_verifier

            verifier = create_verifier(
                study=self.fixtures.labelled_study(),
                name=f"fault-{self.number}",
                preset="veriscore_ternary",
                model="fake-model",
                endpoint=ENDPOINT,
                concurrency=4,
                timeout=10.0,
                retries=2,
            )
            self.pk = start_run(verifier=verifier, limit=self.fixtures.verifier_items).pk
        else:
            from metaeval import selectors
            from metaeval.reporting.cache import request_refresh
            from metaeval.reporting.options import ReportOptions

            study = self.fixtures.labelled_study()
            self.options = ReportOptions(seed=self.number)  # options of its own: a build nothing has cached
            request_refresh(study, self.options, selectors.report_fingerprint(study))

    def state(self) -> str:
        """queued / running / succeeded / failed / ... as the database says; "unknown" when it cannot be read."""
        from django.db import connection

        try:
            if self.kind == "import":
                from annotation.models import ImportJob

                return str(ImportJob.objects.get(pk=self.pk).status)
            if self.kind == "export":
                from annotation.models import ExportJob

                return str(ExportJob.objects.get(pk=self.pk).status)
            if self.kind == "verifier":
                from metaeval.models import VerifierRun

                return str(VerifierRun.objects.get(pk=self.pk).status)
            from metaeval.reporting.cache import snapshot_status

            if snapshot_status(self.fixtures.labelled_study(), self.options)["current"]:
                return "succeeded"
            if not self.database_queue:
                return "queued"
            from django_tasks_db.models import DBTaskResult

            task = (  # the newest build task is this job's: one row is queued at a time
                DBTaskResult.objects.filter(task_path__endswith="refresh_report", enqueued_at__gte=self.queued_at)
                .order_by("-enqueued_at")
                .values_list("status", flat=True)
                .first()
            )
            return {"RUNNING": "running", "FAILED": "failed"}.get(str(task), "queued")
        except Exception:
            connection.close()
            return "unknown"

    @staticmethod
    def ended(state: str) -> bool:
        return state in ("succeeded", "failed", "stopped", "cancelled", "canceled")

    def running(self, state: str) -> bool:
        # On RQ a report build's task cannot be seen from here: queued is taken as running (an idle worker starts it).
        return state == "running" or (self.kind == "report" and not self.database_queue and state == "queued")


class JobWatch:
    """The job's state every 0.2 s from a side thread (its own database connection); when it was first seen ended."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.state = "queued"
        self.ended_at: float | None = None
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> JobWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join(60)

    def _run(self) -> None:
        from django.db import connection

        try:
            while not self.stop_event.is_set():
                self.state = self.job.state()
                if self.ended_at is None and Job.ended(self.state):
                    self.ended_at = time.monotonic()
                self.stop_event.wait(0.2)
        finally:
            connection.close()

    def wait(self, condition: Callable[[], bool], deadline: float) -> None:
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.2)


@dataclass
class Fixtures:
    """What the jobs work on, made once per run."""

    import_items: int
    labelled_items: int
    verifier_items: int
    import_file: bytes = b""

    def make(self) -> None:
        import io

        from annotation.models import Study
        from annotation.studies.services import create_study
        from annotation.transfer.services.annotation_import import import_annotations
        from annotation.transfer.services.item_import import import_items

        rng = random.Random(7)
        self.import_file = "".join(
            json.dumps(
                {
                    "id": f"i-{n:06d}",
                    "claim": f"Imported claim {n}: "
                    + " ".join(rng.choice(("river", "court", "1980")) for _ in range(8)),
                    "context": "A sentence.",
                    "evidence": [{"text": "A passage. " * 10, "title": "Doc", "url": f"https://example.org/{n}"}],
                }
            )
            + "\n"
            for n in range(self.import_items)
        ).encode()
        Study.objects.filter(slug=f"{SLUG}-labelled").delete()
        study = create_study(slug=f"{SLUG}-labelled", name="Fault jobs", kind="verification", annotators_per_item=N)
        items = "".join(
            json.dumps({"id": f"e-{n}", "claim": f"Claim {n} is true.", "context": "A sentence."}) + "\n"
            for n in range(self.labelled_items)
        )
        import_items(study=study, stream=io.BytesIO(items.encode()), fmt="jsonl")
        labels = "".join(
            json.dumps(
                {"item": f"e-{n}", "annotator": f"w{k}", "label": LABELS[(n + k) % 3], "justification": "x" * 200}
            )
            + "\n"
            for n in range(self.labelled_items)
            for k in range(N)
        )
        import_annotations(study=study, stream=io.BytesIO(labels.encode()), fmt="jsonl")

    def labelled_study(self) -> Any:
        from annotation.models import Study

        return Study.objects.get(slug=f"{SLUG}-labelled")


# --- one row --------------------------------------------------------------------------------------------------


@dataclass
class Row:
    fault: str
    job: str
    labels: int = 0
    lost: int = 0
    duplicated: int = 0
    over_n: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    no_answer: int = 0
    not_ready: float = 0.0
    state_at_fault: str = ""
    end_state: str = ""
    job_seconds: float | None = None  # queued until ended
    recovery: float | None = None  # fault start until the job ended and /readyz is 200
    outage: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def five_xx(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)


def label_checks(slug: str, acked: list[int]) -> tuple[int, int, int]:
    """(lost, duplicated, over N) of the study's labels against what the clients were told was stored."""
    from django.db.models import Count, Q

    from annotation.models import Annotation, Assignment, Item

    stored = set(Annotation.objects.filter(assignment__study__slug=slug).values_list("assignment_id", flat=True))
    lost = sum(1 for pk in set(acked) if pk not in stored)
    duplicated = (
        Assignment.objects.filter(study__slug=slug, status="submitted")
        .values("item_id", "annotator_id")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
        .count()
    )
    over = (
        Item.objects.filter(study__slug=slug)
        .annotate(answers=Count("assignments", filter=Q(assignments__status="submitted")))
        .filter(Q(answers__gt=N) | Q(slots_taken__gt=N))
        .count()
    )
    return lost, duplicated, over


class Matrix:
    def __init__(self, args: argparse.Namespace, stack: Stack, tokens: list[str], fixtures: Fixtures) -> None:
        self.args, self.stack, self.tokens, self.fixtures = args, stack, tokens, fixtures
        self.baseline: dict[str, float] = {}
        self.number = 0

    def run(self, fault: Fault | None, kind: str) -> Row:
        from django.db import connection

        args = self.args
        self.number += 1
        connection.close()  # a fault of the row before may have broken it
        slug = f"{SLUG}-{self.number}"
        setup_study(args.items, args.annotators, self.stack.password, slug)
        vacuum()
        row = Row(fault.name if fault else "none", kind)
        origin = time.monotonic()
        annotators = Annotators(self.stack.base, self.tokens, slug, args.think)
        job = Job(kind, self.number, self.fixtures)
        exits_before = len(self.stack.worker.exits)
        with Probe(self.stack.base, origin) as probe:
            annotators.start()
            time.sleep(args.warmup)
            queued = fault_at = time.monotonic()
            job.queue()
            with JobWatch(job) as watch:
                if fault is not None:
                    state = self._wait_mid(watch, queued)
                    row.state_at_fault = state
                    if Job.ended(state):
                        row.notes.append(f"the {kind} job had ended ({state}) before the fault: not hit mid-job")
                    fault_at = time.monotonic()
                    print(f"  {fault.name}: {fault.what} (the {kind} job {state})", flush=True)
                    self._apply(fault, row)
                    row.outage = time.monotonic() - fault_at
                else:
                    watch.wait(lambda: watch.ended_at is not None, queued + args.deadline)
                time.sleep(args.after)
                annotators.stop()
                watch.wait(lambda: watch.ended_at is not None and probe.ready, fault_at + args.deadline)
            ended_at, state = watch.ended_at, watch.state
        exits = self.stack.worker.exits[exits_before:]
        if exits:
            row.notes.append(f"the background worker exited {len(exits)} time(s) (codes {exits}); restarted")
        ready_again = probe.ready_again()
        row.end_state = state
        if Job.ended(state) and ended_at is not None:
            row.job_seconds = ended_at - queued
            if ready_again is not None:
                row.recovery = max(0.0, max(ended_at, origin + ready_again) - fault_at)
        if fault is None and row.job_seconds is not None:
            self.baseline[kind] = row.job_seconds
        row.labels = len(annotators.acked)
        row.statuses = Counter({s: n for s, n in annotators.statuses.items() if s >= 400})
        row.no_answer = sum(annotators.no_answer.values())
        row.not_ready = probe.not_ready_seconds()
        if any(thread.is_alive() for thread in annotators.threads):
            row.notes.append("an annotator's request was still out after 90 s")
        try:
            connection.close()
            row.lost, row.duplicated, row.over_n = label_checks(slug, annotators.acked)
        except Exception as exc:
            row.notes.append(f"checks failed: {type(exc).__name__}: {exc}"[:160])
        return row

    def _wait_mid(self, watch: JobWatch, queued: float) -> str:
        """Until the job runs, then 30 % of its fault-free time more (at most 10 s): the fault lands mid-job."""
        job = watch.job
        watch.wait(lambda: job.running(watch.state) or Job.ended(watch.state), queued + 60)
        if job.running(watch.state):
            time.sleep(min(10.0, 0.3 * self.baseline.get(job.kind, 3.0)))
        return watch.state

    def _apply(self, fault: Fault, row: Row) -> None:
        stack, outage = self.stack, self.args.outage
        if fault.name == "web-worker":
            victims = gunicorn_workers(stack.server.pid) if stack.server else []
            if victims:
                os.kill(victims[0], signal.SIGKILL)
            else:
                row.notes.append("no gunicorn worker found")
        elif fault.name.startswith("worker-"):
            stack.worker.kill()  # its supervisor starts it again
        elif fault.name == "postgres":
            version = postgres_version()
            done = subprocess.run(
                ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
                capture_output=True,
                text=True,
                timeout=180,
            )
            if done.returncode:
                row.notes.append(f"pg_ctlcluster failed: {done.stderr.strip()[:160]}")
        elif fault.name == "redis":
            stack.redis.stop()
            time.sleep(outage)
            stack.redis.start()
        elif fault.name == "s3":
            stack.store.stop()
            time.sleep(outage)
            stack.store.start()
        elif fault.name == "sqlite-lock":
            lock = sqlite3.connect(stack.sqlite_path, timeout=60, isolation_level=None)
            try:
                lock.execute("BEGIN IMMEDIATE")
                time.sleep(outage)
                lock.execute("ROLLBACK")
            finally:
                lock.close()


# --- the whole run --------------------------------------------------------------------------------------------


class Stack:
    """Everything the rows run against; `close` ends every process it started."""

    def __init__(self, args: argparse.Namespace, folder: Path) -> None:
        from tests.support.fake_openai import FakeOpenAI

        self.args, self.folder = args, folder
        self.password = "faults-" + "p" * 20
        self.redis = Redis(folder / "redis")
        self.store = ObjectStore()
        self.llm = FakeOpenAI(latency=args.llm_latency)
        self.server: subprocess.Popen | None = None
        self.worker = Worker({}, folder / "worker.log")
        self.base = ""
        self.sqlite_path = str(folder / "var" / "claimlab.sqlite3")

    def start(self) -> dict[str, str]:
        args = self.args
        self.redis.start()
        self.store.start()
        self.llm.__enter__()
        from tests.support.s3 import s3_client, s3_environment

        s3_client(self.store.url).create_bucket(Bucket=BUCKET)
        env = server_env(args, self.folder)
        endpoints = {ENDPOINT: {"base_url": self.llm.base_url.rstrip("/"), "key_env": "", "max_concurrency": 4}}
        env.update(
            {
                "REDIS_URL": self.redis.url,
                **s3_environment(endpoint_url=self.store.url, bucket=BUCKET),
                "CLAIMLAB_ENDPOINTS": json.dumps(endpoints),
                "CLAIMLAB_ENDPOINT_ALLOW": "127.0.0.0/8",
                "CLAIMLAB_VERIFIER_CHUNK_SIZE": "20",
            }
        )
        if args.db == "postgres":
            import psycopg

            with psycopg.connect(f"{args.pg_server}/postgres", autocommit=True, connect_timeout=10) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{PG_DATABASE}"')
            env["DATABASE_URL"] = f"{args.pg_server}/{PG_DATABASE}"
        if args.queue == "rq":
            from tests.support.redis_server import rq_environment

            env.update(rq_environment(self.redis.url))
        self.worker.env = env
        manage = [sys.executable, str(REPO / "manage.py")]
        subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], env=env, cwd=REPO, check=True)
        subprocess.run([*manage, "collectstatic", "--no-input", "-v", "0"], env=env, cwd=REPO, check=True)
        self.server, self.base = start_server(env, args.workers, self.folder / "gunicorn.log")
        self.worker.start()
        return env

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.worker.close()
        if self.server is not None:
            with contextlib.suppress(Exception):
                stop_servers([self.server])
        with contextlib.suppress(Exception):
            self.redis.stop()
        with contextlib.suppress(Exception):
            self.store.stop()
        with contextlib.suppress(Exception):
            self.llm.__exit__(None, None, None)


def cell(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_table(rows: list[Row], baseline: dict[str, float], args: argparse.Namespace) -> list[str]:
    """The table (one row per fault, the fault-free rows first) and the rows that missed the goal."""
    head = (
        "| fault | job | job state at the fault | labels | lost | dup | over N | 5xx (500/503/other) | no answer "
        "| /readyz not 200 | job end state | recovery | job time x fault-free |"
    )
    print(head)
    print("|" + "---|" * 13)
    missed = []
    for row in rows:
        other = row.five_xx - row.statuses[500] - row.statuses[503]
        ratio = (
            f"{row.job_seconds / baseline[row.job]:.1f} x"
            if row.job_seconds is not None and baseline.get(row.job)
            else "-"
        )
        if row.fault == "none":
            recovery = f"job {cell(row.job_seconds, 1)} s" if row.job_seconds is not None else "not ended"
            ratio = "1.0 x (baseline)" if row.job_seconds is not None else "-"
        elif row.recovery is None:
            recovery = f"not recovered in {args.deadline:.0f} s"
        else:
            recovery = f"{row.recovery:.0f} s"
        print(
            f"| {row.fault} | {row.job} | {row.state_at_fault or '-'} | {row.labels:,} | {row.lost} | {row.duplicated} "
            f"| {row.over_n} | {row.five_xx} ({row.statuses[500]}/{row.statuses[503]}/{other}) | {row.no_answer} "
            f"| {row.not_ready:.0f} s | {row.end_state} | {recovery} | {ratio} |"
        )
        if row.fault == "none":
            continue
        allowed = baseline.get(row.job, 0.0) + row.outage + 10.0
        met = (
            row.lost == row.duplicated == row.over_n == row.five_xx == 0
            and row.recovery is not None
            and row.end_state == "succeeded"
            and row.recovery <= allowed
        )
        if not met:
            missed.append(row.fault)
    for row in rows:
        for note in row.notes:
            print(f"  note ({row.fault}): {note}")
        others = {status: n for status, n in row.statuses.items() if status < 500}
        if others:
            print(f"  4xx ({row.fault}): {dict(sorted(others.items()))}")
    return missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--faults", default=",".join(f.name for f in FAULTS), help="comma-separated subset")
    parser.add_argument("--queue", choices=["database", "rq"], default="database", help="the task backend")
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--think", type=float, default=0.3, help="seconds an annotator waits between labels")
    parser.add_argument("--items", type=int, default=2000, help="items of each row's labelling study")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of labelling before the job is queued")
    parser.add_argument("--outage", type=float, default=30.0, help="seconds Redis / the object store / a lock is out")
    parser.add_argument("--after", type=float, default=10.0, help="seconds of labelling after the fault ended")
    parser.add_argument("--deadline", type=float, default=180.0, help="seconds after the fault a job may take")
    parser.add_argument("--import-items", type=int, default=60_000, help="items of the import job")
    parser.add_argument("--labelled-items", type=int, default=20_000, help="items x N labels the export/report read")
    parser.add_argument("--verifier-items", type=int, default=300, help="items of the verifier run")
    parser.add_argument("--llm-latency", type=float, default=0.1, help="seconds the fake endpoint takes per call")
    parser.add_argument("--pg-server", default=PG_SERVER, help="PostgreSQL server for the database claimlab_faults")
    parser.add_argument("--no-pool", action="store_true", help="PostgreSQL: a new connection per request")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and the database")
    args = parser.parse_args()
    names = [name.strip() for name in args.faults.split(",") if name.strip()]
    unknown = [name for name in names if name not in BY_NAME]
    if unknown:
        parser.error(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    faults = [BY_NAME[name] for name in names if args.db in BY_NAME[name].databases]
    skipped = [name for name in names if args.db not in BY_NAME[name].databases]

    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="claimlab-faults-"))
    stack = Stack(args, folder)
    rows: list[Row] = []
    matrix: Matrix | None = None
    try:
        env = stack.start()
        for key in ("DJANGO_SETTINGS_MODULE", "DEBUG", "SECRET_KEY", "CLAIMLAB_VAR_DIR", "LOG_LEVEL", "STATIC_ROOT"):
            os.environ[key] = env[key]
        for key, value in env.items():
            if key.startswith(("CLAIMLAB_", "REDIS_", "TASKS_", "RQ_", "DATABASE_URL")):
                os.environ[key] = value
        if "DATABASE_URL" not in env:
            os.environ.pop("DATABASE_URL", None)
        os.environ["DATABASE_POOL"] = "0"  # this process: a plain connection, closed when a fault breaks it
        import django

        django.setup()
        logging.getLogger("werkzeug").disabled = True  # moto's server logs every request
        fixtures = Fixtures(args.import_items, args.labelled_items, args.verifier_items)
        fixtures.make()
        names_made = setup_study(10, args.annotators, stack.password, f"{SLUG}-0")
        tokens = issue_tokens(names_made)
        matrix = Matrix(args, stack, tokens, fixtures)
        for kind in dict.fromkeys(fault.job for fault in faults):  # the fault-free time of each job kind
            rows.append(matrix.run(None, kind))
            print(f"  baseline {kind}: {cell(rows[-1].job_seconds, 1)} s", flush=True)
        for fault in faults:
            rows.append(matrix.run(fault, fault.job))
            print(f"  {fault.name}: done ({rows[-1].end_state})", flush=True)
    finally:
        stack.close()
        if not args.keep:
            if args.db == "postgres":
                with contextlib.suppress(Exception):
                    from django.db import connections

                    connections.close_all()
                    import psycopg

                    with psycopg.connect(f"{args.pg_server}/postgres", autocommit=True, connect_timeout=10) as admin:
                        admin.execute(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
            shutil.rmtree(folder, ignore_errors=True)

    baseline = matrix.baseline if matrix else {}
    print(
        f"database: {'PostgreSQL' if args.db == 'postgres' else 'SQLite file (WAL)'}; queue: {args.queue}; "
        f"gunicorn {args.workers} sync workers; {args.annotators} API annotators, {args.think:g} s between labels; "
        f"outage {args.outage:g} s; deadline {args.deadline:g} s; {os.cpu_count()} cores; "
        f"{(time.monotonic() - started) / 60:.1f} min in all"
    )
    print(
        "baseline (fault-free, same run, same clients): "
        + ", ".join(f"{kind} job {seconds:.1f} s" for kind, seconds in baseline.items())
    )
    if skipped:
        print(f"skipped (do not apply to {args.db}): {', '.join(skipped)}")
    missed = print_table(rows, baseline, args)
    print(
        "goal: 0 lost, 0 over N, 0 x 5xx, recovery within (fault-free job time + outage + 10 s): "
        + ("met" if not missed else f"not met ({', '.join(missed)})")
    )


if __name__ == "__main__":
    main()
