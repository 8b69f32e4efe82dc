"""The RQ backend's settings follow the environment, and a half-configured one refuses to start."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.support.settings_env import settings_under

RQ = "django_tasks_rq.RQBackend"
UNSET = ("TASKS_BACKEND", "REDIS_URL", "RQ_JOB_TIMEOUT", "CLAIMLAB_VERIFIER_SLOT_LEASE_SECONDS")


def test_the_database_backend_is_the_default_and_needs_no_redis(tmp_path):
    namespace = settings_under({}, tmp_path / "var", unset=UNSET)
    assert namespace["TASKS"]["default"]["BACKEND"] == "django_tasks_db.DatabaseBackend"
    assert (namespace["REDIS_URL"], namespace["TASKS_ON_RQ"]) == ("", False)
    assert "django_rq" not in namespace["INSTALLED_APPS"] and "RQ_QUEUES" not in namespace
    assert namespace["VERIFIER_SLOT_LEASE_SECONDS"] == 30.0


def test_the_rq_backend_puts_every_task_queue_on_redis_with_the_job_timeout(tmp_path):
    env = {"TASKS_BACKEND": RQ, "REDIS_URL": "redis://redis.internal:6380/2", "RQ_JOB_TIMEOUT": "7200"}
    namespace = settings_under(env, tmp_path / "var", unset=UNSET)
    assert namespace["TASKS_ON_RQ"] and "django_rq" in namespace["INSTALLED_APPS"]
    assert namespace["RQ_QUEUES"] == {
        name: {"URL": "redis://redis.internal:6380/2", "DEFAULT_TIMEOUT": 7200}
        for name in namespace["TASKS"]["default"]["QUEUES"]
    }


def test_the_rq_backend_without_redis_url_refuses_to_start_naming_the_variable(tmp_path):
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        settings_under({"TASKS_BACKEND": RQ}, tmp_path / "var", unset=UNSET)


@pytest.mark.parametrize(
    ("name", "value"), [("RQ_JOB_TIMEOUT", "an hour"), ("CLAIMLAB_VERIFIER_SLOT_LEASE_SECONDS", "-5")]
)
def test_a_bad_number_is_refused_naming_the_variable(tmp_path, name, value):
    env = {"TASKS_BACKEND": RQ, "REDIS_URL": "redis://127.0.0.1:6379/0", name: value}
    with pytest.raises(ImproperlyConfigured, match=name):
        settings_under(env, tmp_path / "var", unset=UNSET)
