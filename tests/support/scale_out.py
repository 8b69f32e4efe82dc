"""The pieces of the scale-out test (tests/ops/test_scale_out.py): hosts, workers, clients, and what disk they used.

Every process gets a folder of its own (working directory, CLAIMLAB_VAR_DIR, TMPDIR) and
the same environment otherwise, as separate machines behind one load balancer would:
one PostgreSQL database (a fresh one per run, migrated by `migrate` in a `manage.py` process), one
Redis (the RQ queue and the cache), one S3-compatible bucket (moto's server). The test
talks to the hosts over HTTP only and reads the database through psycopg, never
through its own Django connection, so it runs the same in the SQLite and the
PostgreSQL pass of the suite.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.support.s3 import free_port
from tests.support.worker import kill

REPO = Path(__file__).resolve().parents[2]
#: The PostgreSQL server when the run's own DATABASE_URL is not a PostgreSQL one (the SQLite pass).
DEFAULT_SERVER = "postgres://postgres@127.0.0.1:5432"


def postgres_server() -> str:
    """The PostgreSQL server to make the scratch database on: the run's own, else the local default."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}"
    return DEFAULT_SERVER


@contextmanager
def scratch_database() -> Iterator[str]:
    """A new, empty PostgreSQL database `claimlab_scale_<random>` for the block; its URL. Dropped after."""
    server = postgres_server()
    name = f"claimlab_scale_{secrets.token_hex(4)}"
    try:
        admin = psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        pytest.fail(f"the scale-out test needs PostgreSQL at {server} (it makes its own database there): {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"{server}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def production_environment(database_url: str, extra: dict[str, str]) -> dict[str, str]:
    """What every host and worker is started with (`make serve`'s settings: DEBUG off, a real key, no TLS
    redirect on loopback, the psycopg pool), plus `extra` (queue, bucket, job settings)."""
    inherited = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "DEBUG"}}
    return {
        **inherited,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "SECURE_HSTS_SECONDS": "0",
        "LOG_LEVEL": "INFO",  # the request ids in the hosts' and workers' logs are checked
        "DATABASE_URL": database_url,
        "DATABASE_POOL": "1",
        **extra,
    }


class Machine:
    """One "host": its own folder (working directory, var dir, temp dir) and the process running there."""

    def __init__(self, root: Path, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.folder = root / name
        self.var = self.folder / "var"
        self.tmp = self.folder / "tmp"
        for folder in (self.var, self.tmp, self.folder / "static", self.folder / "gunicorn"):
            folder.mkdir(parents=True, exist_ok=True)
        self.log = root / "logs" / f"{name}.log"
        self.log.parent.mkdir(exist_ok=True)
        self.env = {
            **env,
            "CLAIMLAB_VAR_DIR": str(self.var),
            "STATIC_ROOT": str(self.folder / "static"),
            "TMPDIR": str(self.tmp),  # Django's upload temp files, Python's tempfile: this host's own
        }
        self.process: subprocess.Popen | None = None
        self.base = ""

    def manage(self, *args: str, timeout: float = 300) -> str:
        """`manage.py <args>` run on this host (its folder, its environment); its output, or the test fails."""
        done = subprocess.run(
            [sys.executable, str(REPO / "manage.py"), *args],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            pytest.fail(
                f"manage.py {' '.join(args)} on {self.name} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
            )
        return done.stdout

    def start_host(self, workers: int = 2) -> None:
        """gunicorn with the app on a free port (as `make serve`, fewer workers: the machine is small)."""
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self._start(
            [
                str(Path(sys.executable).with_name("gunicorn")),
                "--pythonpath",
                str(REPO),
                "config.wsgi:application",
                "--workers",
                str(workers),
                "--bind",
                f"127.0.0.1:{port}",
                "--timeout",
                "120",
                "--log-level",
                "warning",
                "--worker-tmp-dir",
                str(self.folder / "gunicorn"),
            ]
        )

    def start_worker(self) -> None:
        """`manage.py worker` (an RQ worker with this environment), in a session of its own."""
        self._start([sys.executable, str(REPO / "manage.py"), "worker", "--no-reload"])

    def _start(self, command: list[str]) -> None:
        self.process = subprocess.Popen(
            command,
            cwd=self.folder,
            env=self.env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def alive(self) -> subprocess.Popen:
        """The running process; the test fails with its log when it has exited."""
        assert self.process is not None, f"{self.name} was never started"
        if self.process.poll() is not None:
            pytest.fail(f"{self.name} exited ({self.process.returncode}):\n{self.tail()}")
        return self.process

    def end(self) -> None:
        """SIGKILL the process and all it started: the run is over and nothing of theirs is kept (a graceful
        shutdown of four processes costs several seconds on a loaded machine)."""
        if self.process is not None and self.process.poll() is None:
            kill(self.process)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else "(no log)"

    def wait_ready(self, timeout: float = 240) -> None:
        """Until /readyz answers 200: database reachable and migrated, queue and bucket reachable."""
        deadline = time.monotonic() + timeout
        while True:
            self.alive()
            try:
                if call(self.base, "GET", "/readyz")[0] == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name} was not ready after {timeout:.0f} s:\n{self.tail()}")
            time.sleep(0.2)

    def files(self, folder: Path) -> list[str]:
        """Every file under one of this host's folders, relative to it."""
        return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())


def end_all(machines: list[Machine]) -> None:
    for machine in machines:
        machine.end()


def call(
    base: str,
    method: str,
    path: str,
    token: str | None = None,
    body: Any = None,
    timeout: float = 120,
    request_id: str = "",
) -> tuple[int, Any]:
    """(status, decoded JSON body or None) of a JSON request; redirects are not followed.
    `request_id` is sent as the load balancer's X-Request-ID."""
    headers = {"Accept": "application/json"}
    if request_id:
        headers["X-Request-ID"] = request_id
    data = None
    if isinstance(body, Multipart):
        data, headers["Content-Type"] = body.encoded, body.content_type
    elif body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    if token:
        headers["Authorization"] = f"Token {token}"
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with _NO_REDIRECTS.open(request, timeout=timeout) as response:
            status, raw, location = response.status, response.read(), response.headers.get("Location")
    except urllib.error.HTTPError as exc:
        status, raw, location = exc.code, exc.read(), exc.headers.get("Location")
    if 300 <= status < 400:
        return status, {"location": location}
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, {"raw": raw[:300].decode(errors="replace")}


class _KeepRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the caller sees the 302 itself (a download's presigned URL)


_NO_REDIRECTS = urllib.request.build_opener(_KeepRedirects)


class Multipart:
    """A multipart/form-data body with one file field, as a browser or `curl -F` sends an upload."""

    def __init__(self, field: str, filename: str, content: bytes, content_type: str) -> None:
        boundary = uuid.uuid4().hex
        self.content_type = f"multipart/form-data; boundary={boundary}"
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{filename}"\r\n'
            f"Content-Type: {content_type}\r\n\r\n"
        ).encode()
        self.encoded = head + content + f"\r\n--{boundary}--\r\n".encode()


def wait_for_job(base: str, path: str, token: str, machines: list[Machine], timeout: float = 300) -> dict:
    """Poll an import or export job over HTTP until it has ended; its last state."""
    deadline = time.monotonic() + timeout
    while True:
        status, job = call(base, "GET", path, token)
        assert status == 200, (status, job)
        if job["status"] in ("succeeded", "failed"):
            return job
        for machine in machines:
            machine.alive()
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {m.name}\n{m.tail()}" for m in machines)
            pytest.fail(f"{path} still {job['status']} after {timeout:.0f} s:\n{logs}")
        time.sleep(0.2)


class DiskWatch:
    """Every file seen, at any moment of the run, in each watched folder (polled from a side thread).

    Polling cannot prove a file never existed for a few milliseconds, but what the workers
    leave for seconds (a download being imported, an export being written) is seen, and
    an export or upload landing in a web host's var dir would stay there.
    """

    def __init__(self, folders: dict[str, Path], interval: float = 0.05) -> None:
        self.folders = folders
        self.seen: dict[str, set[str]] = {name: set() for name in folders}
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="disk-watch", daemon=True)

    def __enter__(self) -> DiskWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.scan()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.scan()

    def scan(self) -> None:
        for name, folder in self.folders.items():
            for root, _dirs, names in os.walk(folder):
                for file_name in names:
                    self.seen[name].add(str((Path(root) / file_name).relative_to(folder)))


