"""Do the home page, a study's overview and its progress page stay as fast when the study is 100 times bigger?
(issue 15, point 3)

Builds, in one run, a 1,000-item study and a 100,000-item study, each with 3
annotators (imported, outside annotators) who labelled every item, so 3,000 and
300,000 labels. Each study has its own researcher, whose home page lists only
that study. Then times, through the Django test client (the whole request: the
view, its queries and the template), the researcher's home page ("My studies")
and the study's overview, median of 10 after 2 warm-up requests each,
interleaved, and prints both and their ratio. The goal: each page at 100,000
items within 1.5x of its time at 1,000 items. An extra row times the overview's
"precision so far" card, which the overview loads after itself: the card
(metaeval's study_precision) computes an interval from every label of the study,
so it grows with the study by nature and is kept off the page's own request; it is
kept in the cache until the study's data changes, so it is timed twice: a reload
with nothing new, and the first view after a change (recomputed). The researcher's
progress page reads live counts from the counter rows and one page of items; its
per-annotator table and throughput (gold accuracy, median active time, labels per hour)
are read from counters (issue 35: medians from the active-time sketch) and the last hour's
labels, kept in the cache per state of the study's labels
(annotation/progress/cache.py): the page shows the kept table and never computes
it, its live fragment (which static/js/progress.js asks for every 10 s) computes it when
there is none or it is too old. So three rows: the page and the fragment with the table
kept, and the fragment after a change (the cache emptied: read from the counters again,
with the same 1.5x goal since issue 35). Two more rows filter the
page's item list: the complete items, and the items in progress (found through the items'
answer and slot counts, indexed with the study).

Items are generated realistic verification items bulk-loaded with
`annotation.transfer.services.item_import.import_items`, and labels with `import_annotations`. Uses a
fresh SQLite file (WAL) in a temporary folder, or the database in DATABASE_URL
(its `bench-pages-*` studies and users are removed afterwards unless --keep;
a kept study with the same items and labels is reused by the next run).

    python benchmarks/page_scale.py [--small 1000] [--large 100000] [--repeat 10] [--keep]
    DATABASE_URL=postgres://... python benchmarks/page_scale.py --million

`--million` (issue 35): the large study has 1,000,000 items and both studies get predictions from
3 verifiers (each on a third of the items: as many predictions as items) and labels on 3 % of
their items (30,000 x 3 at a million); three more rows: the verifiers page, the item list and the
report page warm (its snapshot built before timing; the build's time and the benchmark process's
peak RSS are printed). Goal: each page within 1.5x between 1,000 and 1,000,000.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

# Run as a script, so this folder is on the path: the study builders are assignment_scale's.
from assignment_scale import analyze, setup_django, write_items, write_labels

#: "precision card": the overview's "precision so far" card, which the page loads after itself
#: (its interval is computed from every label, so it grows with the study by nature). It is kept
#: until the study's data changes: "precision card" times a reload with nothing new (read back),
#: "precision card, new data" the first view after a change (recomputed; the cache is emptied).
#: "progress page" and "progress live" (its fragment) are timed with the annotator table kept;
#: "progress live, new data" computes the table again, from the counters (the cache is emptied).
PAGES = (
    "home page",
    "overview",
    "precision card",
    "precision card, new data",
    "progress page",
    "progress live",
    "progress live, new data",
    "progress, complete items",
    "progress, items in progress",
)
#: `--million` adds these (issue 35): pages that read the predictions, or page the items.
#: "verifiers page" is timed with the prediction counts kept (a reload with no new prediction),
#: "verifiers page, new data" the first view after a change (counted from every prediction).
MILLION_PAGES = ("verifiers page", "verifiers page, new data", "item list", "report (warm)")
#: `--million`: the verifiers of each study, each predicting a third of its items.
VERIFIERS = ("veriscore-gpt4o", "factscore-llama", "safe-mistral")
#: `--million`: the share of the items with 3 human labels (30,000 of 1,000,000).
LABELLED_SHARE = 0.03


def write_predictions(path: Path, n_items: int) -> int:
    """One prediction per item, the items split in thirds between the three verifiers."""
    import json
    import random

    rng = random.Random(7)
    per_verifier = -(-n_items // len(VERIFIERS))
    with path.open("w", encoding="utf-8") as out:
        for n in range(n_items):
            label = rng.choice(("supported", "contradicted", "inconclusive"))
            record = {"item": f"c-{n:06d}", "verifier": VERIFIERS[n // per_verifier], "label": label}
            out.write(json.dumps(record) + "\n")
    return n_items


def add_predictions(study, path: Path) -> None:
    """Import the predictions file (the staged import, as a researcher's upload)."""
    from django.db import connection

    from metaeval.verifiers.services import import_predictions

    connection.close()  # a fresh session, as for the labels (see assignment_scale.make_study)
    start = time.perf_counter()
    with path.open("rb") as stream:
        created = import_predictions(study=study, stream=stream, fmt="jsonl").created
    print(f"  {study.slug}: {created:,} predictions in {time.perf_counter() - start:.1f} s", flush=True)


def build_warm_report(study) -> None:
    """Build and store the study's report (the page's options), so the page finds it current."""
    import resource

    from metaeval.reporting import cache as report_cache
    from metaeval.reporting import page_options

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the loading's peak, this process's so far
    start = time.perf_counter()
    # As the worker and the downloads build it: stored whole, handed back without the per-response rows
    # (decoded whole, a million responses' rows of five score blocks were 4 GB of dicts in this process).
    report_cache.current_report(study, page_options(), per_response=False)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"  {study.slug}: report built in {time.perf_counter() - start:.1f} s (process peak RSS {peak:.0f} MB; "
        f"{before:.0f} MB before the build, while the study was loaded)"
    )


