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
do (it is off on the development machines), and ANALYZEd during the runs by
autovacuum's rule (`AnalyzeAsAutovacuum`, only when the server's is off). Extra psycopg options can ride
on DATABASE_URL, e.g. `?server_side_binding=true&prepare_threshold=5`.

Printed: labels per second, p50/p95 latency (next, submit, and the whole
label), errors, the check that every item has exactly N answers from N
different annotators, and where the CPU went (web server, database, the
load clients, other processes: everything shares this machine). Baseline,
measured in the same run against the same server with the same clients: a
cheap authenticated API call (GET /api/studies/{slug}/), so "one label costs
X baseline requests". Goal on PostgreSQL: >= 60 labels/s, zero errors, zero
over-assignment.

Two more modes (issue 16, section 5):

`--hosts 2`: a run on one host, then a run on two (two gunicorn instances on
two ports, one database, the clients split between them), each on a fresh
study of the same size, printed side by side: labels/s, p50/p95 per label,
and the CPU one label costs in the web server and in the database. On one
machine both "hosts" share its cores, so the two-host figure shows the
overhead of a second instance, not a gain; the CPU per label says what N real
hosts would do: each host's cores / web CPU per label, until the database's
cores / database CPU per label is reached.

`--paced 200`: 200 annotators working like people: each waits 3-8 s (uniform)
between labels, the first wait spread over the start. Printed: p50/p95 per
label (next + submit) against the baseline request's latency; goal p95 < 300 ms.

