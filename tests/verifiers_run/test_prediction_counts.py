"""The verifiers page's prediction counts, kept per verifier and version (issue 35): always the real counts.

An import that COPYs new predictions (PostgreSQL, no update) keeps each verifier's new count itself once
it commits, so the page counts nothing after it; every other write leaves the next view to count.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.errors import ImportFailed
from metaeval.models import Prediction, Verifier
from metaeval.verifiers.prediction_version import count_key
from metaeval.verifiers.selectors import prediction_counts, study_verifiers
from metaeval.verifiers.services import import_predictions
from tests.annotation.transfer.test_import_staging import items_for


@pytest.fixture(autouse=True)
def empty_cache():
    cache.clear()
    yield
    cache.clear()


def predictions(verifier: str, items: range, label: str = "supported") -> io.BytesIO:
    rows = [json.dumps({"item": f"c-{k}", "verifier": verifier, "label": label}) for k in items]
    return io.BytesIO("\n".join(rows).encode())


def shown(study) -> dict[str, int]:
    return {verifier.name: verifier.n_predictions for verifier in study_verifiers(study)}  # type: ignore[attr-defined]


def real(study) -> dict[str, int]:
    return {
        verifier.name: Prediction.objects.filter(verifier=verifier).count()
        for verifier in Verifier.objects.filter(study=study)
    }


def counted_predictions(queries: CaptureQueriesContext) -> int:
    return sum("COUNT(" in query["sql"] and "metaeval_prediction" in query["sql"] for query in queries.captured_queries)


@pytest.mark.django_db
def test_counts_follow_every_import_and_an_import_that_copies_keeps_them(
    verification_study, django_capture_on_commit_callbacks
):
    items_for(verification_study, 30)
    with django_capture_on_commit_callbacks(execute=True):
        import_predictions(study=verification_study, stream=predictions("a", range(1, 11)), fmt="jsonl")
    with CaptureQueriesContext(connection) as first:
        on_page = shown(verification_study)
    assert on_page == real(verification_study) == {"a": 10}
    copies = connection.vendor == "postgresql"
    assert counted_predictions(first) == (0 if copies else 1)  # the copy kept a's count for its version

    with django_capture_on_commit_callbacks(execute=True):
        import_predictions(study=verification_study, stream=predictions("a", range(11, 16)), fmt="jsonl")
        import_predictions(study=verification_study, stream=predictions("b", range(1, 4)), fmt="jsonl")
    with CaptureQueriesContext(connection) as second:
        on_page = shown(verification_study)
    assert on_page == real(verification_study) == {"a": 15, "b": 3}
    assert counted_predictions(second) == (0 if copies else 1)

    # an update import replaces without adding (staged on both databases): counted again, the same
    with django_capture_on_commit_callbacks(execute=True):
        import_predictions(
            study=verification_study, stream=predictions("a", range(1, 3), "contradicted"), fmt="jsonl", update=True
        )
    with CaptureQueriesContext(connection) as third:
        on_page = shown(verification_study)
    assert on_page == real(verification_study) == {"a": 15, "b": 3}
    assert counted_predictions(third) == 1
    with CaptureQueriesContext(connection) as fourth:
        assert shown(verification_study) == {"a": 15, "b": 3}
    assert counted_predictions(fourth) == 0  # kept


@pytest.mark.django_db
def test_a_failed_import_keeps_nothing(verification_study, django_capture_on_commit_callbacks):
    items_for(verification_study, 5)
    with django_capture_on_commit_callbacks(execute=True):
        import_predictions(study=verification_study, stream=predictions("a", range(1, 4)), fmt="jsonl")
    assert shown(verification_study) == {"a": 3}
    bad = io.BytesIO(b'{"item": "c-4", "verifier": "a", "label": "supported"}\n{"item": "c-99", "verifier": "a"}')
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(ImportFailed):
        import_predictions(study=verification_study, stream=bad, fmt="jsonl")
    assert shown(verification_study) == real(verification_study) == {"a": 3}


@pytest.mark.django_db
def test_a_count_taken_while_the_version_moved_is_not_kept(verification_study, django_capture_on_commit_callbacks):
    """The page read the verifier at one version; a write committed before it counted: the count it
    took may hold the newer rows, so it is shown but not kept under the older version."""
    items_for(verification_study, 5)
    with django_capture_on_commit_callbacks(execute=True):
        import_predictions(study=verification_study, stream=predictions("a", range(1, 3)), fmt="jsonl")
    [read_before] = list(Verifier.objects.filter(study=verification_study))
    cache.clear()
    with django_capture_on_commit_callbacks(execute=True):
        import_predictions(study=verification_study, stream=predictions("a", range(3, 5)), fmt="jsonl")
    assert prediction_counts([read_before]) == {read_before.pk: 4}
    old_key = count_key(read_before.pk, read_before.created_at, read_before.predictions_version)
    assert cache.get(old_key) is None
