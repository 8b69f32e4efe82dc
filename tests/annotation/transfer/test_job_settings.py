"""The background-job settings (heartbeat, attempts, lock retries, 503 Retry-After) come from the environment."""

from __future__ import annotations

from tests.support.settings_env import settings_under

JOB_SETTINGS = {
    # setting: (environment variable, default, a value an operator might set)
    "JOB_STALE_SECONDS": ("CLAIMLAB_JOB_STALE_SECONDS", 120.0, 300.0),
    "JOB_MAX_ATTEMPTS": ("CLAIMLAB_JOB_MAX_ATTEMPTS", 3, 5),
    "JOB_LOCK_RETRIES": ("CLAIMLAB_JOB_LOCK_RETRIES", 4, 0),
    "JOB_LOCK_BACKOFF_SECONDS": ("CLAIMLAB_JOB_LOCK_BACKOFF_SECONDS", 5.0, 0.5),
    "DB_BUSY_RETRY_AFTER_SECONDS": ("CLAIMLAB_DB_BUSY_RETRY_AFTER_SECONDS", 5, 30),
}


def test_job_settings_come_from_the_environment(tmp_path):
    env = {variable: str(value) for variable, _, value in JOB_SETTINGS.values()}
    namespace = settings_under(env, tmp_path / "var")
    assert {name: namespace[name] for name in JOB_SETTINGS} == {name: row[2] for name, row in JOB_SETTINGS.items()}


def test_job_settings_defaults_and_bad_values(tmp_path):
    variables = [variable for variable, _, _ in JOB_SETTINGS.values()]
    defaults = {name: row[1] for name, row in JOB_SETTINGS.items()}
    namespace = settings_under({}, tmp_path / "var", unset=variables)
    assert {name: namespace[name] for name in JOB_SETTINGS} == defaults
    namespace = settings_under(dict.fromkeys(variables, "soon"), tmp_path / "var")
    assert {name: namespace[name] for name in JOB_SETTINGS} == defaults  # a typo falls back, never a crash