def make_study(slug: str, items_file: Path, labels_file: Path):
    """A verification study (N=3) with its items and every item's 3 labels; returns (study, researcher)."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from annotation.members.services import add_members
    from annotation.models import Study
    from annotation.studies.services import create_study
    from annotation.transfer.services.annotation_import import import_annotations
    from annotation.transfer.services.item_import import import_items

    researcher, _ = get_user_model().objects.get_or_create(username=f"{slug}-researcher")
    kept = Study.objects.filter(slug=slug).first()
    if kept is not None and reuse(kept, items_file):
        print(f"reusing {slug} (left by an earlier run with --keep)", flush=True)
        return kept, researcher
    Study.objects.filter(slug=slug).delete()
    study = create_study(slug=slug, name=slug, kind="verification", annotators_per_item=3)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    start = time.perf_counter()
    with items_file.open("rb") as stream:
        items = import_items(study=study, stream=stream, fmt="jsonl").created
    connection.close()  # a fresh session for the label import: see assignment_scale.make_study
    with labels_file.open("rb") as stream:
        labels = import_annotations(study=study, stream=stream, fmt="jsonl").created
    print(f"loaded {slug}: {items:,} items, {labels:,} labels in {time.perf_counter() - start:.1f} s", flush=True)
    analyze()
    return study, researcher


def reuse(study, items_file: Path) -> bool:
    """Whether a study kept by an earlier run holds this run's items, each with its 3 labels."""
    from annotation.models import Annotation, Item

    with items_file.open("rb") as stream:
        size = sum(1 for _ in stream)
    labels = Annotation.objects.filter(assignment__study=study).count()
    return Item.objects.filter(study=study).count() == size and labels == 3 * size


