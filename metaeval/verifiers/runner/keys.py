"""Which endpoints and key variables a verifier may name, and reading its API key.

Kept apart from the client (which needs the openai library, about 1.5 s of imports)
so that saving a verifier, the pages and the admin can check these rules without
loading it.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from django.conf import settings

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
KEY_SUFFIX = "_API_KEY"
EXTRA_KEY_VARIABLES = "CLAIMLAB_VERIFIER_KEY_VARIABLES"  # the environment variable behind the setting
UNUSED_KEY = "unused"


class MissingApiKey(Exception):
    """The verifier names an environment variable that is not set where the run happens."""


def key_variable_problem(name: str) -> str | None:
    """Why a verifier may not read its API key from the variable ``name``, or None.

    Names must end in ``_API_KEY`` (OPENAI_API_KEY, TOGETHER_API_KEY, ...),
    or be listed by the operator in CLAIMLAB_VERIFIER_KEY_VARIABLES
    (comma-separated; ``settings.VERIFIER_KEY_VARIABLES``). Otherwise a
    researcher could name SECRET_KEY or DATABASE_URL and have the worker send
    it, as a bearer token, to a base URL of their choosing.
    """
    if not ENV_NAME.fullmatch(name) or len(name) > 100:
        looks_like_key = len(name) > 20 and not name.isupper()
        return "must be the NAME of an environment variable (capitals, digits, _), e.g. OPENAI_API_KEY" + (
            "; do not paste the key itself" if looks_like_key else ""
        )
    if not name.endswith(KEY_SUFFIX) and name not in settings.VERIFIER_KEY_VARIABLES:
        return (
            f"must end in {KEY_SUFFIX} (e.g. OPENAI_API_KEY), so that no other secret of the server can be sent "
            f"to an endpoint; an operator can allow other names in {EXTRA_KEY_VARIABLES}"
        )
    return None


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) base URL, or None when it is one."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "must name a host, e.g. http://127.0.0.1:8001/v1"
    if parts.username or parts.password:
        return "must not contain a user name or password; put the key in an environment variable"
    return None


def api_key_for(env_name: str) -> str:
    """The API key from the named environment variable; "unused" when no variable is named (local endpoints)."""
    if not env_name:
        return UNUSED_KEY
    problem = key_variable_problem(env_name)
    if problem:  # checked when the verifier was saved; checked again here, where the secret is read
        raise MissingApiKey(f"the API-key variable {env_name!r} {problem}")
    value = os.environ.get(env_name, "").strip()
    if not value:
        raise MissingApiKey(
            f"the environment variable {env_name} is not set where the run happens, so there is no API key; "
            f"set {env_name} for the worker (or for manage.py run_verifier), or clear the verifier's API-key "
            "variable if the endpoint needs no key"
        )
    return value
