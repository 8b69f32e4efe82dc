"""Where a verifier's requests go: operator-defined endpoints by name, or a researcher's own endpoint.

A server key (the environment variable an operator endpoint names) is only
ever sent to that endpoint's own base URL, read from settings when the run
happens; a verifier never holds a URL that a server key goes to. A researcher
endpoint (only when ``VERIFIER_RESEARCHER_ENDPOINTS`` is on) carries the
researcher's own key and passes the address policy (``addresses.py``).
Importing this module loads no HTTP client (web processes use it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

__all__ = [
    "Endpoint",
    "EndpointUnavailable",
    "MissingApiKey",
    "UNUSED_KEY",
    "endpoint_names",
    "get_endpoint",
    "operator_limit",
    "operator_key",
    "url_problem",
]

UNUSED_KEY = "unused"


class EndpointUnavailable(Exception):
    """A run cannot reach its endpoint: gone from the settings, researcher endpoints off, or its key unreadable."""


class MissingApiKey(EndpointUnavailable):
    """The endpoint names an environment variable that is not set where the run happens."""


@dataclass(frozen=True)
class Endpoint:
    """An operator-defined endpoint: its URL, the variable holding its key, its models and concurrency cap."""

    name: str
    base_url: str
    key_env: str = ""
    models: tuple[str, ...] = ()
    max_concurrency: int | None = None


def endpoint_names() -> list[str]:
    """The operator's endpoint names, in the order the settings list them."""
    return list(settings.VERIFIER_ENDPOINTS)


def get_endpoint(name: str) -> Endpoint | None:
    """The operator endpoint called ``name``, or None when the settings define none by that name."""
    spec = settings.VERIFIER_ENDPOINTS.get(name)
    if spec is None:
        return None
    return Endpoint(
        name=name,
        base_url=spec["base_url"],
        key_env=spec.get("key_env", ""),
        models=tuple(spec.get("models") or ()),
        max_concurrency=spec.get("max_concurrency"),
    )


def operator_key(endpoint: Endpoint) -> str:
    """The server key of ``endpoint`` (from the variable it names), or "unused" when it needs none."""
    if not endpoint.key_env:
        return UNUSED_KEY
    value = os.environ.get(endpoint.key_env, "").strip()
    if not value:
        raise MissingApiKey(
            f"the environment variable {endpoint.key_env} is not set where the run happens, so endpoint "
            f"{endpoint.name!r} has no API key; set {endpoint.key_env} for the worker (or for manage.py run_verifier)"
        )
    return value


def operator_limit(name: str) -> float:
    """An operator bound on what a researcher may ask (concurrency, timeout, retries, max_tokens)."""
    return float(getattr(settings, f"VERIFIER_MAX_{name.upper()}"))


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) base URL without credentials, or None when it is one."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "must name a host, e.g. https://llm.example.org/v1"
    if parts.username or parts.password:
        return "must not contain a user name or password; paste the key in the API key field"
    if parts.query or parts.fragment:
        return "must not contain a query (?...) or fragment (#...); paste a key in the API key field"
    return None
