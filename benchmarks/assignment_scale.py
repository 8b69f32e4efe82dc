"""Does claiming and answering stay as fast when the study is 100 times bigger? (issue 3, point 9)

Times `claim_next` + `submit` (the assignment service, in-process, one
annotator after another) in a 1,000-item study and in a 100,000-item study,
in the same run, on the same database. The 1,000-item study is the baseline;
the goal is a ratio of at most 1.5 for the median.

Also timed, as extra rows: the same in a 100,000-item study that is already
half done (150,000 imported labels, so the slot counters are mixed), in a 100,000-item study
with two between-subject conditions where exact N holds per condition (each claim filtered to
its condition's slot range: conditions.services.claimable_slots), and the
whole "API turn" (claim, blinded display payload, progress, submit,
progress), which is what one label costs a web request.

The studies are timed interleaved, in blocks of 20 labels each, so that
whatever else the machine is doing weighs on all of them alike.

Items are generated realistic verification items (claim, context, three
evidence passages) bulk-loaded with `annotation.transfer.services.item_import.import_items` from a
JSONL file. Uses a fresh SQLite file (WAL) in a temporary folder, or the
database in DATABASE_URL (its `bench-scale-*` studies are replaced).

    python benchmarks/assignment_scale.py [--small 1000] [--large 100000] [--labels 600] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import statistics
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
LABELS = ("supported", "contradicted", "inconclusive")
N = 3
BLOCK = 20  # labels per study before switching to the next one


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def write_items(path: Path, n_items: int) -> None:
    rng = random.Random(n_items)
    with path.open("w", encoding="utf-8") as out:
        for n in range(n_items):
            out.write(
                json.dumps(
                    {
                        "id": f"c-{n:06d}",
                        "domain": rng.choice(("biography", "science", "history")),
                        "claim": sentence(rng, 14),
                        "context": sentence(rng, 30),
                        "evidence": [
                            {
                                "text": sentence(rng, 60),
                                "title": sentence(rng, 5),
                                "url": f"https://example.org/{n}/{k}",
                                "source_type": "news",
                            }
                            for k in range(3)
                        ],
                    }
                )
                + "\n"
            )


def write_labels(path: Path, n_items: int, done_share: float) -> int:
    """Imported labels from 3 outside annotators for the first `done_share` of the items."""
    rng = random.Random(1)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for n in range(int(n_items * done_share)):
            for worker in ("x1", "x2", "x3"):
                out.write(json.dumps({"item": f"c-{n:06d}", "annotator": worker, "label": rng.choice(LABELS)}) + "\n")
                count += 1
    return count


def setup_django(folder: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["CLAIMLAB_VAR_DIR"] = str(folder / "var")
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ["DEBUG"] = "0"  # no query log, as in production
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def make_study(
    slug: str, items_file: Path, annotators: list, labels_file: Path | None = None, options: dict | None = None
):
    from django.db import connection

    from annotation.members.services import add_members
    from annotation.models import Study
    from annotation.studies.services import create_study
    from annotation.transfer.services.annotation_import import import_annotations
    from annotation.transfer.services.item_import import import_items

    Study.objects.filter(slug=slug).delete()
    study = create_study(slug=slug, name=slug, kind="verification", annotators_per_item=N, **(options or {}))
    add_members(study=study, usernames=[user.username for user in annotators], role="annotator")
    start = time.perf_counter()
    with items_file.open("rb") as stream:
        result = import_items(study=study, stream=stream, fmt="jsonl")
    loaded = f"{result.created:,} items in {time.perf_counter() - start:.1f} s"
    if labels_file is not None:
        # A fresh database session for the big label import. PostgreSQL caches the
        # plans of its foreign-key checks per session: planned while the tables were
        # tiny (the warm-up labels above), they scan whole tables, and the import's
        # COMMIT then checks 300,000 keys in quadratic time (we saw > 10 minutes).
        # Worth knowing for long-lived workers too; reported to the import's owner.
        connection.close()
        start = time.perf_counter()
        with labels_file.open("rb") as stream:
            result = import_annotations(study=study, stream=stream, fmt="jsonl")
        loaded += f", {result.created:,} labels in {time.perf_counter() - start:.1f} s"
    study.refresh_from_db()
    analyze()
    return study, loaded


def analyze() -> None:
    """PostgreSQL: VACUUM ANALYZE after the bulk load, as autovacuum would within a minute.

    (Autovacuum is off on the development machines.) Without statistics the
    planner believes the fresh table is tiny and picks plans that read every
    unfinished item; with them the candidate query is an index scan that
    stops after 32 rows.
    """
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for table in ("annotation_item", "annotation_assignment", "annotation_annotation"):
                cursor.execute(f"VACUUM ANALYZE {table}")


def annotators(count: int) -> list:
    """Bench users without the (deliberately slow) password hashing."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    users = []
    for k in range(count):
        user, _ = User.objects.get_or_create(username=f"bench-scale-{k:02d}")
        user.set_unusable_password()
        user.save()
        users.append(user)
    return users


