"""A cache shared by every host (issue 16 §1): Redis when REDIS_URL or CACHE_URL is set.

Nothing in Claimlab keeps state in the cache today (sessions, login throttling and the
invite sign-up throttle live in the database), so what a second host must see is what the
report cache and rate limiters put there: checked here with a value written by another process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import caches

from tests.support.redis_server import redis_server
from tests.support.settings_env import settings_under

REPO = Path(__file__).resolve().parents[2]


def test_without_a_url_the_cache_is_each_processs_memory_and_with_one_it_is_redis(tmp_path):
    assert "CACHES" not in settings_under({}, tmp_path, unset=["REDIS_URL", "CACHE_URL"])  # Django's default
    shared = settings_under({"REDIS_URL": "redis://cache.internal:6379/1"}, tmp_path, unset=["CACHE_URL"])["CACHES"]
    assert shared["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert shared["default"]["LOCATION"] == "redis://cache.internal:6379/1"
    both = {"REDIS_URL": "redis://queue.internal:6379/0", "CACHE_URL": "redis://cache.internal:6379/2"}
    assert settings_under(both, tmp_path)["CACHES"]["default"]["LOCATION"] == "redis://cache.internal:6379/2"


@pytest.mark.slow
def test_what_one_host_counts_in_the_redis_cache_another_host_sees(settings, tmp_path):
    with redis_server(tmp_path) as url:
        settings.CACHES = settings_under({"CACHE_URL": url}, tmp_path)["CACHES"]
        cache = caches["default"]
        cache.set("throttle:203.0.113.9", 1, timeout=60)
        cache.incr("throttle:203.0.113.9")
        other_host = subprocess.run(
            [
                sys.executable,
                "-c",
                "import django; django.setup(); from django.core.cache import cache; "
                "print(cache.incr('throttle:203.0.113.9')); cache.set('report:verif', 'from the other host', 60)",
            ],
            cwd=REPO,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings_test", "CACHE_URL": url},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert other_host.returncode == 0, other_host.stderr[-2000:]
        assert other_host.stdout.strip() == "3"  # it saw this process's two counts
        assert cache.get("throttle:203.0.113.9") == 3 and cache.get("report:verif") == "from the other host"
