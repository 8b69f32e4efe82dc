"""Many annotators at once over HTTP: labels per second with zero over-assignment (issue 3, point 9).

Starts gunicorn (4 sync workers) on a free port of 127.0.0.1 with production
settings (DEBUG=0, a generated SECRET_KEY, no TLS redirect), on PostgreSQL
(`--db postgres`: DATABASE_URL, default postgres://postgres@127.0.0.1:5432/claimlab)
or on a SQLite file in a temporary folder (`--db sqlite`). Then 50 simulated
annotators (threads), each with its own API token from /api/auth/token/,
call `POST /api/studies/{slug}/assignments/next` and
`POST /api/assignments/{id}/submit` without think time until the API says
204. The study has labels / N items, so the run ends after exactly that many
labels.

On PostgreSQL the server runs as in production (docs/architecture.md, Runtime): psycopg's
connection pool (DATABASE_POOL=1; `--no-pool` for a connection per request),
and the tables are VACUUM ANALYZEd after the bulk load, as autovacuum would
do (it is off on the development machines). Extra psycopg options can ride
on DATABASE_URL, e.g. `?server_side_binding=true&prepare_threshold=5`.

Printed: labels per second, p50/p95 latency (next, submit, and the whole
label), errors, the check that every item has exactly N answers from N
different annotators, and where the CPU went (web server, database, the
load clients, other processes: everything shares this machine). Baseline,
measured in the same run against the same server with the same clients: a
cheap authenticated API call (GET /api/studies/{slug}/), so "one label costs
X baseline requests". Goal on PostgreSQL: >= 60 labels/s, zero errors, zero
over-assignment.

    python benchmarks/annotate_load.py [--db postgres|sqlite] [--annotators 50] [--labels 3000] [--workers 4]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SLUG = "bench-load"
LABELS = ("supported", "contradicted", "inconclusive")
N = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(args: argparse.Namespace, folder: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "SECURE_HSTS_SECONDS": "0",
        "LOG_LEVEL": "WARNING",
        "CLAIMLAB_VAR_DIR": str(folder / "var"),
        "STATIC_ROOT": str(folder / "static"),
    }
    if args.db == "postgres":
        env["DATABASE_URL"] = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/claimlab"
        # The production setting (psycopg 3 with a pool, docs/architecture.md, Runtime): without it every
        # request opens and closes its own PostgreSQL connection.
        env["DATABASE_POOL"] = "0" if args.no_pool else "1"
    else:
        env.pop("DATABASE_URL", None)
    return env


def setup_study(items: int, annotators: int, password: str) -> list[str]:
    """The study, its items and the bench annotators (one password hash shared, to spare PBKDF2 time)."""
    import io

    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    from annotation.models import Study
    from annotation.services import add_members, create_study, import_items

    Study.objects.filter(slug=SLUG).delete()
    study = create_study(slug=SLUG, name="Load benchmark", kind="verification", annotators_per_item=N)
    rng = random.Random(5)
    lines = [
        json.dumps(
            {
                "id": f"c-{n:05d}",
                "claim": f"Claim {n}: " + " ".join(rng.choice(("river", "court", "1980", "museum")) for _ in range(12)),
                "context": "A sentence from a model's answer.",
                "evidence": [
                    {
                        "text": "An evidence passage. " * 20,
                        "title": "Doc",
                        "url": f"https://example.org/{n}",
                        "source_type": "news",
                    }
                ],
            }
        )
        for n in range(items)
    ]
    import_items(study=study, stream=io.BytesIO("\n".join(lines).encode()), fmt="jsonl")
    User = get_user_model()
    hashed = make_password(password)
    names = [f"bench-load-{k:03d}" for k in range(annotators)]
    for name in names:
        User.objects.update_or_create(username=name, defaults={"password": hashed, "is_active": True})
    add_members(study=study, usernames=names, role="annotator")
    return names


def request(
    base: str, method: str, path: str, token: str | None = None, body: dict | None = None
) -> tuple[int, Any, float]:
    """(HTTP status, the decoded JSON body or None when empty, seconds taken)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    elapsed = time.perf_counter() - start
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = {"raw": raw[:200].decode(errors="replace")}
    return status, payload, elapsed


