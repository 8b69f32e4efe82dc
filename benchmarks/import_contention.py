"""Annotators during a big import: do they wait, or fail? (issue 10, §2; issue 35 at a million rows)

An annotator labels continuously in this process (the real services:
claim_next then submit, one label per turn, on a small study) while
`manage.py import_items` loads a big file into another study in a second
process, on the same SQLite file (WAL, 20 s busy timeout, as `make run` uses).
Baseline, in the same run: the same annotator turns with no import running.

Printed: turns during the import, their p50 / p95 / max latency as ratios to
the baseline's, lock errors (the annotator would have seen a 503), and the
import's wall time. The baseline's turns are taken half before the imports and half after
them (each half after a CHECKPOINT on PostgreSQL, so neither starts while the server writes
the files just generated or imported back to disk); both halves are printed, and the ratios
are to the two together. Then, per phase, where a turn's time went: each of its statements' mean as this
process timed it, and (Linux, the database on this machine) how long this process and its database server
process waited for a core, from /proc. Before staging (one transaction for the whole file) the
annotator's turns waited for the whole import and failed past 20 s.

    python benchmarks/import_contention.py [--items 300000]
    DATABASE_URL=postgres://... python benchmarks/import_contention.py --million [--items 1000000]

``--million`` (issue 35, PostgreSQL): the same annotator turns during ``import_items`` of a million
verification items and then during ``import_predictions`` of a million predictions (3 verifiers) on
those items, the files of ``import_export.py --million``; goal: p95 within 3x of no import.

``--hold SECONDS`` (PostgreSQL): no import; the same turns while another process holds a transaction
open for SECONDS, one that has written (it has a transaction id), as an import's one transaction does.
What it shows: while such a transaction runs, PostgreSQL can clean up none of the row versions that
later commits leave behind, so each claim walks past those the claims and answers before it left on
the index it reads (the study's unfinished items by slots taken): the turns slow down with the number
of turns taken since the transaction began, not with anything the import writes. The phase's turns
are printed in four quarters to show it growing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: An annotator turn's statements, by how their SQL starts (workbench/assignment_sql.py, submit_sql.py).
STATEMENTS = (
    ("claim's candidates", "SELECT 0, "),
    ("claim's slot", "WITH m AS ("),
    ("study still open", 'SELECT "annotation_study"."status"'),
    ("answer", "WITH submitted AS ("),
)


def run_queue_ns(pid: int | None) -> int | None:
    """Nanoseconds process ``pid`` has waited for a core (Linux: /proc/<pid>/schedstat); None where unreadable."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) if pid else None
    except (OSError, IndexError, ValueError):
        return None