def time_labels(study, users: list, labels: int, *, api_turn: bool) -> list[float]:
    """Seconds per label (claim + submit, or the whole API turn), annotators taking turns."""
    from annotation.workbench.selectors import annotator_progress, display_payload
    from annotation.workbench.services import SubmittedAnswer, claim_next, submit

    rng = random.Random(3)
    timings = []
    for k in range(labels):
        user = users[k % len(users)]
        start = time.perf_counter()
        assignment = claim_next(user=user, study=study)
        if assignment is None:
            raise SystemExit(
                f"{study.slug}: nothing left to claim for {user.username}; the study is too small for the labels timed"
            )
        if api_turn:
            display_payload(assignment)
            annotator_progress(user, study)
        submit(user=user, study=study, assignment_id=assignment.pk, answer=SubmittedAnswer(label=rng.choice(LABELS)))
        if api_turn:
            annotator_progress(user, study)
        timings.append(time.perf_counter() - start)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--labels", type=int, default=600, help="labels timed per study (after 60 warm-up labels)")
    parser.add_argument("--annotators", type=int, default=12)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (and the bench studies)")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="claimlab-scale-"))
    setup_django(folder)
    from django.db import connection

    from annotation.models import Study

    database = "PostgreSQL (DATABASE_URL)" if connection.vendor == "postgresql" else f"SQLite file (WAL) in {folder}"
    print(f"database: {database}; {os.cpu_count()} cores", flush=True)
    small_file, large_file, labels_file = folder / "small.jsonl", folder / "large.jsonl", folder / "labels.jsonl"
    write_items(small_file, args.small)
    write_items(large_file, args.large)
    imported = write_labels(labels_file, args.large, 0.5)
    users = annotators(args.annotators)

    scenarios = [
        (f"{args.small:,} items (baseline)", "bench-scale-small", small_file, None, None),
        (f"{args.large:,} items", "bench-scale-large", large_file, None, None),
        (f"{args.large:,} items, half done ({imported:,} labels)", "bench-scale-half", large_file, labels_file, None),
        (
            f"{args.large:,} items, 2 conditions, N per condition",
            "bench-scale-conditions",
            large_file,
            None,
            {"conditions": ["control", "shown"], "exact_n_per": "condition"},
        ),
    ]
    loaded_studies = []
    for name, slug, items_file, labels, options in scenarios:
        study, loaded = make_study(slug, items_file, users, labels, options)
        print(f"loaded {name}: {loaded}", flush=True)
        time_labels(study, users, 60, api_turn=False)  # warm-up: caches, first pages
        loaded_studies.append((name, study))
    # Interleaved in small blocks, so that whatever else the machine does at
    # some moment weighs on every study alike.
    service: dict[str, list[float]] = {name: [] for name, _ in loaded_studies}
    turn: dict[str, list[float]] = {name: [] for name, _ in loaded_studies}
    for _ in range(args.labels // BLOCK):
        for name, study in loaded_studies:
            service[name] += time_labels(study, users, BLOCK, api_turn=False)
            turn[name] += time_labels(study, users, BLOCK // 2, api_turn=True)
    rows = [
        (
            name,
            statistics.median(service[name]),
            sorted(service[name])[int(0.95 * len(service[name]))],
            statistics.median(turn[name]),
        )
        for name, _ in loaded_studies
    ]
    if not args.keep and connection.vendor == "postgresql":
        Study.objects.filter(slug__in=[slug for _, slug, _, _, _ in scenarios]).delete()

    base_service, base_turn = rows[0][1], rows[0][3]
    print(
        f"\nmedian over {args.labels} labels per study ({args.annotators} annotators taking turns, N={N}, studies "
        f"interleaved in blocks of {BLOCK}); ratios against the {args.small:,}-item study measured in this run"
    )
    print(f"{'study':<46} {'claim+submit ms':>16} {'p95 ms':>8} {'x base':>7} {'API turn ms':>12} {'x base':>7}")
    for name, median, p95, median_turn in rows:
        print(
            f"{name:<46} {median * 1000:16.2f} {p95 * 1000:8.2f} {median / base_service:7.2f} {median_turn * 1000:12.2f} {median_turn / base_turn:7.2f}"
        )
    ratio = rows[1][1] / base_service
    print(
        f"\ngoal: median claim_next + submit, {args.large:,} vs {args.small:,} items: ratio {ratio:.2f} "
        f"(<= 1.5: {'met' if ratio <= 1.5 else 'MISSED'})"
    )
    if not args.keep:
        import shutil

        if connection.vendor == "postgresql":
            from django.contrib.auth import get_user_model

            get_user_model().objects.filter(pk__in=[user.pk for user in users]).delete()
            get_user_model().objects.filter(username__startswith="ext-bench-scale-").delete()  # imported labellers
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
