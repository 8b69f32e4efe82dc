"""Test settings: the production settings with debug on and a throwaway key.

DATABASE_URL still comes from the environment, so CI runs the same suite on
PostgreSQL by exporting it.
"""

import os

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("SECRET_KEY", "test-only-key-" + "x" * 50)

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
LOGGING["handlers"]["console"]["formatter"] = "console"  # noqa: F405
