"""`make serve` stands up the production stack (issue 16, §3): gunicorn with DEBUG off, whitenoise,
one worker; it refuses a database with unapplied migrations. Run as an operator would, in its own
process group on a free port, with a SQLite file of its own."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def operator_env(tmp_path) -> dict[str, str]:
    keep = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST", "DJANGO", "DATABASE"))}
    return {
        **keep,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'claimlab.sqlite3'}",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "CLAIMLAB_VAR_DIR": str(tmp_path / "var"),
        "STATIC_ROOT": str(tmp_path / "static"),
        "HOST": "127.0.0.1",
        "PORT": str(free_port()),
        "WEB_CONCURRENCY": "2",
        "LOG_LEVEL": "WARNING",
    }


def get(url: str) -> tuple[int, bytes, dict[str, str]]:
    # generous: the first pages a fresh gunicorn worker renders (templates compiled, apps warmed)
    # are slow on a loaded CI machine; a real failure still fails, a slow machine does not flake
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read(), dict(error.headers)


def test_make_serve_refuses_unapplied_migrations(operator_env):
    done = subprocess.run(["make", "serve"], cwd=REPO, env=operator_env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "the database has unapplied migrations" in done.stdout + done.stderr


def test_make_serve_runs_gunicorn_with_production_settings(operator_env, tmp_path):
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=REPO, env=operator_env, check=True
    )
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        ["make", "serve"], cwd=REPO, env=operator_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{operator_env['PORT']}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                status, body, _ = get(f"{base}/readyz")
                if status == 200:
                    break
            except OSError:
                pass
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(0.5)
        assert b'"ready"' in body
        status, body, headers = get(f"{base}/accounts/login/")
        assert status == 200 and b"csrfmiddlewaretoken" in body
        assert "gunicorn" in headers.get("Server", "")
        status, body, headers = get(f"{base}/static/css/claimlab.css")  # whitenoise, from collectstatic
        assert status == 200 and len(body) > 100
        status, body, _ = get(f"{base}/no-such-page/")
        assert status == 404 and b"Traceback" not in body  # DEBUG is off
        log.flush()
        assert "Booting worker" in (tmp_path / "serve.log").read_text()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        log.close()
