"""The runner's cache: an answer is keyed by what determines it, and an item with an answer is not asked again.

The key is a hash of model, rendered messages, temperature, max_tokens,
preset and parser (docs/architecture.md, Mechanisms); the unique (verifier, item, cache key)
constraint of ``Prediction`` makes a duplicate impossible, so a rerun, a
resumed run or a second verifier with the same settings asks only for what
has no error-free answer yet.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ...models import Prediction, VerifierRun

__all__ = ["CACHE_VERSION", "Keyed", "answered", "cache_key", "split_cached"]

#: Bumped when the runner's parsing or request shape changes in a way that must invalidate old answers.
CACHE_VERSION = 1


class Keyed(Protocol):
    """What the cache reads of a job (runner.jobs.Job): its item and key. A protocol, not the class,
    so that jobs.py, which keys its jobs with `cache_key`, is not imported back (no import circle)."""

    @property
    def item_id(self) -> int: ...

    @property
    def cache_key(self) -> str: ...


KeyedJob = TypeVar("KeyedJob", bound=Keyed)


def cache_key(parts: Mapping[str, Any]) -> str:
    """SHA-256 of a canonical JSON of what determines an answer (model, messages, parameters, preset, parser)."""
    text = json.dumps(
        {"v": CACHE_VERSION, **parts}, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def answered(run: VerifierRun, jobs: Sequence[Keyed]) -> dict[tuple[int, str], int | None]:
    """(item, cache key) -> the run that stored it, for each job that already has an error-free answer."""
    return {
        (item_id, key): owner
        for item_id, key, owner in Prediction.objects.filter(
            verifier_id=run.verifier_id,
            item_id__in=[job.item_id for job in jobs],
            cache_key__in={job.cache_key for job in jobs},
            error="",
        ).values_list("item_id", "cache_key", "run_id")
    }


def split_cached(run: VerifierRun, jobs: Sequence[KeyedJob]) -> tuple[list[KeyedJob], int]:
    """The jobs still to ask, and how many of the others an earlier run answered.

    An item counts as cached once: not when this run stored its answer
    (a redone chunk), nor when it lies before the run's counted cursor.
    """
    found = answered(run, jobs)
    to_do: list[KeyedJob] = []
    n_cached = 0
    for job in jobs:
        if (job.item_id, job.cache_key) not in found:
            to_do.append(job)
        elif found[(job.item_id, job.cache_key)] != run.pk and job.item_id > run.counted_cursor:
            n_cached += 1
    return to_do, n_cached
