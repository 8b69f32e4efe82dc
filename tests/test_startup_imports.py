"""What every process start imports: settings, apps, admin and every URL's view, nothing heavier.

Each manage.py command, task worker and web worker pays for these imports when it starts;
scipy.stats alone is about 1.5 s of them, and only the planning page's power analysis needs it
(metaeval/stats/planning.py imports it when first used).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

STARTUP = """
import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings_test"
import django
django.setup()
import config.urls
from django.urls import get_resolver
get_resolver().url_patterns
print(" ".join(name for name in ("scipy.stats", "openai") if name in sys.modules))
from metaeval.stats.planning import sign_test_power
sign_test_power(120, 0.65)
print("scipy.stats" in sys.modules)
"""


def test_a_process_start_does_not_import_scipy_stats_until_a_study_is_planned():
    result = subprocess.run(
        [sys.executable, "-c", STARTUP], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    at_start, after_planning = result.stdout.splitlines()[-2:]
    assert at_start == ""
    assert after_planning == "True"