class TurnBreakdown:
    """Where a phase's turns spent their time: each statement's mean (a Django execute wrapper) and, on Linux with
    the database on this machine, how long this process and its database server process waited for a core."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.backend: int | None = None
        self.waited: tuple[int | None, int | None] = (None, None)

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            kind = next((name for name, prefix in STATEMENTS if sql.startswith(prefix)), None)
            if kind is not None:
                self.seconds[kind].append(time.perf_counter() - started)

    def start(self, backend: int | None) -> None:
        self.seconds.clear()
        self.backend = backend
        self.waited = (run_queue_ns(os.getpid()), run_queue_ns(backend))

    def summary(self, turns: int) -> str:
        parts = [
            f"{name} {sum(self.seconds[name]) / turns * 1000:.2f}" for name, _ in STATEMENTS if self.seconds.get(name)
        ]
        mine, its = run_queue_ns(os.getpid()), run_queue_ns(self.backend)
        if self.waited[0] is not None and mine is not None:
            parts.append(f"this process waiting for a core {(mine - self.waited[0]) / turns / 1e6:.2f}")
        if self.waited[1] is not None and its is not None:
            parts.append(f"its database process waiting for a core {(its - self.waited[1]) / turns / 1e6:.2f}")
        return "ms per turn: " + ", ".join(parts)


#: ``--hold``: a transaction that has written (``txid_current()`` gives it an id, as an import's first row
#: does), held open for argv[1] seconds by a process of its own, then rolled back.
HOLD = (
    "import os, sys, time, psycopg\n"
    "with psycopg.connect(os.environ['DATABASE_URL']) as held:\n"
    "    held.execute('SELECT txid_current()')\n"
    "    time.sleep(float(sys.argv[1]))\n"
    "    held.rollback()\n"
)
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=None, help="rows (default 300,000; --million: 1,000,000)")
    parser.add_argument("--baseline-turns", type=int, default=1000, help="half before the imports, half after")
    parser.add_argument("--million", action="store_true", help="issue 35: PostgreSQL, items then predictions")
    parser.add_argument(
        "--hold", type=float, metavar="SECONDS", help="PostgreSQL: no import, a transaction held open this long"
    )
    args = parser.parse_args()
    args.items = args.items or (1_000_000 if args.million else 300_000)

    folder = Path(tempfile.mkdtemp(prefix="claimlab-contention-"))
    if args.million or args.hold:
        if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
            raise SystemExit("--million and --hold need DATABASE_URL pointing at PostgreSQL")
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ.update(
        {"DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings", "CLAIMLAB_VAR_DIR": str(folder / "var")}
    )
    os.environ["LOG_LEVEL"] = "WARNING"
    from import_export import generate, generate_million  # the realistic files of the import benchmark

    items_file: Path | None = None  # --hold: none
    predictions_file: Path | None = None
    if args.million and not args.hold:
        print(f"generating {args.items:,} items in {folder} ...", flush=True)
        items_file, _, predictions_file, _ = generate_million(folder, args.items)
    elif not args.hold:
        print(f"generating {args.items:,} items in {folder} ...", flush=True)
        items_file, _ = generate(folder, args.items, 1, 1)

    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import DatabaseError, connection

    from annotation.lib.dblocks import is_lock_error
    from annotation.members.services import add_members
    from annotation.models import Study
    from annotation.studies.services import create_study
    from annotation.transfer.services.item_import import import_items
    from annotation.workbench.services import SubmittedAnswer, claim_next, submit

    call_command("migrate", verbosity=0)
    Study.objects.filter(slug__in=["big-import", "annotating"]).delete()  # an earlier run's, on PostgreSQL
    create_study(slug="big-import", name="Big import", kind="verification", annotators_per_item=1)
    # Room for 100,000 turns: 5 annotators taking turns over 20,000 items, 5 labels each.
    labelled = create_study(slug="annotating", name="Annotating", kind="verification", annotators_per_item=5)
    small = "\n".join(f'{{"id": "a-{n}", "claim": "Claim {n}.", "context": "Context."}}' for n in range(20_000))
    import_items(study=labelled, stream=io.BytesIO(small.encode()), fmt="jsonl")
    names = [f"annotator-{n}" for n in range(5)]
    add_members(study=labelled, usernames=names, role="annotator")
    annotators = list(User.objects.filter(username__in=names))
    turns = 0
    breakdown = TurnBreakdown()
    wrapped = contextlib.ExitStack()
    wrapped.enter_context(connection.execute_wrapper(breakdown))
    where_time_went: dict[str, str] = {}

    def backend_pid() -> int | None:
        """The process of PostgreSQL serving this connection (it connects if it has to)."""
        if connection.vendor != "postgresql":
            return None
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return int(cursor.fetchone()[0])

    def turn() -> tuple[float, bool]:
        nonlocal turns
        turns += 1
        annotator = annotators[turns % len(annotators)]
        start = time.perf_counter()
        try:
            assignment = claim_next(user=annotator, study=labelled)
            assert assignment is not None, "the annotating study ran out of items"
            submit(
                user=annotator, study=labelled, assignment_id=assignment.pk, answer=SubmittedAnswer(label="supported")
            )
            return time.perf_counter() - start, True
        except Exception as exc:
            if not is_lock_error(exc):
                raise
            return time.perf_counter() - start, False

    def settled_turns(count: int, name: str) -> list[float]:
        """`count` turns with no import running, once the server has written what came before to disk."""
        if connection.vendor == "postgresql":
            try:
                with connection.cursor() as cursor:
                    cursor.execute("CHECKPOINT")
            except DatabaseError as error:  # CHECKPOINT needs a superuser or pg_checkpoint: go on without it
                print(f"(no CHECKPOINT before the baseline: {error})".strip(), flush=True)
        breakdown.start(backend_pid())
        taken = [turn()[0] for _ in range(count)]
        where_time_went[name] = breakdown.summary(max(1, count))
        return taken

    baseline_before = settled_turns(args.baseline_turns // 2, "baseline: no import, before")
    connection.close()

    def wal_position() -> str | None:
        """PostgreSQL's write-ahead log position (what an import writes there is what each commit must flush)."""
        if connection.vendor != "postgresql":
            return None
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn()::text")
            return cursor.fetchone()[0]

    def wal_written(since: str | None) -> str:
        if since is None:
            return ""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)", [since])
            return f"; write-ahead log written {float(cursor.fetchone()[0]) / 2**20:,.0f} MB"

    wal: dict[str, str] = {}

    def during_import(command: list[str], name: str) -> tuple[list[float], int, float]:
        """The annotator's turns while ``command`` runs in its own process: latencies, lock errors, its seconds."""
        since = wal_position()
        breakdown.start(backend_pid())
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        during: list[float] = []
        failures = 0
        while process.poll() is None:
            seconds, ok = turn()
            during.append(seconds)
            failures += not ok
        if process.returncode != 0:
            assert process.stderr is not None
            raise SystemExit(f"the {name} failed:\n{process.stderr.read().decode()}")
        where_time_went[f"during {name}"] = breakdown.summary(max(1, len(during)))
        wal[name] = wal_written(since)
        return during, failures, time.perf_counter() - started

    manage = [sys.executable, str(REPO / "manage.py")]
    phases: list[tuple[str, tuple[list[float], int, float]]] = []
    if args.hold:
        held = [sys.executable, "-c", HOLD, str(args.hold)]
        phases.append(("a transaction held open", during_import(held, "a transaction held open")))
    else:
        phases.append(
            (
                "the items import",
                during_import([*manage, "import_items", "big-import", str(items_file)], "the items import"),
            )
        )
    if predictions_file is not None:
        command = [*manage, "import_predictions", "big-import", str(predictions_file)]
        phases.append(("the predictions import", during_import(command, "the predictions import")))

    def p95(values: list[float]) -> float:
        return statistics.quantiles(values, n=20)[-1] if len(values) >= 20 else max(values)

    baseline_after = settled_turns(args.baseline_turns - len(baseline_before), "baseline: no import, after")
    wrapped.close()
    baseline = baseline_before + baseline_after
    base50, base95 = statistics.median(baseline), p95(baseline)
    where = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite file (WAL)"
    load = os.getloadavg()
    print(f"\n{where}, {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'annotator turn (claim + submit)':<40} {'turns':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for name, turns_taken in (
        ("baseline: no import, before", baseline_before),
        ("baseline: no import, after", baseline_after),
        ("baseline: both (the ratios' base)", baseline),
    ):
        print(
            f"{name:<40} {len(turns_taken):6d} {statistics.median(turns_taken) * 1000:8.1f} "
            f"{p95(turns_taken) * 1000:8.1f} {max(turns_taken) * 1000:8.1f}"
        )
    for name, (during, failures, seconds) in phases:
        print(
            f"{f'during {name} ({seconds:.0f} s)':<40} {len(during):6d} "
            f"{statistics.median(during) * 1000:8.1f} {p95(during) * 1000:8.1f} {max(during) * 1000:8.1f}"
        )
        verdict = "met" if p95(during) / base95 <= 3 and not failures else "MISSED"
        goal = "" if args.hold else f"; goal p95 within 3x: {verdict}"  # the goal is the imports'; --hold explains
        print(
            f"  {name}: {len(during) / seconds:.0f} turns/s; ratios to baseline p50 x{statistics.median(during) / base50:.1f}, "
            f"p95 x{p95(during) / base95:.1f}; longest wait {max(during):.2f} s; lock errors: {failures}"
            f"{goal}{wal[name]}"
        )
        quarter = len(during) // 4
        if args.hold and quarter:
            medians = [statistics.median(during[n * quarter : (n + 1) * quarter]) * 1000 for n in range(4)]
            print("  p50 by quarter of its turns: " + ", ".join(f"{median:.1f} ms" for median in medians))
    print("where a turn's time went (its statements as this process timed them; waits for a core from /proc):")
    for name, summary in where_time_went.items():
        print(f"  {name}: {summary}")
    if args.million or args.hold:
        Study.objects.filter(slug__in=["big-import", "annotating"]).delete()


if __name__ == "__main__":
    main()
