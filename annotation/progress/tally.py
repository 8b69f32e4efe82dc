"""The study counts two ways: from the counter rows the pages read, and from the rows themselves.

`manage.py recount_study` compares the two to say whether a study's counters had drifted; the
tests compare them after every kind of write. `label_quality_from_rows` is the progress page's
annotator table computed from every label, with exact medians: the reference `selectors.label_quality`
(from the counters, medians from the sketch) is held to.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, F, Max, Min, Q, Sum, Window
from django.db.models.functions import RowNumber

from annotation.lib.active_time_sketch import bucket_of
from annotation.models import ActiveTimeBucket, Annotation, AnnotatorCount, Assignment, DomainCount, Item, Study
from annotation.progress.selectors import (
    ABSTAIN_LABELS,
    TIMED_OUT,
    LabelQuality,
    LabelRate,
    no_label_fields,
    pressed_skip,
)

#: The annotator table's counts per annotator, in `Tally.quality`'s order.
QUALITY_COUNTS = ("skipped", "timed_out", "timed", "abstained", "gold_n", "gold_correct", "imported")


@dataclass(frozen=True)
class Tally:
    """What the pages show of one study: per domain (items, gold, annotations), per annotator, items complete,
    and the answers on each item that has any (item id -> answers); per annotator the annotator table's
    counts (QUALITY_COUNTS, annotators with any) and their active times per sketch bucket (buckets with any)."""

    domains: dict[str, tuple[int, int, int]]
    annotators: dict[int, int]
    complete: int
    answers: dict[int, int]
    quality: dict[int, tuple[int, ...]]
    times: dict[int, dict[int, int]]


def counted(study: Study) -> Tally:
    """The study's counts as its counter rows hold them."""
    items = {row.domain: (row.items, row.gold) for row in DomainCount.objects.filter(study=study) if row.items}
    labels = dict(
        AnnotatorCount.objects.filter(study=study)
        .values("domain")
        .annotate(n=Sum("annotations"))
        .order_by()
        .values_list("domain", "n")
    )
    annotators = dict(
        AnnotatorCount.objects.filter(study=study)
        .values("user")
        .annotate(n=Sum("annotations"))
        .filter(n__gt=0)
        .order_by()
        .values_list("user", "n")
    )
    complete = AnnotatorCount.objects.filter(study=study).aggregate(n=Sum("complete"))["n"] or 0
    answers = dict(Item.objects.filter(study=study, n_answers__gt=0).values_list("pk", "n_answers"))
    sums = {f"sum_{name}": Sum(name) for name in QUALITY_COUNTS}
    quality = {
        row[0]: tuple(row[1:])
        for row in AnnotatorCount.objects.filter(study=study)
        .values("user")
        .annotate(**sums)
        .order_by()
        .values_list("user", *sums)
    }
    times: dict[int, dict[int, int]] = defaultdict(dict)
    for user_id, bucket, n in ActiveTimeBucket.objects.filter(study=study, labels__gt=0).values_list(
        "user_id", "bucket", "labels"
    ):
        times[user_id][bucket] = n
    return _tally(items, labels, annotators, complete, answers, quality, times)


def counted_from_rows(study: Study) -> Tally:
    """The study's counts from its items and annotations (slow on a big study: for checks, not pages)."""
    items = {
        row["domain"]: (row["items"], row["gold"])
        for row in Item.objects.filter(study=study)
        .values("domain")
        .annotate(items=Count("pk"), gold=Count("pk", filter=~Q(gold_label="")))
        .order_by()
    }
    answers = Annotation.objects.filter(assignment__study=study)
    labels = dict(
        answers.values("assignment__item__domain")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("assignment__item__domain", "n")
    )
    annotators = dict(
        answers.values("assignment__annotator")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("assignment__annotator", "n")
    )
    complete = (
        Assignment.objects.filter(study=study, annotation__isnull=False)
        .values("item")
        .annotate(n=Count("pk"))
        .filter(n__gte=study.slots_per_item)
        .order_by()
        .count()
    ) + Item.objects.filter(study=study, closed_after__isnull=False).count()  # adaptive overlap: closed below N
    per_item = dict(
        answers.values("assignment__item").annotate(n=Count("pk")).order_by().values_list("assignment__item", "n")
    )
    quality = label_quality_from_rows(study)
    imported = dict(
        answers.filter(source=Annotation.Source.IMPORT)
        .values("assignment__annotator")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("assignment__annotator", "n")
    )
    counts = {
        user_id: tuple(
            int(imported.get(user_id, 0) if name == "imported" else numbers[name] or 0) for name in QUALITY_COUNTS
        )
        for user_id, numbers in quality.annotators.items()
    }
    return _tally(items, labels, annotators, complete, per_item, counts, sketch_from_rows(study))


def _tally(
    items: dict[str, tuple[int, int]],
    labels: dict[str, int],
    annotators: dict[int, int],
    complete: int,
    answers: dict[int, int],
    quality: dict[int, tuple[int, ...]],
    times: dict[int, dict[int, int]],
) -> Tally:
    domains = {domain: (n, gold, labels.get(domain, 0)) for domain, (n, gold) in items.items()}
    for domain, n in labels.items():  # labels on a domain without items: only a drifted counter shows this
        if n and domain not in domains:
            domains[domain] = (0, 0, n)
    return Tally(
        domains=domains,
        annotators=annotators,
        complete=complete,
        answers=answers,
        quality={user_id: counts for user_id, counts in quality.items() if any(counts)},
        times={user_id: sketch for user_id, sketch in times.items() if sketch},
    )