The client's work for one label is `label_once`. By default the run is done twice on
fresh studies of the same size: two requests per label (next, then submit: the baseline)
and one (issue 15: the submit carries `"next": true` and returns the next assignment),
printing the server CPU (web + database) per label of each; goal <= 8 ms. `--hosts`
and `--paced` use one request per label.

    python benchmarks/annotate_load.py [--db postgres|sqlite] [--annotators 50] [--labels 3000] [--workers 4]
    python benchmarks/annotate_load.py --db postgres --hosts 2
    python benchmarks/annotate_load.py --db postgres --paced 200 [--labels 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import signal
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
THINK_SECONDS = (3.0, 8.0)  # --paced: a person's time between labels
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


def setup_study(items: int, annotators: int, password: str, slug: str = SLUG) -> list[str]:
    """The study, its items and the bench annotators (one password hash shared, to spare PBKDF2 time)."""
    import io

    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    from annotation.members.services import add_members
    from annotation.models import Study
    from annotation.studies.services import create_study
    from annotation.transfer.services.item_import import import_items

    Study.objects.filter(slug=slug).delete()
    study = create_study(slug=slug, name="Load benchmark", kind="verification", annotators_per_item=N)
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


def label_once(base: str, slug: str, token: str, tally: Tally, rng: random.Random, state: dict[str, Any]) -> bool:
    """One label as a client gives it. False once nothing is left.

    The only place that knows the API's shape for labelling. `state["flow"]` is "two" (ask for
    the next item, then submit: two requests per label, as before issue 15) or "one" (the submit
    asks for the next item too, `"next": true`, and the client keeps it in `state["current"]`:
    one request per label after the first).
    """
    label_s = 0.0
    if state.get("current") is None:
        status, data, next_s = request(base, "POST", f"/api/studies/{slug}/assignments/next", token)
        if status == 204:
            return False
        if status != 200:
            tally.error(f"next {status}: {str(data)[:120]}")
            return True
        tally.add("next", next_s)
        label_s += next_s
        state["current"] = data["assignment"]["id"]
    body: dict[str, Any] = {"label": rng.choice(LABELS)}
    one_trip = state["flow"] == "one"
    if one_trip:
        body["next"] = True
    status, data, submit_s = request(base, "POST", f"/api/assignments/{state['current']}/submit", token, body)
    if status != 200:
        tally.error(f"submit {status}: {str(data)[:120]}")
        state["current"] = None
        return True
    tally.add("submit", submit_s)
    tally.add("label", label_s + submit_s)
    with tally.lock:
        tally.labels += 1
    if not one_trip:
        state["current"] = None
        return True
    if "next" not in data:  # the answer is stored but no claim was made now (contention): ask again
        state["current"] = None
        return True
    state["current"] = data["next"]["assignment"]["id"] if data["next"] else None
    return data["next"] is not None


def annotate(
    base: str,
    token: str,
    tally: Tally,
    seed: int,
    slug: str = SLUG,
    think: tuple[float, float] | None = None,
    flow: str = "one",
) -> None:
    """One annotator: labels until nothing is left; between labels, a person's think time when given."""
    rng = random.Random(seed)
    state: dict[str, Any] = {"flow": flow, "current": None}
    if think is not None:
        time.sleep(rng.uniform(0, think[1]))  # people do not all arrive in the same second
    while True:
        try:
            if not label_once(base, slug, token, tally, rng, state):
                return
        except Exception as exc:
            tally.error(f"{type(exc).__name__}: {exc}"[:160])
            state["current"] = None
            time.sleep(0.1)
        if think is not None:
            time.sleep(rng.uniform(*think))


def baseline(base: str, tokens: list[str], seconds: float) -> tuple[float, float]:
    """(requests per second, p50 seconds) of a cheap authenticated API call, same clients, same server."""
    stop = time.perf_counter() + seconds
    counts: Counter[str] = Counter()
    latencies: list[float] = []

    def hammer(token: str) -> None:
        while time.perf_counter() < stop:
            status, _, elapsed = request(base, "GET", f"/api/studies/{SLUG}/", token)
            counts["ok" if status == 200 else "error"] += 1
            latencies.append(elapsed)

    threads = [threading.Thread(target=hammer, args=(token,)) for token in tokens]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if counts["error"]:
        raise SystemExit(f"baseline requests failed: {counts}")
    return counts["ok"] / (time.perf_counter() - start), statistics.median(latencies)


def cpu_seconds(server_pids: set[int], database: str | None) -> dict[str, float]:
    """CPU time used so far by role (Linux /proc): web servers, this client, database, everything else.

    Clients, servers and database share this machine's cores, so where the
    CPU went says what the throughput figure measures. The database is the
    PostgreSQL backends serving `database` (other databases of the same
    cluster, e.g. test runs beside this one, are "other processes").
    """
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = defaultdict(float)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            comm = (entry / "comm").read_text().strip()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        pid, ppid, seconds = int(entry.name), int(fields[1]), (int(fields[11]) + int(fields[12])) / tick
        if pid in server_pids or ppid in server_pids:
            used["web server"] += seconds
        elif pid == os.getpid():
            used["load clients"] += seconds
        elif comm.startswith("postgres") and database and f" {database} " in command:
            used["database"] += seconds
    busy = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in busy[:8])
    used["machine busy"] = (user + nice + system + irq + softirq + steal) / tick
    return used


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def verify(slug: str = SLUG) -> dict[str, int]:
    """Exactly N answers per item, from N different annotators; nothing left open."""
    from django.db.models import Count

    from annotation.models import Annotation, Assignment, Item

    submitted = (
        Assignment.objects.filter(study__slug=slug, status="submitted")
        .values("item_id")
        .annotate(n=Count("pk"), people=Count("annotator", distinct=True))
        .order_by()
    )
    answers = {row["item_id"]: row["n"] for row in submitted}
    people = {row["item_id"]: row["people"] for row in submitted}
    ids = list(Item.objects.filter(study__slug=slug).values_list("pk", flat=True))
    return {
        "items": len(ids),
        "items with exactly N": sum(1 for pk in ids if answers.get(pk) == N and people.get(pk) == N),
        "over-assigned items": sum(1 for pk in ids if answers.get(pk, 0) > N),
        "under-assigned items": sum(1 for pk in ids if answers.get(pk, 0) < N),
        "annotations": Annotation.objects.filter(assignment__study__slug=slug).count(),
        "active assignments left": Assignment.objects.filter(study__slug=slug, status="active").count(),
    }


