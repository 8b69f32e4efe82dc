"""Fixtures of the Prolific tests (test_prolific_contract.py, test_prolific_pages.py)."""

from __future__ import annotations

import pytest

from annotation.crowd import prolific_client
from tests.annotation.crowd.prolific_support import fake_prolific


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch):
    """Retries wait 0 s here (their count and order are what the tests look at, never timings)."""
    monkeypatch.setattr(prolific_client, "RETRY_BACKOFF_SECONDS", 0.0)


@pytest.fixture
def fake():
    """The local fake of Prolific's API (tests/support/fake_prolific.py), for one test."""
    with fake_prolific() as server:
        yield server