def sketch_from_rows(study: Study) -> dict[int, dict[int, int]]:
    """annotator id -> {sketch bucket: answers} of every timed answer of the study (bucketed here, in Python)."""
    times: dict[int, dict[int, int]] = defaultdict(dict)
    rows = (
        Annotation.objects.filter(study=study, active_ms__isnull=False)
        .values("assignment__annotator_id", "active_ms")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("assignment__annotator_id", "active_ms", "n")
    )
    for user_id, active_ms, n in rows:
        assert active_ms is not None  # the query keeps only answers with a time
        bucket = bucket_of(active_ms)
        times[user_id][bucket] = times[user_id].get(bucket, 0) + n
    return dict(times)


# --- the annotator table from every label (the reference) ----------------------------------------


def label_quality_from_rows(study: Study) -> LabelQuality:
    """`selectors.label_quality` computed from every label with exact medians: what the counters must give
    (the medians within the sketch's error). Six queries that read every label: for checks, not pages.

    Gold accuracy compares the canonical label with the item's gold label, on gold items only.
    Skipped counts the skips pressed and timed out the leases that ran out (`pressed_skip`, `TIMED_OUT`).
    """
    numbers: dict[int, dict[str, float | int | None]] = defaultdict(no_label_fields)
    skips = (
        Assignment.objects.filter(study=study, status=Assignment.Status.SKIPPED)
        .order_by()
        .values("annotator_id")
        .annotate(skipped=Count("pk", filter=pressed_skip(study)), timed_out=Count("pk", filter=TIMED_OUT))
    )
    for entry in skips:
        if entry["skipped"] or entry["timed_out"]:
            numbers[entry["annotator_id"]].update(skipped=entry["skipped"], timed_out=entry["timed_out"])
    labels = (
        Annotation.objects.filter(study=study)
        .order_by()
        .values("assignment__annotator_id")
        .annotate(
            timed=Count("active_ms"), labelled=Count("pk"), abstained=Count("pk", filter=Q(label__in=ABSTAIN_LABELS))
        )
    )
    for label_entry in labels:
        numbers[label_entry["assignment__annotator_id"]].update(
            timed=label_entry["timed"], labelled=label_entry["labelled"], abstained=label_entry["abstained"]
        )
    gold = (
        Annotation.objects.filter(study=study)
        .exclude(assignment__item__gold_label="")
        .order_by()
        .values("assignment__annotator_id")
        .annotate(gold_n=Count("pk"), gold_correct=Count("pk", filter=Q(label=F("assignment__item__gold_label"))))
    )
    for gold_entry in gold:
        numbers[gold_entry["assignment__annotator_id"]].update(
            gold_n=gold_entry["gold_n"], gold_correct=gold_entry["gold_correct"]
        )
    for user_id, median in exact_median_active_ms(study).items():
        numbers[user_id]["median_active_ms"] = median
    return LabelQuality(annotators=dict(numbers), study_median_ms=exact_study_median_active_ms(study))


def exact_study_median_active_ms(study: Study) -> float | None:
    """The exact median active time over every timed label of the study (ms); None when no label is timed."""
    timed = Annotation.objects.filter(study=study, active_ms__isnull=False)
    n = timed.count()
    if not n:
        return None
    middle = list(timed.order_by("active_ms").values_list("active_ms", flat=True)[(n - 1) // 2 : n // 2 + 1])
    return sum(value for value in middle if value is not None) / len(middle)


def exact_median_active_ms(study: Study) -> dict[int, float]:
    """annotator id -> the exact median active time per answered item (ms), over answers that carry a time:
    each annotator's times ranked by a window function, the middle one or two rows fetched."""
    annotator = F("assignment__annotator_id")
    ranked = (
        Annotation.objects.filter(study=study, active_ms__isnull=False)
        .annotate(
            rank=Window(RowNumber(), partition_by=[annotator], order_by=[F("active_ms").asc(), F("pk").asc()]),
            total=Window(Count("pk"), partition_by=[annotator]),
        )
        .filter(Q(rank=(F("total") + 1) / 2) | Q(rank=F("total") / 2 + 1))
        .values_list("assignment__annotator_id", "active_ms")
    )
    middles: dict[int, list[int]] = defaultdict(list)
    for user_id, active_ms in ranked:
        assert active_ms is not None  # the query keeps only answers with a time (active_ms__isnull=False)
        middles[user_id].append(active_ms)
    return {user_id: sum(values) / len(values) for user_id, values in middles.items()}


def label_rate_from_rows(study: Study, *, now: datetime) -> LabelRate:
    """`selectors.label_rate` from every label made here, in one aggregate (the reference it is held to)."""
    made_here = Annotation.objects.filter(study=study).exclude(source=Annotation.Source.IMPORT)
    hour = Q(created_at__gte=now - timedelta(hours=1))
    stats = made_here.aggregate(
        collected=Count("pk"),
        last_hour=Count("pk", filter=hour),
        first=Min("created_at"),
        last=Max("created_at"),
        hour_oldest=Min("created_at", filter=hour),
    )
    return LabelRate(
        last_hour=stats["last_hour"],
        collected=stats["collected"],
        first=stats["first"],
        last=stats["last"],
        hour_oldest=stats["hour_oldest"],
    )