def time_page(client, urls: dict[str, str], page: str) -> float:
    url = urls[page]
    if page.endswith("new data"):
        from django.core.cache import cache

        cache.clear()  # as after a new label: the card's key has moved on
    elif page == "precision card":
        client.get(url, secure=True)  # untimed: the view before this reload (the other rows empty the cache)
    elif page == "verifiers page":
        client.get(url, secure=True)  # untimed: the counts kept (the rows before empty the cache), as on a reload
    elif page.startswith("progress") and not page.endswith("new data"):
        client.get(urls["progress live"], secure=True)  # untimed: the table kept, as every 10 s while the page is open
    start = time.perf_counter()
    response = client.get(url, secure=True)
    elapsed = time.perf_counter() - start
    if response.status_code != 200:
        raise SystemExit(f"{url}: HTTP {response.status_code}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=10, help="requests timed per page and study")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (and the bench studies)")
    parser.add_argument("--million", action="store_true", help="issue 35: 1,000,000 items with predictions")
    args = parser.parse_args()
    pages = PAGES + MILLION_PAGES if args.million else PAGES
    if args.million:
        args.large = 1_000_000

    folder = Path(tempfile.mkdtemp(prefix="claimlab-pages-"))
    setup_django(folder)
    from django.conf import settings
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    setup_test_environment()  # lets the test client's host in; DEBUG stays off (no query log)
    # Pages name their css and js through the static files storage; without `collectstatic`
    # the production manifest has no entries, so the plain storage names them here.
    plain = {**settings.STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    override_settings(STORAGES=plain).enable()
    database = "PostgreSQL (DATABASE_URL)" if connection.vendor == "postgresql" else f"SQLite file (WAL) in {folder}"
    print(f"database: {database}; {os.cpu_count()} cores", flush=True)

    scenarios = []
    for size in (args.small, args.large):
        items_file, labels_file = folder / f"items-{size}.jsonl", folder / f"labels-{size}.jsonl"
        write_items(items_file, size)
        write_labels(labels_file, size, LABELLED_SHARE if args.million else 1.0)
        study, researcher = make_study(f"bench-pages-{size}", items_file, labels_file)
        if args.million and not study.verifiers.exists():
            predictions_file = folder / f"predictions-{size}.jsonl"
            write_predictions(predictions_file, size)
            add_predictions(study, predictions_file)
            analyze()
        if args.million:
            build_warm_report(study)
        client = Client()
        client.force_login(researcher)
        urls = {
            "home page": reverse("annotation:my_studies"),
            "overview": reverse("annotation:study_detail", args=[study.slug]),
            "precision card": reverse("metaeval:precision_card", args=[study.slug]),
            "precision card, new data": reverse("metaeval:precision_card", args=[study.slug]),
            "progress page": reverse("annotation:study_progress", args=[study.slug]),
            "progress live": reverse("annotation:study_progress_live", args=[study.slug]),
            "progress live, new data": reverse("annotation:study_progress_live", args=[study.slug]),
            "progress, complete items": reverse("annotation:study_progress", args=[study.slug]) + "?state=complete",
            "progress, items in progress": reverse("annotation:study_progress", args=[study.slug]) + "?state=open",
            "verifiers page": reverse("verifiers:list", args=[study.slug]),
            "verifiers page, new data": reverse("verifiers:list", args=[study.slug]),
            "item list": reverse("annotation:item_list", args=[study.slug]),
            "report (warm)": reverse("metaeval:report", args=[study.slug]),
        }
        scenarios.append((size, client, urls))

    timings: dict[tuple[int, str], list[float]] = {(size, page): [] for size, _, _ in scenarios for page in pages}
    for _, client, urls in scenarios:  # warm-up: caches, first templates
        for page in pages:
            time_page(client, urls, page)
            time_page(client, urls, page)
    for _ in range(args.repeat):  # interleaved: whatever else the machine does weighs on both studies alike
        for size, client, urls in scenarios:
            for page in pages:
                timings[(size, page)].append(time_page(client, urls, page))

    load = os.getloadavg()
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"median of {args.repeat} requests (Django test client, whole request); ratio against {args.small:,} items")
    print(f"{'page':<25} {f'{args.small:,} items ms':>16} {f'{args.large:,} items ms':>18} {'ratio':>7}  goal <= 1.5")
    for page in pages:
        small = statistics.median(timings[(args.small, page)])
        large = statistics.median(timings[(args.large, page)])
        ratio = large / small
        # A "new data" row computes from every label (or prediction) by nature, once per change: no goal;
        # but the progress table, read from counters since issue 35.
        by_nature = page.endswith("new data") and page != "progress live, new data"
        verdict = "met" if ratio <= 1.5 else "n/a: every row" if by_nature else "MISSED"
        print(f"{page:<25} {small * 1000:16.1f} {large * 1000:18.1f} {ratio:7.2f}  {verdict}")

    if not args.keep:
        import shutil

        from django.contrib.auth import get_user_model

        from annotation.models import Study

        Study.objects.filter(slug__startswith="bench-pages-").delete()
        get_user_model().objects.filter(username__startswith="bench-pages-").delete()
        get_user_model().objects.filter(username__startswith="ext-bench-pages-").delete()  # imported labellers
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
