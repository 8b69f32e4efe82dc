"""The demo studies (real XSum labels, Factcheck-GPT gold), loaded once for the whole package.

Loading takes a few seconds, so it happens once, committed to the test
database, and is removed when the package's tests are done; each test still
runs in its own rolled-back transaction on top of it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from annotation.models import Study
from tests.support import preference_study

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"


#: Every demo study, so that the teardown leaves none behind.
DEMO_SLUGS = [entry["slug"] for entry in json.loads((FIXTURES / "studies.json").read_text())]


@pytest.fixture(scope="package")
def demo(django_db_setup, django_db_blocker):
    """The three demo studies, by slug."""
    User = get_user_model()
    with django_db_blocker.unblock():
        users_before = set(User.objects.values_list("pk", flat=True))
        call_command("load_demo", stdout=io.StringIO())
        studies = {
            study.slug: study
            for study in Study.objects.filter(slug__in=["xsum-factuality", "factcheck-gpt", "factscore-pref"])
        }
    yield studies
    with django_db_blocker.unblock():
        Study.objects.filter(slug__in=DEMO_SLUGS).delete()
        User.objects.exclude(pk__in=users_before).delete()


@pytest.fixture
def xsum_study(demo, db) -> Study:
    return demo["xsum-factuality"]


@pytest.fixture
def demo_researcher(demo, db):
    return get_user_model().objects.get(username="researcher")


@pytest.fixture(scope="package")
def xsum_fixture_labels() -> pd.DataFrame:
    """The demo's XSum labels read straight from the fixture file (not through Claimlab)."""
    aliases = {"yes": "factual", "no": "not_factual"}
    rows = [json.loads(line) for line in (FIXTURES / "xsum" / "annotations.jsonl").open(encoding="utf-8")]
    frame = pd.DataFrame(rows)
    frame["label"] = frame["label"].map(aliases)
    return frame


# --- the seeded preference study (tests/support/preference_study.py) ----------------------
# For test_report_preference, test_report_honesty and test_report_latex; a module that defines
# its own `study` or `report` fixture uses that one.


@pytest.fixture
def records() -> list[dict]:
    return preference_study.seeded_records()


@pytest.fixture
def study(db, researcher):
    return preference_study.build_study(researcher)


@pytest.fixture
def report(study):
    return preference_study.full_report(study)


@pytest.fixture
def frame(records) -> pd.DataFrame:
    return preference_study.label_frame(records)
