"""Annotators during a big item import on SQLite: do they wait, or fail? (issue 10, §2)

An annotator labels continuously in this process (the real services:
claim_next then submit, one label per turn, on a small study) while
`manage.py import_items` loads a big file into another study in a second
process, on the same SQLite file (WAL, 20 s busy timeout, as `make run` uses).
Baseline, in the same run: the same annotator turns with no import running.

Printed: turns during the import, their p50 / p95 / max latency as ratios to
the baseline's, lock errors (the annotator would have seen a 503), and the
import's wall time. Before staging (one transaction for the whole file) the
annotator's turns waited for the whole import and failed past 20 s.

    python benchmarks/import_contention.py [--items 300000]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=300_000)
    parser.add_argument("--baseline-turns", type=int, default=300)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="claimlab-contention-"))
    os.environ.pop("DATABASE_URL", None)
    os.environ.update(
        {"DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings", "CLAIMLAB_VAR_DIR": str(folder / "var")}
    )
    os.environ["LOG_LEVEL"] = "WARNING"
    from import_export import generate  # the realistic verification file of the import benchmark

    print(f"generating {args.items:,} items in {folder} ...", flush=True)
    items_file, _ = generate(folder, args.items, 1, 1)

    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection

    from annotation.lib.dblocks import is_lock_error
    from annotation.members.services import add_members
    from annotation.studies.services import create_study
    from annotation.transfer.services.item_import import import_items
    from annotation.workbench.services import SubmittedAnswer, claim_next, submit

    call_command("migrate", verbosity=0)
    create_study(slug="big-import", name="Big import", kind="verification", annotators_per_item=1)
    # Room for 100,000 turns: 5 annotators taking turns over 20,000 items, 5 labels each.
    labelled = create_study(slug="annotating", name="Annotating", kind="verification", annotators_per_item=5)
    small = "\n".join(f'{{"id": "a-{n}", "claim": "Claim {n}.", "context": "Context."}}' for n in range(20_000))
    import_items(study=labelled, stream=io.BytesIO(small.encode()), fmt="jsonl")
    names = [f"annotator-{n}" for n in range(5)]
    add_members(study=labelled, usernames=names, role="annotator")
    annotators = list(User.objects.filter(username__in=names))
    turns = 0

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

    baseline = [turn()[0] for _ in range(args.baseline_turns)]
    connection.close()

    command = [sys.executable, str(REPO / "manage.py"), "import_items", "big-import", str(items_file)]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    during: list[float] = []
    failures = 0
    while process.poll() is None:
        seconds, ok = turn()
        during.append(seconds)
        failures += not ok
    import_seconds = time.perf_counter() - started
    if process.returncode != 0:
        assert process.stderr is not None
        raise SystemExit(f"the import failed:\n{process.stderr.read().decode()}")

    def p95(values: list[float]) -> float:
        return statistics.quantiles(values, n=20)[-1] if len(values) >= 20 else max(values)

    base50, base95 = statistics.median(baseline), p95(baseline)
    print(f"\nSQLite file (WAL), {os.cpu_count()} cores; import of {args.items:,} items took {import_seconds:.1f} s")
    print(f"{'annotator turn (claim + submit)':<36} {'turns':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    print(
        f"{'baseline: no import':<36} {len(baseline):6d} {base50 * 1000:8.1f} {base95 * 1000:8.1f} "
        f"{max(baseline) * 1000:8.1f}"
    )
    print(
        f"{'during the import':<36} {len(during):6d} {statistics.median(during) * 1000:8.1f} "
        f"{p95(during) * 1000:8.1f} {max(during) * 1000:8.1f}"
    )
    print(
        f"\nratios to baseline: p50 x{statistics.median(during) / base50:.1f}, p95 x{p95(during) / base95:.1f}; "
        f"longest wait {max(during):.2f} s (busy timeout 20 s); lock errors: {failures}"
    )


if __name__ == "__main__":
    main()
