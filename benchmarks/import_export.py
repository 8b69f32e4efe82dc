"""Import/export at scale: 100,000 verification items and 300,000 annotations.

Each phase runs as its own process (the real `manage.py` commands), so its
wall time and peak RSS are its own. The baseline is plain `json.loads` over
the same file, in the same run. Goals (issue 2): item import < 30 s and peak
RSS < 400 MB; export < 15 s.

    python benchmarks/import_export.py [--items 100000] [--keep]

Uses a fresh SQLite file in a temporary folder, or the database in
DATABASE_URL when it is set (its `bench-import` study is replaced).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = (
    "the",
    "river",
    "court",
    "1980",
    "president",
    "museum",
    "was",
    "founded",
    "in",
    "paris",
    "won",
    "award",
    "novel",
)
SOURCE_TYPES = ("news", "wikipedia", "academic", "government", "web")
LABELS = ("supported", "contradicted", "inconclusive")


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def generate(folder: Path, n_items: int, per_item: int, n_annotators: int) -> tuple[Path, Path]:
    """A realistic verification file (claim, context, 3 passages) and its labels."""
    rng = random.Random(7)
    items = folder / "items.jsonl"
    labels = folder / "annotations.jsonl"
    with items.open("w", encoding="utf-8") as out:
        for n in range(n_items):
            record = {
                "id": f"c-{n:06d}",
                "domain": rng.choice(("biography", "science", "history", "sports")),
                "claim": sentence(rng, 14),
                "context": sentence(rng, 30),
                "response_id": f"r-{n // 8:06d}",
                "system": rng.choice(("gpt-4o", "llama-3-70b", "mistral-large")),
                "evidence": [
                    {
                        "text": sentence(rng, 60),
                        "title": sentence(rng, 5),
                        "url": f"https://example.org/{n}/{k}",
                        "source_type": rng.choice(SOURCE_TYPES),
                    }
                    for k in range(3)
                ],
            }
            out.write(json.dumps(record) + "\n")
    with labels.open("w", encoding="utf-8") as out:
        for n in range(n_items):
            for annotator in rng.sample(range(n_annotators), per_item):
                out.write(
                    json.dumps({"item": f"c-{n:06d}", "annotator": f"w{annotator:02d}", "label": rng.choice(LABELS)})
                    + "\n"
                )
    return items, labels


def run_phase(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run one process; return (wall seconds, its own peak RSS in MB)."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        assert process.stderr is not None  # stderr=PIPE above
        raise SystemExit(f"phase failed: {' '.join(argv)}\n{process.stderr.read().decode()}")
    return wall, usage.ru_maxrss / 1024


BASELINE = (
    "import json, sys\n"
    "n = 0\n"
    "with open(sys.argv[1], 'rb') as f:\n"
    "    for line in f:\n"
    "        json.loads(line); n += 1\n"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--per-item", type=int, default=3)
    parser.add_argument("--annotators", type=int, default=12)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="claimlab-bench-"))
    env = {
        **os.environ,
        "DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "CLAIMLAB_VAR_DIR": str(folder / "var"),
        "LOG_LEVEL": "WARNING",
    }
    manage = [sys.executable, str(REPO / "manage.py")]
    print(f"generating {args.items:,} items and {args.items * args.per_item:,} annotations in {folder} ...", flush=True)
    items, labels = generate(folder, args.items, args.per_item, args.annotators)
    print(f"  items file {items.stat().st_size / 1e6:.1f} MB, annotations file {labels.stat().st_size / 1e6:.1f} MB")

    run_phase([*manage, "migrate", "--no-input", "-v", "0"], env)
    if os.environ.get("DATABASE_URL"):
        run_phase(
            [
                *manage,
                "shell",
                "--no-imports",
                "-c",
                "from annotation.models import Study; Study.objects.filter(slug='bench-import').delete()",
            ],
            env,
        )
    run_phase(
        [
            *manage,
            "create_study",
            "bench-import",
            "--name",
            "Benchmark",
            "--kind",
            "verification",
            "--annotators-per-item",
            str(args.per_item),
        ],
        env,
    )

    python = [sys.executable, "-c", BASELINE]
    results = [
        ("baseline: json.loads over items file", *run_phase([*python, str(items)], env)),
        ("import_items (100k items)", *run_phase([*manage, "import_items", "bench-import", str(items)], env)),
        ("baseline: json.loads over annotations file", *run_phase([*python, str(labels)], env)),
        ("import_annotations", *run_phase([*manage, "import_annotations", "bench-import", str(labels)], env)),
        (
            "export_annotations --format csv",
            *run_phase(
                [*manage, "export_annotations", "bench-import", "--format", "csv", "--output", str(folder / "out.csv")],
                env,
            ),
        ),
        (
            "export_annotations --format jsonl",
            *run_phase(
                [
                    *manage,
                    "export_annotations",
                    "bench-import",
                    "--format",
                    "jsonl",
                    "--output",
                    str(folder / "out.jsonl"),
                ],
                env,
            ),
        ),
    ]
    exported = sum(1 for _ in (folder / "out.csv").open(encoding="utf-8")) - 1
    if exported != args.items * args.per_item:
        raise SystemExit(f"export has {exported} rows, expected {args.items * args.per_item}")

    base_items, base_labels = results[0][1], results[2][1]
    print(
        f"\ndatabase: {'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'SQLite file (WAL)'}; {os.cpu_count()} cores"
    )
    print(f"{'phase':<44} {'wall s':>8} {'x baseline':>11} {'peak RSS MB':>12}")
    for name, wall, rss in results:
        base = base_labels if "annotation" in name else base_items
        print(f"{name:<44} {wall:8.2f} {wall / base:11.1f} {rss:12.0f}")
    item_import, export_csv = results[1], results[4]
    print(
        f"\ngoals: item import {item_import[1]:.1f} s (< 30: {'met' if item_import[1] < 30 else 'MISSED'}), "
        f"peak RSS {item_import[2]:.0f} MB (< 400: {'met' if item_import[2] < 400 else 'MISSED'}), "
        f"export {export_csv[1]:.1f} s (< 15: {'met' if export_csv[1] < 15 else 'MISSED'}); "
        f"exported rows verified: {exported:,}"
    )
    if not args.keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
