"""A mergeable quantile sketch of active times (ms): counts per log-linear bucket, median within 1/128.

Why: the exact median of an annotator's (or a study's) active times needs every time sorted, so the
progress page's table grew with the labels (issue 35). Counting each time in a bucket instead keeps
one counter row per (study, annotator, bucket) (models.ActiveTimeBucket): a submit adds one to its
own annotator's row, the study's sketch is the sum of its annotators' (mergeable), and the median
is read from at most a few thousand rows however many labels there are.

The buckets (HDR-histogram style, log-linear): a time v >= 1 ms with e = floor(log2 v) falls in
bucket 64 e + floor((v - 2^e) * 64 / 2^e): each power of two is cut into 64 equal parts. 0 ms has
a bucket of its own (-1). The bucket is integer arithmetic on both sides (Python here,
`bucket_sql` in the database), so a bucket counted by a submit equals the one a recount from
the rows gives, with no floating-point logarithm that could put a boundary value on either side.

The error (`RELATIVE_ERROR`, stated on the progress page): a bucket of [2^e, 2^(e+1)) holds
integers spanning less than 2^e / 64, so its midpoint (`representative`) is within 2^e / 128 <= v / 128
of every v in it, and exact for 0 and below 128 ms. The median (the middle time, or the mean of the
two middle times) is read as the midpoint of the bucket of each middle time, so it is within
1/128 (0.78 %) of the exact median, relative. tests/annotation/progress/test_active_time_sketch.py
holds it to that on seeded data and edge cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: Buckets per power of two (2^SUB_BITS).
SUB_BITS = 6
SUB_BUCKETS = 1 << SUB_BITS
#: The largest relative error of a reported median (and of any single value's bucket midpoint).
RELATIVE_ERROR = 1 / (2 * SUB_BUCKETS)
#: The bucket of 0 ms.
ZERO_BUCKET = -1
#: The largest exponent the SQL expression covers: any time below 2^63 ms.
MAX_EXPONENT = 62


def bucket_of(ms: int) -> int:
    """The bucket of a time in whole milliseconds (>= 0)."""
    if ms < 0:
        raise ValueError(f"an active time cannot be negative: {ms}")
    if ms == 0:
        return ZERO_BUCKET
    e = ms.bit_length() - 1
    return (e << SUB_BITS) + (((ms - (1 << e)) << SUB_BITS) >> e)


def bounds(bucket: int) -> tuple[int, int]:
    """The smallest and the largest whole millisecond in a bucket (both equal for a bucket of one value)."""
    if bucket == ZERO_BUCKET:
        return 0, 0
    e, sub = bucket >> SUB_BITS, bucket & (SUB_BUCKETS - 1)
    base = 1 << e
    low = base + -((-sub * base) >> SUB_BITS)  # base + ceil(sub * base / 64)
    high = base + -((-(sub + 1) * base) >> SUB_BITS) - 1
    return low, high


def representative(bucket: int) -> float:
    """The value a bucket stands for: the midpoint of its smallest and largest millisecond."""
    low, high = bounds(bucket)
    return (low + high) / 2


def median(counts: Mapping[int, int]) -> float | None:
    """The median of the times counted per bucket (the mean of the two middle ones for an even count),
    within RELATIVE_ERROR of the exact median; None when nothing is counted."""
    ordered = sorted((bucket, n) for bucket, n in counts.items() if n > 0)
    total = sum(n for _, n in ordered)
    if not total:
        return None
    wanted = [(total - 1) // 2, total // 2]  # 0-based ranks of the middle one or two
    found: list[float] = []
    seen = 0
    for bucket, n in ordered:
        while wanted and wanted[0] < seen + n:
            found.append(representative(bucket))
            wanted.pop(0)
        seen += n
    return sum(found) / len(found)


def merged(sketches: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """The sketch of all these times together: counts added bucket by bucket."""
    total: dict[int, int] = {}
    for sketch in sketches:
        for bucket, n in sketch.items():
            total[bucket] = total.get(bucket, 0) + n
    return total


def bucket_sql(column: str) -> str:
    """SQL of `bucket_of(column)` for a non-NULL integer column (PostgreSQL and SQLite): integer arithmetic only."""
    branches = []
    for e in range(MAX_EXPONENT, -1, -1):
        base = 1 << e
        if e >= SUB_BITS:
            sub = f"({column} - {base}) / {base >> SUB_BITS}"
        else:
            sub = f"({column} - {base}) * {SUB_BUCKETS >> e}"
        branches.append(f"WHEN {column} >= {base} THEN {e << SUB_BITS} + {sub}")
    return f"(CASE {' '.join(branches)} ELSE {ZERO_BUCKET} END)"