class Tally:
    """What the client threads saw, gathered under a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: Counter[str] = Counter()
        self.labels = 0

    def add(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.latency[kind].append(seconds)

    def error(self, what: str) -> None:
        with self.lock:
            self.errors[what] += 1


def annotate(base: str, token: str, tally: Tally, seed: int) -> None:
    """One annotator: next, submit, until nothing is left. No think time."""
    rng = random.Random(seed)
    while True:
        try:
            status, data, next_s = request(base, "POST", f"/api/studies/{SLUG}/assignments/next", token)
            if status == 204:
                return
            if status != 200:
                tally.error(f"next {status}: {str(data)[:120]}")
                continue
            tally.add("next", next_s)
            assignment_id = data["assignment"]["id"]
            status, data, submit_s = request(
                base, "POST", f"/api/assignments/{assignment_id}/submit", token, {"label": rng.choice(LABELS)}
            )
            if status != 200:
                tally.error(f"submit {status}: {str(data)[:120]}")
                continue
            tally.add("submit", submit_s)
            tally.add("label", next_s + submit_s)
            with tally.lock:
                tally.labels += 1
        except Exception as exc:
            tally.error(f"{type(exc).__name__}: {exc}"[:160])
            time.sleep(0.1)


def baseline(base: str, tokens: list[str], seconds: float) -> float:
    """Requests per second of a cheap authenticated API call, same clients, same server."""
    stop = time.perf_counter() + seconds
    counts: Counter[str] = Counter()

    def hammer(token: str) -> None:
        while time.perf_counter() < stop:
            status, _, _ = request(base, "GET", f"/api/studies/{SLUG}/", token)
            counts["ok" if status == 200 else "error"] += 1

    threads = [threading.Thread(target=hammer, args=(token,)) for token in tokens]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if counts["error"]:
        raise SystemExit(f"baseline requests failed: {counts}")
    return counts["ok"] / (time.perf_counter() - start)


def cpu_seconds(server_pid: int) -> dict[str, float]:
    """CPU time used so far by role (Linux /proc): web server, this client, database, everything else.

    Clients, server and database share this machine's cores, so where the
    CPU went says what the throughput figure measures.
    """
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = defaultdict(float)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        pid, ppid, seconds = int(entry.name), int(fields[1]), (int(fields[11]) + int(fields[12])) / tick
        if pid == server_pid or ppid == server_pid:
            used["web server"] += seconds
        elif pid == os.getpid():
            used["load clients"] += seconds
        elif comm.startswith("postgres"):
            used["database"] += seconds
    busy = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in busy[:8])
    used["machine busy"] = (user + nice + system + irq + softirq + steal) / tick
    return used


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def verify() -> dict[str, int]:
    """Exactly N answers per item, from N different annotators; nothing left open."""
    from django.db.models import Count

    from annotation.models import Annotation, Assignment, Item

    submitted = (
        Assignment.objects.filter(study__slug=SLUG, status="submitted")
        .values("item_id")
        .annotate(n=Count("pk"), people=Count("annotator", distinct=True))
        .order_by()
    )
    answers = {row["item_id"]: row["n"] for row in submitted}
    people = {row["item_id"]: row["people"] for row in submitted}
    ids = list(Item.objects.filter(study__slug=SLUG).values_list("pk", flat=True))
    return {
        "items": len(ids),
        "items with exactly N": sum(1 for pk in ids if answers.get(pk) == N and people.get(pk) == N),
        "over-assigned items": sum(1 for pk in ids if answers.get(pk, 0) > N),
        "under-assigned items": sum(1 for pk in ids if answers.get(pk, 0) < N),
        "annotations": Annotation.objects.filter(assignment__study__slug=SLUG).count(),
        "active assignments left": Assignment.objects.filter(study__slug=SLUG, status="active").count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--db",
        choices=["sqlite", "postgres"],
        default="postgres" if os.environ.get("DATABASE_URL") else "sqlite",
        help="default: postgres when DATABASE_URL is set (as `make bench` on CI), else sqlite",
    )
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--labels", type=int, default=3000, help="labels in the run (the study gets labels / N items)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--baseline-seconds", type=float, default=5.0)
    parser.add_argument(
        "--no-pool", action="store_true", help="PostgreSQL: a new connection per request (DATABASE_POOL=0)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and the bench study")
    args = parser.parse_args()
    items = args.labels // N

    folder = Path(tempfile.mkdtemp(prefix="claimlab-load-"))
    env = server_env(args, folder)
    os.environ.update(
        {
            key: env[key]
            for key in ("DJANGO_SETTINGS_MODULE", "DEBUG", "SECRET_KEY", "CLAIMLAB_VAR_DIR", "LOG_LEVEL", "STATIC_ROOT")
        }
    )
    if "DATABASE_URL" in env:
        os.environ["DATABASE_URL"] = env["DATABASE_URL"]
    else:
        os.environ.pop("DATABASE_URL", None)
    manage = [sys.executable, str(REPO / "manage.py")]
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], env=env, cwd=REPO, check=True)
    subprocess.run([*manage, "collectstatic", "--no-input", "-v", "0"], env=env, cwd=REPO, check=True)

    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.db import connection

    password = secrets.token_urlsafe(16)
    names = setup_study(items, args.annotators, password)
    if connection.vendor == "postgresql":
        # What autovacuum does shortly after a bulk load (it is off on the development
        # machines): fresh statistics and a clean visibility map, so the planner uses
        # the (study, slots_taken) index instead of reading every item.
        with connection.cursor() as cursor:
            for table in (
                "annotation_item",
                "annotation_assignment",
                "annotation_annotation",
                "annotation_studymember",
            ):
                cursor.execute(f"VACUUM ANALYZE {table}")
    connection.close()  # the server does the work from here on

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "config.wsgi:application",
            "--workers",
            str(args.workers),
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "--timeout",
            "120",
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "gunicorn.log", "wb"),
    )
    try:
        for _ in range(200):
            try:
                if request(base, "GET", "/accounts/login/")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise SystemExit(f"gunicorn did not start; see {folder / 'gunicorn.log'}")

        def token_for(name: str) -> str:
            status, data, _ = request(base, "POST", "/api/auth/token/", body={"username": name, "password": password})
            if status != 201:  # a new token, created
                raise SystemExit(f"token for {name}: HTTP {status} {data}")
            return data["token"]

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(
            max_workers=args.workers
        ) as pool:  # each login checks a (slow, on purpose) password hash
            tokens = list(pool.map(token_for, names))

        cpu_base_before = cpu_seconds(server.pid)
        base_start = time.perf_counter()
        per_second_baseline = baseline(base, tokens, args.baseline_seconds)
        base_requests = per_second_baseline * (time.perf_counter() - base_start)
        base_cpu_ms = (cpu_seconds(server.pid)["web server"] - cpu_base_before["web server"]) / base_requests * 1000

        tally = Tally()
        threads = [threading.Thread(target=annotate, args=(base, token, tally, k)) for k, token in enumerate(tokens)]
        cpu_before = cpu_seconds(server.pid)
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start
        cpu_after = cpu_seconds(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)

    checks = verify()
    rate = tally.labels / wall
    tally.latency["label"]
    pooling = (
        ""
        if args.db != "postgres"
        else (" without a connection pool" if args.no_pool else " with the psycopg pool (DATABASE_POOL=1)")
    )
    print(
        f"database: {'PostgreSQL' + pooling if args.db == 'postgres' else 'SQLite file (WAL) in ' + str(folder)}; "
        f"gunicorn {args.workers} sync workers; {args.annotators} annotators over HTTP, no think time; "
        f"{os.cpu_count()} cores (clients, server and database share them)"
    )
    print(
        f"baseline: GET /api/studies/{SLUG}/ at {per_second_baseline:.0f} requests/s, "
        f"{base_cpu_ms:.1f} ms of web-server CPU each (same server, same clients)"
    )
    print(
        f"labels: {tally.labels:,} in {wall:.1f} s = {rate:.1f} labels/s "
        f"(one label = {per_second_baseline / rate:.1f} baseline requests; it is 2 requests)"
    )
    for kind in ("next", "submit", "label"):
        values = tally.latency[kind]
        print(
            f"  {kind:<7} p50 {statistics.median(values) * 1000:7.1f} ms   p95 {percentile(values, 0.95) * 1000:7.1f} ms   "
            f"max {max(values) * 1000:7.1f} ms   ({len(values):,} requests)"
        )
    cpu = {role: cpu_after[role] - cpu_before[role] for role in cpu_after}
    cpu["other processes"] = cpu["machine busy"] - cpu["web server"] - cpu["load clients"] - cpu["database"]
    cores = os.cpu_count()  # None where the number cannot be found out
    core_seconds = "?" if cores is None else f"{cores * wall:.0f}"
    print(
        f"CPU during the run ({cores} cores x {wall:.0f} s = {core_seconds} core-s): "
        + ", ".join(
            f"{role} {cpu[role]:.0f} s" for role in ("web server", "load clients", "database", "other processes")
        )
        + f"; per label: web server {cpu['web server'] / max(tally.labels, 1) * 1000:.1f} ms, "
        f"database {cpu['database'] / max(tally.labels, 1) * 1000:.1f} ms"
    )
    print(
        f"errors: {sum(tally.errors.values())}"
        + "".join(f"\n  {count} x {what}" for what, count in tally.errors.most_common(10))
    )
    print("check: " + ", ".join(f"{name} {value:,}" for name, value in checks.items()))
    exact = checks["items with exactly N"] == checks["items"] == items and checks["annotations"] == args.labels
    print(f"exactly N={N} per item from N different annotators: {'yes' if exact else 'NO'}")
    if args.db == "postgres":
        met = rate >= 60 and not tally.errors and checks["over-assigned items"] == 0 and exact
        print(f"goal (PostgreSQL): >= 60 labels/s, zero errors, zero over-assignment: {'met' if met else 'MISSED'}")
    if not args.keep:
        import shutil

        if args.db == "postgres":
            from django.contrib.auth import get_user_model

            from annotation.models import Study

            Study.objects.filter(slug=SLUG).delete()
            get_user_model().objects.filter(username__in=names).delete()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
