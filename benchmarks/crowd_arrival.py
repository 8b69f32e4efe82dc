"""Crowd arrivals through a participant link over HTTP (issue 13): arrivals per second and time to first item.

Starts gunicorn as benchmarks/annotate_load.py does (production settings; PostgreSQL with
`--db postgres`, the default when DATABASE_URL is set, else a SQLite file), makes a
verification study with a participant link switched on, and lets 200 simulated participants
(threads, each with its own cookie jar: its own browser) arrive at random moments within a
minute. Each does what a person from Prolific does first: opens the link with PROLIFIC_PID,
STUDY_ID and SESSION_ID (a redirect to the consent page), accepts the consent, starts after
the instructions and receives the first item. Printed: arrivals per second (completed first
items over the run's wall time), p50/p95/max time from opening the link to the first item,
errors, and the check that nobody holds more than one item. Goal on PostgreSQL with gunicorn:
p95 under 1 s, 0 errors.

    python benchmarks/crowd_arrival.py [--db postgres|sqlite] [--participants 200] [--window 60] [--workers 4]
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from annotate_load import free_port, percentile, server_env

REPO = Path(__file__).resolve().parents[1]
SLUG = "bench-crowd"
CSRF = re.compile(rb'name="csrfmiddlewaretoken" value="([^"]+)"')


def setup_study(items: int) -> str:
    """The study, its items and its link (on); returns the link's token."""
    import io

    from annotation.crowd.services import configure_link
    from annotation.models import Study
    from annotation.studies.services import create_study
    from annotation.transfer.services.item_import import import_items

    Study.objects.filter(slug=SLUG).delete()
    study = create_study(slug=SLUG, name="Crowd arrival benchmark", kind="verification", annotators_per_item=3)
    lines = [json.dumps({"id": f"c-{n:05d}", "claim": f"Claim {n}.", "context": "A sentence."}) for n in range(items)]
    import_items(study=study, stream=io.BytesIO("\n".join(lines).encode()), fmt="jsonl")
    link = configure_link(
        study=study,
        changes={"enabled": True, "code_completed": "BENCH1", "items_per_participant": 5, "consent": "You agree."},
    )
    return link.token


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first_item: list[float] = []
        self.errors: list[str] = []

    def done(self, seconds: float) -> None:
        with self.lock:
            self.first_item.append(seconds)

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


def participant(base: str, token: str, pid: str, delay: float, tally: Tally) -> None:
    """One person: open the link, consent, start, see the first item."""
    time.sleep(delay)
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def fetch(path: str, form: dict[str, str] | None = None) -> tuple[int, bytes]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        try:
            with opener.open(urllib.request.Request(base + path, data=data), timeout=60) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    start = time.perf_counter()
    try:
        status, page = fetch(f"/p/{token}/?PROLIFIC_PID={pid}&STUDY_ID=S1&SESSION_ID={pid}s")
        if status != 200 or b"consent-agree" not in page:
            return tally.error(f"arrival {status}")
        step = f"/crowd/{SLUG}/"
        for form in ({"action": "consent", "agree": "yes"}, {"action": "start"}):
            found = CSRF.search(page)
            if found is None:
                return tally.error("no CSRF token on the page")
            status, page = fetch(step, {**form, "csrfmiddlewaretoken": found.group(1).decode()})
            if status != 200:
                return tally.error(f"{form['action']} {status}")
        if b'name="label"' not in page:
            return tally.error("no item after the instructions")
        tally.done(time.perf_counter() - start)
    except Exception as exc:  # a benchmark counts every failure, whatever it is
        tally.error(f"{type(exc).__name__}: {exc}"[:160])


def verify() -> dict[str, int]:
    from django.db.models import Count

    from annotation.models import Assignment, Participant

    held = (
        Assignment.objects.filter(study__slug=SLUG, status="active")
        .values("annotator_id")
        .annotate(n=Count("pk"))
        .order_by()
    )
    return {
        "participants": Participant.objects.filter(study__slug=SLUG).count(),
        "items held": sum(row["n"] for row in held),
        "people holding more than one item": sum(1 for row in held if row["n"] > 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--db", choices=["sqlite", "postgres"], default="postgres" if os.environ.get("DATABASE_URL") else "sqlite"
    )
    parser.add_argument("--participants", type=int, default=200)
    parser.add_argument("--window", type=float, default=60.0, help="seconds over which they arrive")
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--no-pool", action="store_true", help="PostgreSQL: a new connection per request")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="claimlab-crowd-"))
    env = server_env(args, folder)
    for key in ("DJANGO_SETTINGS_MODULE", "DEBUG", "SECRET_KEY", "CLAIMLAB_VAR_DIR", "LOG_LEVEL", "STATIC_ROOT"):
        os.environ[key] = env[key]
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

    token = setup_study(args.items)
    connection.close()

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    gunicorn = [str(Path(sys.executable).with_name("gunicorn")), "config.wsgi:application"]
    server = subprocess.Popen(
        [*gunicorn, "--workers", str(args.workers), "--bind", f"127.0.0.1:{port}", "--log-level", "warning"],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "gunicorn.log", "wb"),
    )
    try:
        for _ in range(200):
            try:
                with urllib.request.urlopen(base + "/accounts/login/", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit(f"gunicorn did not start; see {folder / 'gunicorn.log'}")
        rng = random.Random(13)
        tally = Tally()
        threads = [
            threading.Thread(target=participant, args=(base, token, f"{k:024x}", rng.uniform(0, args.window), tally))
            for k in range(args.participants)
        ]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start
    finally:
        server.terminate()
        server.wait(timeout=30)

    times = tally.first_item
    print(f"database: {connection.vendor}, gunicorn workers: {args.workers}")
    print(f"participants: {args.participants} arriving within {args.window:.0f} s; first items: {len(times)}")
    print(f"arrivals per second (first items over {wall:.1f} s): {len(times) / wall:.2f}")
    if times:
        print(
            f"time to first item: p50 {percentile(times, 0.5) * 1000:.0f} ms, "
            f"p95 {percentile(times, 0.95) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
        )
    print(f"errors: {len(tally.errors)}" + (f" (first: {tally.errors[:3]})" if tally.errors else ""))
    print("checks:", verify())
    p95 = percentile(times, 0.95) if times else float("inf")
    print("goal (p95 < 1 s, 0 errors):", "met" if p95 < 1.0 and not tally.errors else "NOT met")


if __name__ == "__main__":
    main()
