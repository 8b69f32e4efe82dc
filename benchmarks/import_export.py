"""Import/export at scale: 100,000 verification items and 300,000 annotations.

Each phase runs as its own process (the real `manage.py` commands), so its
wall time and peak RSS are its own. The baseline is plain `json.loads` over
the same file, in the same run. Goals (issue 2): item import < 30 s and peak
RSS < 400 MB; export < 15 s.

    python benchmarks/import_export.py [--items 100000] [--keep]

Uses a fresh SQLite file in a temporary folder, or the database in
DATABASE_URL when it is set (its `bench-import` study is replaced).

    DATABASE_URL=postgres://... python benchmarks/import_export.py --million [--rows 1000000]

`--million` (PostgreSQL, issue 35): `import_items` of ROWS verification items
and `import_predictions` of ROWS predictions (3 verifiers over a third of the
items each), each as a ratio to a bare COPY of the same rows, already in the
table's column format, into a table with the same columns, constraints and
indexes (CREATE TABLE ... LIKE ... INCLUDING ALL, plus the real table's foreign keys,
which LIKE leaves out; the bare COPY without them is printed too), in the same run; with each
process's peak RSS. Goals: ratio <= 2, peak RSS < 500 MB. Then the exports of those predictions:
`manage.py export_predictions` as CSV and as JSON Lines, and the Hugging Face dataset's `predictions`
config (parquet), each as a ratio to a bare `COPY (SELECT the same columns, same order) TO STDOUT`
into a file in the same run, with peak RSS; timed inside each process (the export runs in the
background worker, already started) and as whole processes. Goals: ratio <= 2, peak RSS < 300 MB.
`--exports-only` times the exports of the study a previous `--million --keep-study` left.
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
                "domain": ("biography", "science", "history", "sports")[n // 8 % 4],  # one domain per response
                "claim": sentence(rng, 14),
                "context": sentence(rng, 30),
                "response_id": f"r-{n // 8:06d}",
                "system": ("gpt-4o", "llama-3-70b", "mistral-large")[n // 8 % 3],  # one system per response
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


MILLION_VERIFIERS = ("veriscore-gpt4o", "factscore-llama", "safe-mistral")

#: A bare COPY of a file into a table made like `like`: its columns, defaults, checks and indexes
#: (LIKE ... INCLUDING ALL) and, with a fifth argument "keys", its foreign keys too (LIKE copies none;
#: the issue's baseline is a table "with the same columns, constraints and indexes"), checked at commit
#: as the real ones are (DEFERRABLE INITIALLY DEFERRED, from pg_get_constraintdef).
BARE_COPY = (
    "import os, sys, psycopg\n"
    "table, like, columns, path = sys.argv[1:5]\n"
    "keys = sys.argv[5:6] == ['keys']\n"
    "with psycopg.connect(os.environ['DATABASE_URL']) as conn:\n"
    "    conn.execute(f'DROP TABLE IF EXISTS {table}')\n"
    "    conn.execute(f'CREATE TABLE {table} (LIKE {like} INCLUDING ALL)')\n"
    "    if keys:\n"
    "        for (definition,) in conn.execute(\n"
    "            \"SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f'\",\n"
    "            [like],\n"
    "        ).fetchall():\n"
    "            conn.execute(f'ALTER TABLE {table} ADD {definition}')\n"
    "    conn.commit()\n"
    "    with conn.cursor() as cur, cur.copy(f'COPY {table} ({columns}) FROM STDIN') as copy, open(path, 'rb') as f:\n"
    "        while chunk := f.read(1 << 20):\n"
    "            copy.write(chunk)\n"
    "    conn.commit()\n"
    "    conn.execute(f'DROP TABLE {table}')\n"
)
BARE_COPY_OUT = (
    "import os, sys, time, psycopg\n"
    "statement, path = sys.argv[1:3]\n"
    "start = time.perf_counter()\n"
    "with psycopg.connect(os.environ['DATABASE_URL']) as conn, open(path, 'wb') as out:\n"
    "    with conn.cursor() as cur, cur.copy(statement) as copy:\n"
    "        for data in copy:\n"
    "            out.write(data)\n"
    "print(f'seconds={time.perf_counter() - start}')\n"
)
#: The predictions export's rows, as they are: the same columns, joins and order, no cell made safe.
EXPORT_SELECT = (
    "SELECT i.external_id, v.name, p.label, p.score, p.rationale, p.raw_label, p.parse_status, p.error, "
    "p.latency_ms, p.tokens_in, p.tokens_out, p.order_labels, p.raw_output FROM metaeval_prediction p "
    "JOIN metaeval_verifier v ON v.id = p.verifier_id JOIN annotation_item i ON i.id = p.item_id "
    "JOIN annotation_study s ON s.id = v.study_id WHERE s.slug = 'bench-million' "
    "ORDER BY p.id"
)
#: An export timed inside its process, as the background worker (already running) runs it.
TIMED_EXPORT = (
    "import os, time; from pathlib import Path; from annotation.models import Study; "
    "from metaeval.dataset_export.predictions import write_prediction_parquet; "
    "from metaeval.verifiers.prediction_export import write_predictions; "
    "study = Study.objects.get(slug='bench-million'); fmt, path = os.environ['BENCH_FORMAT'], Path(os.environ['BENCH_OUT']); "
    "start = time.perf_counter(); "
    "write_prediction_parquet(study, path) if fmt == 'parquet' else write_predictions(study, fmt, path); "
    "print(f'seconds={time.perf_counter() - start}')"
)


def run_timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Run one process that prints `seconds=` (its own timing of the work); (wall, that time, peak RSS MB)."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    assert process.stdout is not None and process.stderr is not None  # PIPE above
    if status != 0:
        raise SystemExit(f"phase failed: {' '.join(argv)}\n{process.stderr.read().decode()}")
    inner = float(process.stdout.read().decode().strip().rsplit("seconds=", 1)[1])
    return wall, inner, usage.ru_maxrss / 1024


ITEM_COLUMNS = (
    "study_id, external_id, position, claim_rank, domain, summary, payload, response_id, system, gold_label, "
    "gold_raw, slots_taken, created_at, updated_at"
)
PREDICTION_COLUMNS = (
    "verifier_id, item_id, label, raw_label, score, rationale, raw_output, parse_status, tokens_in, tokens_out, "
    "error, order_labels, cache_key, created_at, updated_at"
)


def _copy_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def generate_million(folder: Path, rows: int) -> tuple[Path, Path, Path, Path]:
    """ROWS verification items and ROWS predictions (JSONL), and the same rows in COPY text format."""
    rng = random.Random(11)
    items, items_copy = folder / "items.jsonl", folder / "items.copy"
    predictions, predictions_copy = folder / "predictions.jsonl", folder / "predictions.copy"
    stamp = "2026-01-01 00:00:00+00"
    with items.open("w", encoding="utf-8") as out, items_copy.open("w", encoding="utf-8") as bare:
        for n in range(rows):
            claim = sentence(rng, 14)
            record: dict[str, object] = {
                "id": f"c-{n:07d}",
                "domain": ("biography", "science", "history", "sports")[n // 8 % 4],  # one domain per response
                "claim": claim,
                "context": sentence(rng, 20),
                "response_id": f"r-{n // 8:07d}",
                "system": ("gpt-4o", "llama-3-70b", "mistral-large")[n // 8 % 3],  # one system per response
                "evidence": [{"text": sentence(rng, 30), "url": f"https://example.org/{n}"}],
            }
            out.write(json.dumps(record) + "\n")
            payload = {"claim": claim, "context": record["context"], "evidence": record["evidence"]}
            fields = [
                "1", str(record["id"]), str(n + 1), str(rng.getrandbits(62)), str(record["domain"]), claim[:300],
                _copy_text(json.dumps(payload)), str(record["response_id"]), str(record["system"]), "", "", "0", stamp, stamp,
            ]  # fmt: skip
            bare.write("\t".join(fields) + "\n")
    per_verifier = -(-rows // len(MILLION_VERIFIERS))
    with predictions.open("w", encoding="utf-8") as out, predictions_copy.open("w", encoding="utf-8") as bare:
        for n in range(rows):
            verifier, item = divmod(n, per_verifier)
            label, score = rng.choice(LABELS), round(rng.random(), 4)
            rationale = sentence(rng, 12)
            prediction: dict[str, object] = {
                "item": f"c-{item:07d}",
                "verifier": MILLION_VERIFIERS[verifier],
                "label": label,
                "score": score,
                "rationale": rationale,
            }
            out.write(json.dumps(prediction) + "\n")
            fields = [
                str(verifier + 1), str(item + 1), label, label, repr(score), rationale, "", "ok", "0", "0", "",
                "[]", "imported", stamp, stamp,
            ]  # fmt: skip
            bare.write("\t".join(fields) + "\n")
    return items, items_copy, predictions, predictions_copy


def with_ids(path: Path, first: list[int], second: list[int] | None = None) -> Path:
    """A copy of a COPY file whose first column (and second, when given) hold the real ids: the
    generated 1-based numbers looked up in `first` and `second` (foreign keys check them)."""
    real = path.with_suffix(".ids.copy")
    with path.open(encoding="utf-8") as rows, real.open("w", encoding="utf-8") as out:
        for line in rows:
            a, b, rest = line.split("\t", 2)
            out.write(f"{first[int(a) - 1]}\t{second[int(b) - 1] if second else b}\t{rest}")
    return real


def ids(query: str) -> list[int]:
    """The ids a query gives, in its order (read with psycopg: the benchmark itself runs no Django)."""
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        return [row[0] for row in conn.execute(query).fetchall()]


def bench_env(folder: Path) -> dict[str, str]:
    """The environment of the benchmark's manage.py processes: the operator's database, a private var folder."""
    return {
        **os.environ,
        "DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "CLAIMLAB_VAR_DIR": str(folder / "var"),
        "LOG_LEVEL": "WARNING",
    }


def million(args: argparse.Namespace) -> None:
    """Issue 35: the imports of a million rows as ratios to a bare COPY of the same rows in the same run."""
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("--million needs DATABASE_URL pointing at PostgreSQL")
    folder = Path(tempfile.mkdtemp(prefix="claimlab-bench-"))
    env = bench_env(folder)
    manage = [sys.executable, str(REPO / "manage.py")]
    run_phase([*manage, "migrate", "--no-input", "-v", "0"], env)
    reset = "from annotation.models import Study; Study.objects.filter(slug='bench-million').delete()"
    results: list[tuple[str, float, float]] = []
    keyless: list[tuple[str, float, float]] = []  # for comparison: the bare COPYs without foreign keys
    if not args.exports_only:
        print(f"generating {args.rows:,} items and {args.rows:,} predictions in {folder} ...", flush=True)
        items, items_copy, predictions, predictions_copy = generate_million(folder, args.rows)
        print(
            f"  items file {items.stat().st_size / 1e6:.0f} MB, "
            f"predictions file {predictions.stat().st_size / 1e6:.0f} MB"
        )
        run_phase([*manage, "shell", "--no-imports", "-c", reset], env)
        create = [*manage, "create_study", "bench-million", "--name", "Million", "--kind", "verification"]
        run_phase(create, env)
        bare = [sys.executable, "-c", BARE_COPY]
        [study_id] = ids("SELECT id FROM annotation_study WHERE slug = 'bench-million'")
        items_real = with_ids(items_copy, [study_id] * args.rows)
        bare_items = ["bench_bare_item", "annotation_item", ITEM_COLUMNS, str(items_real)]
        keyless.append(("bare COPY of the items, no foreign key", *run_phase([*bare, *bare_items], env)))
        results += [
            ("bare COPY of the items", *run_phase([*bare, *bare_items, "keys"], env)),
            ("import_items", *run_phase([*manage, "import_items", "bench-million", str(items)], env)),
        ]
        # the bare predictions need verifiers and items to refer to: the study's items, three verifiers of its own
        make = (
            "from metaeval.models import Verifier; from annotation.models import Study; "
            "study = Study.objects.get(slug='bench-million'); "
            "[Verifier.objects.create(study=study, name=f'bare-{k}', kind='imported') for k in range(3)]"
        )
        run_phase([*manage, "shell", "--no-imports", "-c", make], env)
        bare_verifiers = ids(
            f"SELECT id FROM metaeval_verifier WHERE study_id = {study_id} AND name LIKE 'bare-%%' ORDER BY name"
        )
        item_ids = ids(f"SELECT id FROM annotation_item WHERE study_id = {study_id} ORDER BY position")
        predictions_real = with_ids(predictions_copy, bare_verifiers, item_ids)
        bare_predictions = ["bench_bare_prediction", "metaeval_prediction", PREDICTION_COLUMNS, str(predictions_real)]
        keyless.append(("bare COPY of the predictions, no foreign key", *run_phase([*bare, *bare_predictions], env)))
        results.append(("bare COPY of the predictions", *run_phase([*bare, *bare_predictions, "keys"], env)))
        drop = "from metaeval.models import Verifier; Verifier.objects.filter(name__startswith='bare-').delete()"
        run_phase([*manage, "shell", "--no-imports", "-c", drop], env)
        results.append(
            ("import_predictions", *run_phase([*manage, "import_predictions", "bench-million", str(predictions)], env))
        )
    out = folder / "out"
    out.mkdir(exist_ok=True)
    copy_out = [sys.executable, "-c", BARE_COPY_OUT, f"COPY ({EXPORT_SELECT}) TO STDOUT", str(out / "bare.txt")]
    exports = [("CSV", "csv"), ("JSON Lines", "jsonl"), ("HF predictions config (parquet)", "parquet")]
    timed: list[tuple[str, float, float, float]] = []
    for name, fmt in exports:  # each against a bare COPY TO run just before it (the file cache as warm)
        timed.append(("bare COPY TO of the predictions", *run_timed(copy_out, env)))
        export_env = {**env, "BENCH_FORMAT": fmt, "BENCH_OUT": str(out / f"p.{fmt}")}
        timed.append((name, *run_timed([*manage, "shell", "--no-imports", "-c", TIMED_EXPORT], export_env)))
    sizes = {path.suffix: path.stat().st_size / 1e6 for path in out.iterdir()}
    load = os.getloadavg()
    print(
        f"\nPostgreSQL; {args.rows:,} rows; {os.cpu_count()} cores; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    if results:
        print(f"{'import':<32} {'wall s':>8} {'x bare COPY':>12} {'peak RSS MB':>12}")
        for index, (name, wall, rss) in enumerate(results):
            base = results[index - index % 2][1]
            print(f"{name:<32} {wall:8.2f} {wall / base:12.2f} {rss:12.0f}")
        for index in range(0, len(results), 2):
            (_, base, _), (name, wall, rss) = results[index], results[index + 1]
            verdict = "met" if wall / base <= 2 and rss < 500 else "MISSED"
            print(f"goal {name}: <= 2x bare COPY and peak RSS < 500 MB: {verdict}")
        print("the bare COPYs above check the tables' foreign keys, as the real tables do; without them:")
        for index, (name, wall, _rss) in enumerate(keyless):
            imported = results[2 * index + 1][1]
            print(f"{name:<46} {wall:8.2f} s; the import {imported / wall:.2f}x it")
    print("\nexport files MB: " + ", ".join(f"{suffix or 'bare'} {size:.0f}" for suffix, size in sorted(sizes.items())))
    print(
        "export: 'work s' timed inside the process (as the background worker runs it), 'wall s' the whole process "
        "(for the export, Django's start, ~1.5 s, included: the command's view)"
    )
    print(f"{'export':<32} {'work s':>8} {'x bare':>7} {'wall s':>8} {'x bare':>7} {'peak RSS MB':>12}")
    for index, (name, wall, inner, rss) in enumerate(timed):
        _, base_wall, base_inner, _ = timed[index - index % 2]
        print(f"{name:<32} {inner:8.2f} {inner / base_inner:7.2f} {wall:8.2f} {wall / base_wall:7.2f} {rss:12.0f}")
    for index in range(0, len(timed), 2):
        (_, _, base, _), (name, _, inner, rss) = timed[index], timed[index + 1]
        verdict = "met" if inner / base <= 2 and rss < 300 else "MISSED"
        print(f"goal export {name}: work <= 2x bare COPY TO and peak RSS < 300 MB: {verdict}")
    if not args.keep_study:
        run_phase([*manage, "shell", "--no-imports", "-c", reset], env)
    if not args.keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--per-item", type=int, default=3)
    parser.add_argument("--annotators", type=int, default=12)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--million", action="store_true", help="issue 35: million-row imports against a bare COPY")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows for --million")
    parser.add_argument(
        "--keep-study", action="store_true", help="--million: leave the bench-million study for --exports-only"
    )
    parser.add_argument(
        "--exports-only", action="store_true", help="--million: time the exports of the study --keep-study left"
    )
    args = parser.parse_args()
    if args.million:
        million(args)
        return

    folder = Path(tempfile.mkdtemp(prefix="claimlab-bench-"))
    env = bench_env(folder)
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
