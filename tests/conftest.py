"""Shared fixtures: users, studies and small files to import."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.contrib.auth import get_user_model

from annotation.members.services import add_members
from annotation.models import Study
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items

# Browser fixtures (page, guard, ...) for every folder that drives Chromium.
pytest_plugins = ["tests.browser.fixtures"]


def jsonl(*records: dict | str) -> io.BytesIO:
    """A JSONL byte stream; strings are written as raw lines."""
    lines = [record if isinstance(record, str) else json.dumps(record) for record in records]
    return io.BytesIO(("\n".join(lines) + "\n").encode("utf-8"))


def csv_bytes(records: list[dict], *, header: list[str] | None = None, newline: str = "\n") -> io.BytesIO:
    """A CSV byte stream with the records' keys as header; nested values become JSON cells."""
    columns = header or list(dict.fromkeys(name for record in records for name in record))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=newline)
    writer.writerow(columns)
    for record in records:
        writer.writerow(
            [
                json.dumps(value) if isinstance(value, (list, dict)) else "" if value is None else value
                for value in (record.get(column) for column in columns)
            ]
        )
    return io.BytesIO(buffer.getvalue().encode("utf-8"))


def flat_item(record: dict) -> dict:
    """An item record as CSV columns: a preference item's lists become `list:<system>` columns."""
    flat = {name: value for name, value in record.items() if name != "lists" or not isinstance(value, dict)}
    if isinstance(record.get("lists"), dict):
        flat.update({f"list:{system}": claims for system, claims in record["lists"].items()})
    return flat


def verification_item(item_id: str = "c-1", **overrides) -> dict:
    record = {
        "id": item_id,
        "domain": "longfact",
        "claim": f"Claim {item_id} is true.",
        "context": "A sentence.",
        "evidence": [{"text": "Some passage.", "title": "Doc", "url": "https://example.org/a", "source_type": "news"}],
    }
    record.update(overrides)
    return record


def preference_item(item_id: str = "p-1", **overrides) -> dict:
    record = {
        "id": item_id,
        "domain": "biography",
        "source": "Ada Lovelace was a mathematician.",
        "lists": {"veriscore": ["Ada was a mathematician."], "safe": ["Ada Lovelace was a mathematician."]},
    }
    record.update(overrides)
    return record


@pytest.fixture
def make_user(db):
    def make(username: str, **extra):
        return get_user_model().objects.create_user(username=username, password="pw-" + username, **extra)

    return make


@pytest.fixture
def researcher(make_user):
    return make_user("rita")


@pytest.fixture
def annotator(make_user):
    return make_user("anna")


@pytest.fixture
def verification_study(db, researcher, annotator) -> Study:
    study = create_study(slug="verif", name="Verification", kind="verification", annotators_per_item=3)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    add_members(study=study, usernames=[annotator.username], role="annotator")
    return study


@pytest.fixture
def preference_study(db, researcher) -> Study:
    study = create_study(slug="pref", name="Preference", kind="preference", annotators_per_item=3)
    add_members(study=study, usernames=[researcher.username], role="researcher")
    return study


@pytest.fixture
def loaded_verification_study(verification_study) -> Study:
    """Three items with two imported labels each."""
    import_items(
        study=verification_study,
        stream=jsonl(*(verification_item(f"c-{n}") for n in range(1, 4))),
        fmt="jsonl",
    )
    import_annotations(
        study=verification_study,
        stream=jsonl(
            *(
                {"item": f"c-{n}", "annotator": worker, "label": label}
                for n in range(1, 4)
                for worker, label in (("w1", "supported"), ("w2", "contradicted" if n == 2 else "supported"))
            )
        ),
        fmt="jsonl",
    )
    return verification_study


#: Fixtures that reach the test database (pytest-django's and the live server's).
_DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server"}
)
#: A module that names these may reach the database outside pytest-django's guard (a process it
#: starts reads DATABASE_URL): its tests are never marked `dbfree`.
_OUTSIDE_THE_GUARD = ("subprocess", "DATABASE_URL")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `dbfree` the tests that cannot reach the database: no `django_db` mark, no fixture that
    opens it (pytest-django refuses any query from such a test), and no process started. They run the
    same on every database, so CI's PostgreSQL pass deselects them (.ci/run) after the SQLite pass."""
    outside: dict[str, bool] = {}
    for item in items:
        path = str(item.path)
        if path not in outside:
            text = item.path.read_text(encoding="utf-8")
            outside[path] = any(name in text for name in _OUTSIDE_THE_GUARD)
        fixtures = set(getattr(item, "fixturenames", ()))
        if not outside[path] and item.get_closest_marker("django_db") is None and not _DATABASE_FIXTURES & fixtures:
            item.add_marker(pytest.mark.dbfree)