def vacuum() -> None:
    """What autovacuum does shortly after a bulk load (it is off on the development machines):
    fresh statistics and a clean visibility map, so the planner uses the (study, slots_taken)
    index instead of reading every item."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for table in ("annotation_item", "annotation_assignment", "annotation_annotation", "annotation_studymember"):
            cursor.execute(f"VACUUM ANALYZE {table}")


#: The tables the labelling writes, whose statistics autovacuum keeps up to date.
LABELLED_TABLES = ["annotation_item", "annotation_assignment", "annotation_annotation", "annotation_annotatorcount"]


class AnalyzeAsAutovacuum:
    """Autovacuum's ANALYZE during a run, on a server that has autovacuum off (the development machines).

    Autovacuum (on by default, as in production) analyzes a table once the rows changed since its
    last ANALYZE pass 50 + 10% of its rows, and an ANALYZE makes PostgreSQL plan its prepared
    statements again. Without it a run kept the statistics of the set-up (no assignment at all)
    and the plans made from them, which read every assignment the run had written. This thread
    applies the same rule every second; its work is in the database's CPU figure, as autovacuum's
    would be. Nothing is done when the server's own autovacuum is on.
    """

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.analyzed: Counter[str] = Counter()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> AnalyzeAsAutovacuum:
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SHOW autovacuum")
                if cursor.fetchone()[0] == "off":
                    self.thread.start()
            connection.close()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()

    def _run(self) -> None:
        from django.db import connection

        try:
            while not self.stop.wait(1.0):
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid "
                        "WHERE s.relname = ANY(%s) AND s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0)",
                        [LABELLED_TABLES],
                    )
                    for (name,) in cursor.fetchall():
                        cursor.execute(f'ANALYZE "{name}"')
                        self.analyzed[name] += 1
        finally:
            connection.close()


def issue_tokens(names: list[str]) -> list[str]:
    """An API token per bench annotator, issued directly (a login per client costs a PBKDF2 hash each,
    which is not what this benchmark measures)."""
    from django.contrib.auth import get_user_model

    from accounts.services import issue_token

    users = {user.username: user for user in get_user_model().objects.filter(username__in=names)}
    return [issue_token(user=users[name], name="bench").key for name in names]


def start_server(env: dict[str, str], workers: int, log: Path) -> tuple[subprocess.Popen, str]:
    """A gunicorn instance (one "host") on a free port; (process, base URL) once it answers."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "config.wsgi:application",
            "--workers",
            str(workers),
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
        stderr=log.open("wb"),
    )
    for _ in range(300):
        try:
            if request(base, "GET", "/accounts/login/")[0] == 200:
                return server, base
        except OSError:
            pass
        if server.poll() is not None:
            break
        time.sleep(0.1)
    server.terminate()
    raise SystemExit(f"gunicorn did not start; see {log}")


def stop_servers(servers: list[subprocess.Popen]) -> None:
    """Quick shutdown (SIGINT: the clients are done), and SIGKILL for a server still there after 30 s."""
    for server in servers:
        server.send_signal(signal.SIGINT)
    for server in servers:
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)


class Run:
    """One labelling run: what the clients saw, how long it took, and the CPU it used by role."""

    def __init__(self, name: str, tally: Tally, wall: float, cpu: dict[str, float], checks: dict[str, int]) -> None:
        self.name, self.tally, self.wall, self.cpu, self.checks = name, tally, wall, cpu, checks

    @property
    def rate(self) -> float:
        return self.tally.labels / self.wall

    def per_label_ms(self, role: str) -> float:
        return self.cpu[role] / max(self.tally.labels, 1) * 1000


def label_run(
    name: str,
    bases: list[str],
    tokens: list[str],
    slug: str,
    server_pids: set[int],
    database: str | None,
    think: tuple[float, float] | None = None,
    flow: str = "one",
) -> Run:
    """Every client labels `slug` until the API says 204; client k talks to host k mod len(bases)."""
    tally = Tally()
    threads = [
        threading.Thread(target=annotate, args=(bases[k % len(bases)], token, tally, k, slug, think, flow))
        for k, token in enumerate(tokens)
    ]
    cpu_before = cpu_seconds(server_pids, database)
    start = time.perf_counter()
    with AnalyzeAsAutovacuum() as autovacuum:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    wall = time.perf_counter() - start
    cpu_after = cpu_seconds(server_pids, database)
    if autovacuum.analyzed:
        print(f"  ({name}: ANALYZE as autovacuum would: {dict(autovacuum.analyzed)})")
    cpu = {
        role: cpu_after[role] - cpu_before[role] for role in ("web server", "load clients", "database", "machine busy")
    }
    cpu["other processes"] = cpu["machine busy"] - cpu["web server"] - cpu["load clients"] - cpu["database"]
    return Run(name, tally, wall, cpu, verify(slug))


