"""The verifier settings: read from the environment once, in config/settings.py, and obeyed where they apply."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from metaeval.models import Prediction
from metaeval.verifiers.runner.limits import chunk_size
from metaeval.verifiers.services.runs import stale_after
from tests.support.settings_env import settings_under

NAMES = ("VERIFIER_STALE_SECONDS", "VERIFIER_CHUNK_SIZE", "PREDICTION_UPLOAD_MAX_BYTES")
ENVIRONMENT = (
    "CLAIMLAB_VERIFIER_STALE_SECONDS",
    "CLAIMLAB_VERIFIER_CHUNK_SIZE",
    "PREDICTION_UPLOAD_MAX_BYTES",
)


def verifier_settings_under(env: dict[str, str], tmp_path: Path) -> dict:
    """The verifier settings as config/settings.py reads them from ``env``."""
    namespace = settings_under(env, tmp_path / "var", unset=ENVIRONMENT)
    return {name: namespace[name] for name in NAMES}


def test_defaults_and_values_from_the_environment(tmp_path):
    assert verifier_settings_under({}, tmp_path) == {
        "VERIFIER_STALE_SECONDS": 120.0,
        "VERIFIER_CHUNK_SIZE": None,
        "PREDICTION_UPLOAD_MAX_BYTES": 10 * 1024 * 1024,
    }
    assert verifier_settings_under(
        {
            "CLAIMLAB_VERIFIER_STALE_SECONDS": "30.5",
            "CLAIMLAB_VERIFIER_CHUNK_SIZE": " 64 ",
            "PREDICTION_UPLOAD_MAX_BYTES": "2048",
        },
        tmp_path,
    ) == {
        "VERIFIER_STALE_SECONDS": 30.5,
        "VERIFIER_CHUNK_SIZE": 64,
        "PREDICTION_UPLOAD_MAX_BYTES": 2048,
    }


def test_values_that_are_not_numbers_fall_back_as_before(tmp_path):
    got = verifier_settings_under(
        {"CLAIMLAB_VERIFIER_STALE_SECONDS": "soon", "CLAIMLAB_VERIFIER_CHUNK_SIZE": "0"}, tmp_path
    )
    assert (got["VERIFIER_STALE_SECONDS"], got["VERIFIER_CHUNK_SIZE"]) == (120.0, None)
    got = verifier_settings_under(
        {"CLAIMLAB_VERIFIER_STALE_SECONDS": "-5", "CLAIMLAB_VERIFIER_CHUNK_SIZE": "-3"}, tmp_path
    )
    assert (got["VERIFIER_STALE_SECONDS"], got["VERIFIER_CHUNK_SIZE"]) == (0.0, None)


def test_the_runner_and_the_run_services_read_the_settings(settings):
    settings.VERIFIER_STALE_SECONDS = 45.0
    assert stale_after() == timedelta(seconds=45)
    settings.VERIFIER_CHUNK_SIZE = None
    assert (chunk_size(1), chunk_size(8), chunk_size(1000)) == (16, 128, 2000)
    settings.VERIFIER_CHUNK_SIZE = 7
    assert chunk_size(1000) == 7


@pytest.mark.django_db
@pytest.mark.urls("tests.verifiers_run.urls")
def test_one_upload_limit_for_the_page_and_the_api(client, researcher, claims_study, settings):
    settings.PREDICTION_UPLOAD_MAX_BYTES = 40
    client.force_login(researcher)
    line = b'{"item": "c1", "verifier": "elsewhere", "label": "supported"}\n'
    assert len(line) > 40
    api = client.post(reverse("api-prediction-import", args=["claims"]), {"file": SimpleUploadedFile("p.jsonl", line)})
    assert api.status_code == 400 and "the limit here is 40" in api.json()["detail"]
    page = client.post(
        reverse("verifiers:import_predictions", args=["claims"]), {"file": SimpleUploadedFile("p.jsonl", line)}
    )
    assert page.status_code == 400 and b"upload at most 40 here" in page.content
    settings.PREDICTION_UPLOAD_MAX_BYTES = len(line)
    assert (
        client.post(
            reverse("api-prediction-import", args=["claims"]), {"file": SimpleUploadedFile("p.jsonl", line)}
        ).status_code
        == 200
    )
    assert Prediction.objects.count() == 1
