"""Settings come from the environment and production settings are safe.

Each case starts a fresh `manage.py` process, because settings are read once
per process.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.settings_env import settings_under

REPO = Path(__file__).resolve().parents[1]


def manage(*args: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    base = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DEBUG", "SECRET_KEY", "DATABASE_URL", "ALLOWED_HOSTS", "DJANGO_SETTINGS_MODULE", "LOG_FORMAT"}
    }
    base.update({"DJANGO_SETTINGS_MODULE": "config.settings", "CLAIMLAB_VAR_DIR": str(tmp_path / "var")})
    base.update(env)
    return subprocess.run(
        [sys.executable, str(REPO / "manage.py"), *args], env=base, capture_output=True, text=True, timeout=120
    )


PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "claimlab.example.org",
}


def test_check_deploy_passes_without_warnings(tmp_path):
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_refuses_to_start_without_secret_key_outside_debug(tmp_path):
    env = {key: value for key, value in PRODUCTION.items() if key != "SECRET_KEY"}
    result = manage("check", env=env, tmp_path=tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_debug_without_secret_key_uses_a_private_per_checkout_key(tmp_path):
    first = settings_under({"DEBUG": "1"}, tmp_path / "var")["SECRET_KEY"]
    second = settings_under({"DEBUG": "1"}, tmp_path / "var")["SECRET_KEY"]
    other_checkout = settings_under({"DEBUG": "1"}, tmp_path / "elsewhere")["SECRET_KEY"]
    assert first == second and len(first) >= 50 and other_checkout != first
    key_file = tmp_path / "var" / "dev-secret-key"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"


def test_default_database_is_sqlite_in_wal_with_immediate_transactions(tmp_path):
    code = (
        "from django.db import connection; from django.conf import settings; "
        "c = connection.cursor(); c.execute('PRAGMA journal_mode'); mode = c.fetchone()[0]; "
        "c.execute('PRAGMA busy_timeout'); busy = c.fetchone()[0]; "
        "db = settings.DATABASES['default']; "
        "print(mode, busy, db['OPTIONS']['transaction_mode'], db['NAME'])"
    )
    result = manage("shell", "--no-imports", "-c", code, env={"DEBUG": "1"}, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    mode, busy, transaction_mode, name = result.stdout.split()
    assert mode == "wal" and int(busy) >= 5000 and transaction_mode == "IMMEDIATE"
    assert Path(name) == tmp_path / "var" / "claimlab.sqlite3"


def test_database_url_selects_postgresql_and_tasks_use_the_database_backend(tmp_path):
    env = {**PRODUCTION, "DATABASE_URL": "postgres://claim:pw@db.internal:6543/claimlab"}
    namespace = settings_under(env, tmp_path / "var")
    db = namespace["DATABASES"]["default"]
    assert [db["ENGINE"], db["NAME"], db["HOST"], db["PORT"], namespace["TASKS"]["default"]["BACKEND"]] == [
        "config.postgresql",  # Django's, with batches sized for server-side binding
        "claimlab",
        "db.internal",
        6543,
        "django_tasks_db.DatabaseBackend",
    ]


def test_logs_are_json_lines_outside_debug(tmp_path):
    code = "import logging; logging.getLogger('claimlab.test').warning('import finished', extra={'study': 'demo'})"
    result = manage("shell", "--no-imports", "-c", code, env=PRODUCTION, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stderr.strip().splitlines()[-1])
    assert record["message"] == "import finished" and record["level"] == "WARNING" and record["study"] == "demo"


ANNOTATION_SETTINGS = {
    # name: (default, a value an operator might set)
    "ANNOTATION_LEASE_SECONDS": (30 * 60, 600),
    "IMPORT_UPLOAD_MAX_BYTES": (200 * 1024 * 1024, 1000),
    "IMPORT_INLINE_MAX_BYTES": (1024 * 1024, 10),
    "EXPORT_INLINE_MAX_ROWS": (50_000, 7),
}


def test_annotation_settings_come_from_the_environment(tmp_path):
    env = {name: str(value) for name, (_, value) in ANNOTATION_SETTINGS.items()}
    namespace = settings_under(env, tmp_path / "var")
    assert [namespace[name] for name in ANNOTATION_SETTINGS] == [value for _, value in ANNOTATION_SETTINGS.values()]


def test_annotation_settings_defaults(tmp_path):
    namespace = settings_under({}, tmp_path / "var", unset=ANNOTATION_SETTINGS)
    assert {name: namespace[name] for name in ANNOTATION_SETTINGS} == {
        name: default for name, (default, _) in ANNOTATION_SETTINGS.items()
    }


@pytest.mark.parametrize("value,expected", [("1", True), ("true", True), ("on", True), ("0", False), ("", False)])
def test_env_bool(monkeypatch, value, expected):
    from config.settings import env_bool

    monkeypatch.setenv("SOME_FLAG", value)
    assert env_bool("SOME_FLAG") is expected


ARENAS_PROBE = """
import ctypes, threading, django
django.setup()
import numpy as np
def churn():
    for _ in range(300):
        blocks = [np.ones(20_000) for _ in range(20)]  # 160 KB each: malloc's arenas, not its own mmap
        del blocks
threads = [threading.Thread(target=churn) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL(None).malloc_stats()  # one "Arena N:" block per arena, on standard error
"""


@pytest.mark.parametrize(("setting", "one_arena"), [("", True), ("0", False)], ids=["default", "glibc's"])
def test_a_process_keeps_one_malloc_arena_unless_told_otherwise(tmp_path, setting, one_arena):
    """CLAIMLAB_MALLOC_ARENAS (config/malloc_arenas.py): threads allocating at once share the one arena."""
    env = {key: value for key, value in os.environ.items() if key not in {"MALLOC_ARENA_MAX", "CLAIMLAB_MALLOC_ARENAS"}}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1", "CLAIMLAB_VAR_DIR": str(tmp_path / "var")})
    if setting:
        env["CLAIMLAB_MALLOC_ARENAS"] = setting
    done = subprocess.run(
        [sys.executable, "-c", ARENAS_PROBE], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    arenas = done.stderr.count("Arena ")
    assert arenas == 1 if one_arena else arenas > 1, done.stderr[-2000:]


def test_the_arena_cap_leaves_an_operators_own_setting_and_zero_alone(monkeypatch):
    from config.malloc_arenas import limit_malloc_arenas

    assert limit_malloc_arenas(0) is False
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas(1) is False
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert limit_malloc_arenas(1) is True  # glibc here: mallopt took it (this process has one arena already)
