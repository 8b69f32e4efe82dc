"""The active-time sketch (lib/active_time_sketch.py, issue 35): its buckets, its SQL twin and its stated error.

The progress page shows medians read from the sketch and says they are within 1/128 of the exact
ones: every value lies in a bucket whose midpoint is that close, the database puts every value in
the bucket Python does, and the median of seeded data and of edge cases is that close to the exact one.
"""

from __future__ import annotations

import random
import statistics

import pytest
from django.db import connection

from annotation.lib import active_time_sketch as sketch
from annotation.models import MAX_ACTIVE_MS

#: Values around every power of two an active time can reach, and the ends.
EDGES = sorted(
    {0, 1, 2, 3, MAX_ACTIVE_MS, MAX_ACTIVE_MS - 1}
    | {value for k in range(31) for value in (2**k - 1, 2**k, 2**k + 1, 2**k + 2**k // 64, 2**k + 2**k // 64 - 1)}
)


def _sketch_of(values: list[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for value in values:
        bucket = sketch.bucket_of(value)
        counts[bucket] = counts.get(bucket, 0) + 1
    return counts


def _within(estimate: float | None, exact: float) -> bool:
    assert estimate is not None
    return abs(estimate - exact) <= sketch.RELATIVE_ERROR * exact


def _seeded_times(rng: random.Random, n: int) -> list[int]:
    """Active times as annotators make them: mostly seconds to minutes (log-normal), some 0 and some huge."""
    times = [min(MAX_ACTIVE_MS, int(rng.lognormvariate(9, 1.2))) for _ in range(n)]
    for _ in range(n // 20):
        times[rng.randrange(n)] = rng.choice((0, 1, MAX_ACTIVE_MS, rng.randrange(1, 200)))
    return times


def test_every_value_lies_in_its_bucket_within_the_stated_error_of_its_midpoint():
    rng = random.Random(35)
    values = [*range(0, 5000), *EDGES, *(rng.randrange(MAX_ACTIVE_MS + 1) for _ in range(20_000))]
    for value in values:
        bucket = sketch.bucket_of(value)
        low, high = sketch.bounds(bucket)
        assert low <= value <= high, (value, bucket, low, high)
        assert abs(sketch.representative(bucket) - value) <= sketch.RELATIVE_ERROR * value, value
    assert sketch.representative(sketch.bucket_of(0)) == 0
    assert all(sketch.representative(sketch.bucket_of(value)) == value for value in range(128))  # exact below 128 ms
    assert sketch.RELATIVE_ERROR == 1 / 128
    with pytest.raises(ValueError, match="negative"):
        sketch.bucket_of(-1)


def test_buckets_are_contiguous_and_ordered_like_their_values():
    """Each bucket starts where the one before ended and holds larger values: the order a median needs."""
    for value in [*range(1, 70_000), *(edge for edge in EDGES if edge)]:
        before, bucket = sketch.bucket_of(value - 1), sketch.bucket_of(value)
        assert bucket >= before, value
        if bucket != before:
            assert sketch.bounds(bucket)[0] == value and sketch.bounds(before)[1] == value - 1, value


@pytest.mark.django_db
def test_the_database_buckets_every_value_as_python_does():
    """`bucket_sql` (integer arithmetic, PostgreSQL and SQLite) against `bucket_of` on edges and random values."""
    rng = random.Random(7)
    values = [*EDGES, *(rng.randrange(MAX_ACTIVE_MS + 1) for _ in range(300)), *range(0, 300)]
    with connection.cursor() as cursor:
        for start in range(0, len(values), 100):
            chunk = values[start : start + 100]
            rows = " UNION ALL ".join(f"SELECT {value} AS ms" for value in chunk)
            cursor.execute(f"SELECT t.ms, {sketch.bucket_sql('t.ms')} FROM ({rows}) AS t")
            for value, bucket in cursor.fetchall():
                assert bucket == sketch.bucket_of(value), value


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101, 1000, 5000])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_median_is_within_the_stated_error_of_the_exact_median_on_seeded_data(n, seed):
    times = _seeded_times(random.Random(seed * 1000 + n), n)
    assert _within(sketch.median(_sketch_of(times)), statistics.median(times))


@pytest.mark.parametrize(
    "times",
    [
        [0],
        [0, 0, 0],
        [0, 1],
        [0, 10_000],  # an even count with the middle two in different buckets, one of them 0
        [5],
        [MAX_ACTIVE_MS],
        [MAX_ACTIVE_MS, MAX_ACTIVE_MS - 1, 1],
        [1000, 2000],
        [1000, 1001, 1002, 1003],  # the two middle ones share a bucket
        [127, 128, 129, 130],
        [4095, 4096],  # either side of a power of two
        [MAX_ACTIVE_MS, 0],
    ],
)
def test_the_median_is_within_the_stated_error_on_edge_cases(times):
    assert _within(sketch.median(_sketch_of(times)), statistics.median(times))


def test_no_times_have_no_median_and_sketches_merge_as_their_times_do():
    assert sketch.median({}) is None and sketch.median({5: 0}) is None
    rng = random.Random(11)
    parts = [_seeded_times(rng, rng.randrange(1, 300)) for _ in range(8)]
    together = [value for part in parts for value in part]
    assert sketch.merged(_sketch_of(part) for part in parts) == _sketch_of(together)
    assert _within(sketch.median(sketch.merged(_sketch_of(part) for part in parts)), statistics.median(together))