def print_latencies(tally: Tally) -> None:
    for kind in ("next", "submit", "label"):
        values = tally.latency[kind]
        if not values:
            print(f"  {kind:<7} no requests")
            continue
        print(
            f"  {kind:<7} p50 {statistics.median(values) * 1000:7.1f} ms   p95 {percentile(values, 0.95) * 1000:7.1f} ms   "
            f"max {max(values) * 1000:7.1f} ms   ({len(values):,} requests)"
        )


def print_cpu(run: Run) -> None:
    cores = os.cpu_count()  # None where the number cannot be found out
    core_seconds = "?" if cores is None else f"{cores * run.wall:.0f}"
    print(
        f"  CPU ({cores} cores x {run.wall:.0f} s = {core_seconds} core-s): "
        + ", ".join(
            f"{role} {run.cpu[role]:.0f} s" for role in ("web server", "load clients", "database", "other processes")
        )
        + f"; per label: web server {run.per_label_ms('web server'):.1f} ms, "
        f"database {run.per_label_ms('database'):.1f} ms"
    )


def print_checks(run: Run, labels: int) -> bool:
    errors = run.tally.errors
    print(f"  errors: {sum(errors.values())}" + "".join(f"\n    {n} x {what}" for what, n in errors.most_common(10)))
    print("  check: " + ", ".join(f"{name} {value:,}" for name, value in run.checks.items()))
    exact = run.checks["items with exactly N"] == run.checks["items"] == labels // N
    exact = exact and run.checks["annotations"] == labels
    print(f"  exactly N={N} per item from N different annotators: {'yes' if exact else 'NO'}")
    return exact and not errors and run.checks["over-assigned items"] == 0


