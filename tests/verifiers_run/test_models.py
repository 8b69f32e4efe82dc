"""The database itself refuses predictions and runs that would make verifier numbers dishonest."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from annotation.models import Item
from annotation.studies.services import create_study
from metaeval.models import Prediction, Verifier, VerifierRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def verifier(claims_study) -> Verifier:
    return Verifier.objects.create(study=claims_study, name="v", kind="baseline_majority")


def prediction(verifier: Verifier, **fields) -> Prediction:
    values = {
        "verifier": verifier,
        "item": Item.objects.filter(study=verifier.study).first(),
        "label": "supported",
        "parse_status": "ok",
        "cache_key": "k1",
    }
    values.update(fields)
    return Prediction.objects.create(**values)


def test_a_prediction_is_stored_once_per_cache_key(verifier):
    prediction(verifier)
    with pytest.raises(IntegrityError), transaction.atomic():
        prediction(verifier, label="contradicted")
    prediction(verifier, cache_key="k2", label="contradicted")  # another prompt or model: another answer
    assert Prediction.objects.filter(verifier=verifier).count() == 2


@pytest.mark.parametrize(
    "fields",
    [
        {"label": None, "parse_status": "ok"},  # a parsed answer without a label
        {"label": "supported", "parse_status": "unparseable"},  # an unparseable answer counted as a label
        {"label": None, "parse_status": "unparseable", "error": "HTTP 500"},  # an error that was also parsed
        {"label": "supported", "parse_status": "", "error": "timed out"},  # a failed call with a label
        {"label": None, "parse_status": ""},  # neither an answer nor an error
        {"label": "", "parse_status": "ok"},  # an empty label
        {"label": "supported", "parse_status": "maybe"},  # an unknown parse status
        {"cache_key": ""},
    ],
)
def test_label_is_null_exactly_when_unparseable_or_failed(verifier, fields):
    with pytest.raises(IntegrityError), transaction.atomic():
        prediction(verifier, **fields)


def test_the_allowed_shapes_of_a_prediction(verifier):
    prediction(verifier, cache_key="a")
    prediction(verifier, cache_key="b", label="inconclusive", parse_status="fallback")
    prediction(verifier, cache_key="c", label=None, parse_status="unparseable", raw_output="hmm")
    prediction(verifier, cache_key="d", label=None, parse_status="", error="HTTP 429 rate limited")
    assert Prediction.objects.filter(verifier=verifier).count() == 4


def test_a_verifier_has_at_most_one_active_run(verifier):
    VerifierRun.objects.create(verifier=verifier, status="running", total=6)
    with pytest.raises(IntegrityError), transaction.atomic():
        VerifierRun.objects.create(verifier=verifier, status="queued", total=6)
    VerifierRun.objects.create(verifier=verifier, status="succeeded", total=6, done=6)
    VerifierRun.objects.create(verifier=verifier, status="failed", total=6)
    assert verifier.runs.count() == 3


@pytest.mark.parametrize(
    "fields", [{"done": 7, "total": 6}, {"cached": 3, "done": 2, "total": 6}, {"status": "paused"}, {"concurrency": 0}]
)
def test_run_counters_stay_consistent(verifier, fields):
    with pytest.raises(IntegrityError), transaction.atomic():
        VerifierRun.objects.create(verifier=verifier, **{"total": 6, **fields})


def test_verifier_names_are_unique_per_study_only(claims_study, verifier):
    with pytest.raises(IntegrityError), transaction.atomic():
        Verifier.objects.create(study=claims_study, name="v", kind="baseline_overlap")
    other = create_study(slug="other", name="Other", kind="verification")
    assert Verifier.objects.create(study=other, name="v", kind="baseline_overlap").pk


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "llm", "preset": "factscore", "model": "m"},  # no base URL
        {"kind": "llm", "preset": "", "model": "m", "base_url": "http://x/v1"},
        {"kind": "oracle"},
        {"kind": "llm", "preset": "factscore", "model": "m", "base_url": "http://x/v1", "concurrency": 0},
        {"kind": "llm", "preset": "factscore", "model": "m", "base_url": "http://x/v1", "temperature": 3},
    ],
)
def test_verifier_rows_are_checked(claims_study, fields):
    with pytest.raises(IntegrityError), transaction.atomic():
        Verifier.objects.create(study=claims_study, name="bad", **fields)
