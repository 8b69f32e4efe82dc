"""Test settings: the production settings with debug on and a throwaway key.

DATABASE_URL still comes from the environment, so CI runs the same suite on
PostgreSQL by exporting it.
"""

import os

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("SECRET_KEY", "test-only-key-" + "x" * 50)
# No test reaches the real Prolific: the Prolific tests point PROLIFIC_API_URL at their local fake
# (tests/support/fake_prolific.py); any other request meets a closed port on this machine.
os.environ.setdefault("PROLIFIC_API_URL", "http://127.0.0.1:9")
# The suite's own processes (and the workers it starts) keep their CPU priority: a test that imports would otherwise
# leave its pytest worker niced for the rest of the run (tests/test_background_priority.py tests the niceness).
os.environ.setdefault("CLAIMLAB_BACKGROUND_NICE", "0")

from config.settings import *

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"
LOGGING["handlers"]["console"]["formatter"] = "console"
# Outermost: the browser fixtures close it between tests (tests/support/live_gate.py says why).
MIDDLEWARE = ["tests.support.live_gate.LiveServerGate", *MIDDLEWARE]

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The test database is a file, not Django's in-memory default: the concurrency
    # tests need one connection per thread and SQLite's real file locking (WAL,
    # IMMEDIATE transactions, busy timeout), as in production. One file per test
    # process, so suites run side by side on one machine never share it; Django
    # deletes it when the run ends.
    import tempfile
    from pathlib import Path

    DATABASES["default"]["TEST"] = {
        "NAME": str(Path(tempfile.gettempdir()) / f"claimlab-test-{os.getpid()}.sqlite3"),
    }
