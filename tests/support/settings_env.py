"""Read config/settings.py as it would be read under another environment, in this process.

Settings are read once per process, so checking how they follow the environment
used to mean a fresh Python process per case (1-3 s each: Django and every app
imported). Executing the settings file on its own with a given environment is
the same code path, in milliseconds; the tests that need the whole process
(`check --deploy`, logging set-up, the refusal to start) still start one.
"""

from __future__ import annotations

import os
import runpy
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from unittest import mock

SETTINGS_FILE = Path(__file__).resolve().parents[2] / "config" / "settings.py"

# Variables of the test run itself that must not leak into the settings under test.
RUN_VARIABLES = {"DEBUG", "SECRET_KEY", "DATABASE_URL", "ALLOWED_HOSTS", "LOG_FORMAT", "LOG_LEVEL"}


def settings_under(env: dict[str, str], var_dir: Path, *, unset: Iterable[str] = ()) -> dict[str, Any]:
    """The module namespace of config/settings.py executed with `env` (on top of a copy of this
    process's environment without the run's own settings variables and without `unset`) and
    its var/ in `var_dir`."""
    dropped = RUN_VARIABLES | set(unset)
    environment = {key: value for key, value in os.environ.items() if key not in dropped}
    environment.update({"DEBUG": "1", "CLAIMLAB_VAR_DIR": str(var_dir), **env})
    # `.env` of a developer's checkout is read with override=False: it may only fill gaps.
    with mock.patch.dict(os.environ, environment, clear=True):
        return runpy.run_path(str(SETTINGS_FILE))