class Annotators:
    """API annotators (threads, one token each) labelling until stopped; client k uses host k mod len(bases).

    A label is one request once started: `submit` with `"next": true` answers the next assignment.
    """

    LABELS = ("supported", "contradicted", "inconclusive")

    def __init__(self, bases: list[str], tokens: list[str], slug: str) -> None:
        self.bases, self.tokens, self.slug = bases, tokens, slug
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.labels_by_host: Counter[str] = Counter()
        self.unexpected: Counter[str] = Counter()
        self.retried: Counter[int] = Counter()
        self.threads = [threading.Thread(target=self._label, args=(k,), daemon=True) for k in range(len(tokens))]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(180)
        assert not any(thread.is_alive() for thread in self.threads), "an annotator's request never came back"

    @property
    def labels(self) -> int:
        return sum(self.labels_by_host.values())

    def _retried(self, status: int) -> None:
        with self.lock:
            self.retried[status] += 1

    def _note(self, what: str) -> None:
        with self.lock:
            self.unexpected[what[:160]] += 1

    def _label(self, k: int) -> None:
        base, token = self.bases[k % len(self.bases)], self.tokens[k]
        current: int | None = None
        while not self.stop_event.is_set():
            try:
                if current is None:
                    status, data = call(base, "POST", f"/api/studies/{self.slug}/assignments/next", token)
                    if status != 200:
                        if status == 503:  # every claim lost a race: the API says to retry
                            self._retried(status)
                        elif status != 204:  # 204: nothing for you now
                            self._note(f"next {status}: {data}")
                        self.stop_event.wait(0.5)
                        continue
                    current = data["assignment"]["id"]
                label = self.LABELS[(k + self.labels_by_host[base]) % len(self.LABELS)]
                status, data = call(
                    base, "POST", f"/api/assignments/{current}/submit", token, {"label": label, "next": True}
                )
                if status != 200:
                    self._note(f"submit {status}: {data}")
                    current = None
                    continue
                with self.lock:
                    self.labels_by_host[base] += 1
                following = data.get("next")
                current = following["assignment"]["id"] if following else None
            except OSError as exc:
                self._note(f"{type(exc).__name__}: {exc}")
                current = None