def implied_hosts(run: Run) -> None:
    """What N hosts would do, from the CPU one label costs in the web server and in the database."""
    web, db = run.per_label_ms("web server"), run.per_label_ms("database")
    cores = os.cpu_count() or 1
    if not web:
        print("implied hosts: no web-server CPU was measured")
        return
    per_host = cores * 1000 / web
    if not db:  # SQLite: the database works inside the web server's processes, on one host only
        print(
            f"implied by the CPU per label (web {web:.1f} ms, SQLite inside it): one host with {cores} cores "
            f"serves at most {per_host:.0f} labels/s; more hosts need PostgreSQL"
        )
        return
    db_limit = cores * 1000 / db
    print(
        f"implied by the CPU per label (web {web:.1f} ms, database {db:.1f} ms): a host with {cores} cores for "
        f"the web serves at most {per_host:.0f} labels/s; a database with {cores} cores at most {db_limit:.0f} "
        f"labels/s (its CPU alone; locks and I/O come on top)"
    )
    print(
        "  N hosts: "
        + ", ".join(f"{n} -> {min(n * per_host, db_limit):.0f} labels/s" for n in (1, 2, 4, 8))
        + f"; the database is the limit from about {db_limit / per_host:.1f} hosts on"
    )


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
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers (per host)")
    parser.add_argument("--baseline-seconds", type=float, default=5.0)
    parser.add_argument(
        "--no-pool", action="store_true", help="PostgreSQL: a new connection per request (DATABASE_POOL=0)"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--hosts", type=int, choices=[2], help="also run on 2 gunicorn instances (one database) and compare with 1"
    )
    mode.add_argument(
        "--paced", type=int, metavar="CLIENTS", help="this many annotators with 3-8 s think time between labels"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and the bench study")
    args = parser.parse_args()
    if args.paced:
        args.annotators = args.paced
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

    # default mode: two requests per label (the baseline) and one (submit returns next), each on a fresh study
    compare_flows = not args.hosts and not args.paced
    slugs = [SLUG, f"{SLUG}-2"] if args.hosts or compare_flows else [SLUG]
    password = secrets.token_urlsafe(16)
    for slug in slugs:  # one fresh study per run, the same size
        names = setup_study(items, args.annotators, password, slug)
    vacuum()
    tokens = issue_tokens(names)
    database = connection.settings_dict["NAME"] if connection.vendor == "postgresql" else None
    connection.close()  # the servers do the work from here on

    servers: list[subprocess.Popen] = []
    runs: list[Run] = []
    try:
        first, base = start_server(env, args.workers, folder / "gunicorn-1.log")
        servers.append(first)
        per_second_baseline, baseline_p50 = baseline(base, tokens[:50], args.baseline_seconds)
        if compare_flows:
            runs.append(label_run("two requests per label", [base], tokens, SLUG, {first.pid}, database, flow="two"))
            runs.append(label_run("one request per label", [base], tokens, slugs[1], {first.pid}, database))
        else:
            runs.append(
                label_run(
                    "1 host",
                    [base],
                    tokens,
                    SLUG,
                    {first.pid},
                    database,
                    think=THINK_SECONDS if args.paced else None,
                )
            )
        if args.hosts:
            second, second_base = start_server(env, args.workers, folder / "gunicorn-2.log")
            servers.append(second)
            runs.append(label_run("2 hosts", [base, second_base], tokens, slugs[1], {first.pid, second.pid}, database))
    finally:
        stop_servers(servers)

    pooling = (
        ""
        if args.db != "postgres"
        else (" without a connection pool" if args.no_pool else " with the psycopg pool (DATABASE_POOL=1)")
    )
    clients = f"{args.annotators} annotators over HTTP, " + (
        f"{THINK_SECONDS[0]:g}-{THINK_SECONDS[1]:g} s think time between labels" if args.paced else "no think time"
    )
    print(
        f"database: {'PostgreSQL' + pooling if args.db == 'postgres' else 'SQLite file (WAL) in ' + str(folder)}; "
        f"gunicorn {args.workers} sync workers per host; {clients}; "
        f"{os.cpu_count()} cores (clients, servers and database share them)"
    )
    print(
        f"baseline: GET /api/studies/{SLUG}/ at {per_second_baseline:.0f} requests/s from {len(tokens[:50])} clients, "
        f"p50 {baseline_p50 * 1000:.1f} ms (same server, same clients)"
    )
    ok = True
    for run in runs:
        print(
            f"{run.name}: {run.tally.labels:,} labels in {run.wall:.1f} s = {run.rate:.1f} labels/s "
            + (
                "(paced by the think time)"
                if args.paced
                else f"(one label = {per_second_baseline / run.rate:.1f} baseline requests)"
            )
        )
        print_latencies(run.tally)
        print_cpu(run)
        ok = print_checks(run, items * N) and ok
    if args.hosts:
        one, two = runs
        print(f"2 hosts / 1 host: {two.rate / one.rate:.2f} x the labels/s on this {os.cpu_count()}-core machine")
        implied_hosts(one)
    if args.paced:
        p95 = percentile(runs[0].tally.latency["label"], 0.95)
        print(
            f"paced p95 per label: {p95 * 1000:.0f} ms = {p95 / baseline_p50:.1f} x the baseline request's p50; "
            f"goal p95 < 300 ms: {'met' if p95 < 0.3 and ok else 'MISSED'}"
        )
    elif compare_flows:
        two, one = runs
        server_ms = {run.name: run.per_label_ms("web server") + run.per_label_ms("database") for run in runs}
        print(
            f"one request / two requests per label: {one.rate / two.rate:.2f} x the labels/s, "
            f"{server_ms[one.name] / server_ms[two.name]:.2f} x the server CPU per label "
            f"({server_ms[one.name]:.1f} ms against {server_ms[two.name]:.1f} ms, web + database)"
        )
        cores = os.cpu_count() or 1
        print(f"implied on this machine with nothing else running: {cores / server_ms[one.name] * 1000:.0f} labels/s")
        if args.db == "postgres":
            met = one.rate >= 60 and ok and server_ms[one.name] <= 8
            print(
                "goal (PostgreSQL): >= 60 labels/s, <= 8 ms server CPU per label, zero errors, zero over-assignment: "
                + ("met" if met else "MISSED")
            )
    if not args.keep:
        import shutil

        if args.db == "postgres":
            from django.contrib.auth import get_user_model

            from annotation.models import Study

            Study.objects.filter(slug__in=slugs).delete()
            get_user_model().objects.filter(username__in=names).delete()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
