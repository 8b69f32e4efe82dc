"""Verifier throughput: 10,000 claims at concurrency 64 against a loopback server with 200 ms latency.

The fake OpenAI-compatible server (tests/support/fake_openai.py) runs in its
own process, so client and server each have a core. Every request waits
200 ms, so no runner can beat the latency bound of
    10,000 x 0.2 s / 64 = 31.25 s;
we print the wall time of a run that stores every prediction, requests per
second, and the ratio to that bound (goal: within 2x on a 2-core machine).
Then the same verifier runs again: every item has an answer for its cache
key, so the rerun must send zero requests (the server's own count says so).

    python benchmarks/verifier_throughput.py [--claims 10000] [--concurrency 64] [--latency 0.2]

Uses a fresh SQLite file in a temporary folder, or the database in
DATABASE_URL when it is set (a temporary study, deleted afterwards).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "support" / "fake_openai.py"), "--port", "0", "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None  # stdout=PIPE above
    line = process.stdout.readline().strip()
    if not line.startswith("PORT "):
        process.kill()
        raise SystemExit(f"the fake server did not start: {line!r}")
    return process, f"http://127.0.0.1:{line.split()[1]}/v1"


def server_requests(base_url: str) -> int:
    with urllib.request.urlopen(base_url + "/stats", timeout=10) as response:
        return json.loads(response.read())["requests"]


def items_file(n: int) -> io.BytesIO:
    lines = []
    for k in range(n):
        lines.append(
            json.dumps(
                {
                    "id": f"claim-{k:05d}",
                    "domain": "bench",
                    "claim": f"The museum number {k} was founded in {1800 + k % 200}.",
                    "system": f"system-{k % 4}",
                    "response_id": f"r-{k // 10:05d}",
                    "evidence": [
                        {
                            "text": f"Museum {k} opened its doors in {1800 + k % 200} in the old town.",
                            "title": "City history",
                            "url": f"https://example.org/{k}",
                        }
                    ],
                }
            )
        )
    return io.BytesIO(("\n".join(lines) + "\n").encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="claimlab-bench-verifier-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["DEBUG"] = "0"  # no query log, as in production
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["CLAIMLAB_VAR_DIR"] = str(folder)
    database = os.environ.get("DATABASE_URL", "").strip()
    if not database:
        os.environ["DATABASE_URL"] = f"sqlite:///{folder / 'bench.sqlite3'}"
    import logging

    import django

    django.setup()
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    from django.conf import settings
    from django.core.management import call_command

    from annotation.studies.services import create_study
    from annotation.transfer.services.item_import import import_items
    from metaeval.models import Prediction
    from metaeval.verifiers.runner.orchestration import run_to_completion
    from metaeval.verifiers.services import create_verifier, start_run

    call_command("migrate", verbosity=0)
    server, base_url = start_server(args.latency)
    slug = f"bench-verifier-{os.getpid()}"
    study = None
    try:
        study = create_study(slug=slug, name="Verifier throughput", kind="verification")
        import_items(study=study, stream=items_file(args.claims), fmt="jsonl")
        # The fake server as an operator endpoint of this process (CLAIMLAB_ENDPOINTS in a deployment).
        settings.VERIFIER_ENDPOINTS = {**settings.VERIFIER_ENDPOINTS, "bench": {"base_url": base_url, "key_env": ""}}
        settings.VERIFIER_MAX_CONCURRENCY = max(settings.VERIFIER_MAX_CONCURRENCY, args.concurrency)
        verifier = create_verifier(
            study=study,
            name="fake-llm",
            preset="custom",
            model="fake-model",
            endpoint="bench",
            concurrency=args.concurrency,
            timeout=30,
            retries=2,
        )
        before = server_requests(base_url)
        started, cpu = time.perf_counter(), time.process_time()
        run = run_to_completion(start_run(verifier=verifier, enqueue=False))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        sent = server_requests(base_url) - before
        stored = Prediction.objects.filter(verifier=verifier).count()
        labelled = Prediction.objects.filter(verifier=verifier, label="supported").count()

        before = server_requests(base_url)
        started = time.perf_counter()
        rerun = run_to_completion(start_run(verifier=verifier, enqueue=False))
        rerun_wall = time.perf_counter() - started
        resent = server_requests(base_url) - before

        bound = args.claims * args.latency / args.concurrency
        engine = "PostgreSQL" if "postgres" in os.environ["DATABASE_URL"] else "SQLite file"
        print(
            f"verifier throughput ({engine}, {os.cpu_count()} cores): {args.claims:,} claims, concurrency "
            f"{args.concurrency}, {args.latency * 1000:.0f} ms per request"
        )
        print(
            f"  run {run.pk}: {run.status}, wall time {wall:.1f} s, {sent:,} requests sent, {sent / wall:.0f} requests/s "
            f"(runner process CPU {cpu:.1f} s = {cpu / wall:.0%} of a core)"
        )
        print(
            f"  stored {stored:,} predictions ({labelled:,} labelled supported, {run.errors} errors, "
            f"{run.unparseable} unparseable), {run.tokens_in:,} tokens in / {run.tokens_out:,} out"
        )
        print(f"  latency bound {bound:.2f} s; wall time / bound = {wall / bound:.2f}x (goal: at most 2x)")
        print(
            f"  rerun {rerun.pk}: {rerun.status} in {rerun_wall:.1f} s, {rerun.cached:,} cached, "
            f"requests the server saw: {resent}"
        )
        ok = run.status == "succeeded" and stored == args.claims and sent == args.claims and resent == 0
        return 0 if ok else 1
    finally:
        server.terminate()
        server.wait(10)
        if study is not None and database:
            study.delete()


if __name__ == "__main__":
    sys.exit(main())
