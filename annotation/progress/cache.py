"""The progress page's annotator table and throughput, kept in the cache instead of computed per view.

Why: both were aggregates over every label (about 0.6 s at 100,000 items x 3 on PostgreSQL),
and every open progress page asks for its live part every 10 s (issue 15: pages must not grow
with the study). Since issue 35 they are read from counters and the last hour's labels
(`progress.label_quality`, `progress.label_rate`: a few ms whatever the study's size), and
the cache stays as a cheap shield and for the page's behaviour: they are computed once per
state of the study's labels (`fingerprint.label_state`, constant time) and, while labels keep
coming in (a new state with every label), at most once per `refresh_after` seconds: in between,
the last table is served with the time it was computed. What counters and small indexes give
exactly (labels, items complete, done, open now, flags) stays live (`progress.annotator_rows`).

The page itself only reads the cache (`peek_quality`), so its own request stays flat; its
live fragment computes when the table is missing or too old (`current_quality`); one request at
a time, the others serving the table they have meanwhile. The cache is Django's, as configured
(Redis when set, shared by every host; else each process's memory).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.utils import timezone

from annotation.models import Study
from annotation.progress.fingerprint import label_state
from annotation.progress.selectors import (
    AnnotatorRow,
    LabelQuality,
    LabelRate,
    Throughput,
    annotator_rows,
    label_quality,
    label_rate,
)

#: While labels come in, a computed table is served for at least this long before it is computed again ...
QUALITY_REFRESH_SECONDS = 30
#: ... and for at least this many times as long as computing it took: a bigger study is computed
#: less often, so the share of the database these tables take stays bounded (5% at most).
QUALITY_REFRESH_COST_RATIO = 20
#: How long a table is kept at all (an unchanged study's table stays current until then).
QUALITY_CACHE_SECONDS = 24 * 3600
#: How long one request's claim to compute the table holds if it never lets go (its process died).
COMPUTING_LOCK_SECONDS = 120

#: The table's numbers hold now: nothing they read has changed since they were computed.
CURRENT = "current"
#: Labels have come in since; the table is younger than `refresh_after` and served as of its time.
RECENT = "recent"
#: Labels have come in since and the table is older than `refresh_after`: the page shows it dated
#: while it is computed again (by the live fragment).
OUTDATED = "outdated"


@dataclass(frozen=True)
class Quality:
    """The annotator table and throughput as served: when they were computed and whether they still hold."""

    annotators: list[AnnotatorRow]
    throughput: Throughput
    computed_at: datetime
    state: str
    #: While labels come in, it is computed again after this many seconds (`refresh_after`).
    refresh_seconds: float

    @property
    def current(self) -> bool:
        return self.state == CURRENT

    @property
    def outdated(self) -> bool:
        return self.state == OUTDATED


def quality_fingerprint(study: Study) -> str:
    """A short hash of everything `label_quality` and `label_rate` read (constant time)."""
    return hashlib.sha256(repr((study.pk, label_state(study))).encode()).hexdigest()[:32]


def _key(study: Study) -> str:
    # The creation time too: a study made with a recycled id (SQLite after a rollback) never reads another's table.
    # v2: skips count the skips pressed only (issue 29): a table kept by v1 counted give-backs as skips.
    # v3: medians from the active-time sketch (issue 35), as every table computed from now on has them.
    return f"progress-quality:v3:{study.pk}:{study.created_at.timestamp()}"


def _compute(study: Study, fingerprint: str, now: datetime) -> dict[str, Any]:
    """Read the table from the counters and keep it (plain data: any cache backend stores it)."""
    started = time.perf_counter()
    quality = label_quality(study)
    entry = {
        "fingerprint": fingerprint,
        "computed_at": now,
        "annotators": quality.annotators,
        "study_median_ms": quality.study_median_ms,
        "rate": label_rate(study, now=now),
    }
    entry["took"] = time.perf_counter() - started
    cache.set(_key(study), entry, timeout=QUALITY_CACHE_SECONDS)
    return entry


def refresh_after(entry: dict[str, Any]) -> float:
    """Seconds a table is served while labels come in, before it is computed again."""
    return max(QUALITY_REFRESH_SECONDS, QUALITY_REFRESH_COST_RATIO * entry.get("took", 0))


def _last_hour_at(rate: LabelRate, now: datetime) -> int | None:
    """The labels of the hour before `now`, from a rate computed earlier with no label made since;
    None when some, but not all, of its last hour's labels have left the hour since."""
    hour_ago = now - timedelta(hours=1)
    if not rate["last_hour"]:
        return 0
    if rate["hour_oldest"] is not None and rate["hour_oldest"] >= hour_ago:
        return rate["last_hour"]
    if rate["last"] is not None and rate["last"] < hour_ago:
        return 0
    return None


def _state(entry: dict[str, Any], fingerprint: str, now: datetime) -> tuple[str, LabelRate]:
    """How a kept table stands against the study now, and its rate as of now when it is current."""
    rate: LabelRate = entry["rate"]
    if entry["fingerprint"] == fingerprint:
        last_hour = _last_hour_at(rate, now)
        if last_hour is not None:
            return CURRENT, {**rate, "last_hour": last_hour}
    if now - entry["computed_at"] < timedelta(seconds=refresh_after(entry)):
        return RECENT, rate
    return OUTDATED, rate


def _served(study: Study, entry: dict[str, Any], state: str, rate: LabelRate, counts: dict[str, int]) -> Quality:
    rows = annotator_rows(study, LabelQuality(annotators=entry["annotators"], study_median_ms=entry["study_median_ms"]))
    throughput = Throughput(
        last_hour=rate["last_hour"],
        collected=rate["collected"],
        first=rate["first"],
        last=rate["last"],
        remaining=max(0, counts["expected"] - counts["annotations"]),
    )
    return Quality(
        annotators=rows,
        throughput=throughput,
        computed_at=entry["computed_at"],
        state=state,
        refresh_seconds=refresh_after(entry),
    )


def peek_quality(study: Study, *, counts: dict[str, int], now: datetime | None = None) -> Quality | None:
    """The kept table, however old (its `state` says), or None when there is none; never computes.

    `counts`: `selectors.study_counts(study)` (the labels still missing come from it, live).
    """
    entry = cache.get(_key(study))
    if entry is None:
        return None
    state, rate = _state(entry, quality_fingerprint(study), now or timezone.now())
    return _served(study, entry, state, rate, counts)


def current_quality(study: Study, *, counts: dict[str, int], now: datetime | None = None) -> Quality | None:
    """The kept table if it is current or recent, else the table computed now (from the counters) and kept.

    One request computes it at a time (a lock in the cache: Redis when set, so across hosts):
    while one does, the others serve the kept table as outdated, or None when there is none yet
    (the page then says it is on its way). Every open progress page asks every 10 s, so without
    the lock a study's researchers all computed the same table together.
    """
    now = now or timezone.now()
    fingerprint = quality_fingerprint(study)  # before computing: a label that comes in meanwhile makes it change
    entry = cache.get(_key(study))
    if entry is not None:
        state, rate = _state(entry, fingerprint, now)
        if state != OUTDATED:
            return _served(study, entry, state, rate, counts)
    lock = _key(study) + ":computing"
    if not cache.add(lock, True, timeout=COMPUTING_LOCK_SECONDS):
        return _served(study, entry, OUTDATED, rate, counts) if entry is not None else None
    try:
        entry = _compute(study, fingerprint, now)
    finally:
        cache.delete(lock)
    return _served(study, entry, CURRENT, entry["rate"], counts)
