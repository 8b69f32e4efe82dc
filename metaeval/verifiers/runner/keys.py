"""Where a run's requests go and with which key: the one place on the verifier side that reads a key.

An operator endpoint's URL and key variable come from the settings when the
run happens (a server key only ever goes to its own endpoint); a researcher
endpoint's URL comes from the run and its key from the verifier, decrypted
here, and its connections pass the address policy (``guarded``). Kept apart
from the client (which needs the openai library) so the CLI can check a key
without loading it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from annotation.lib.keystore import KeyUnreadable, decrypt

from ..endpoints import UNUSED_KEY, EndpointUnavailable, get_endpoint, operator_key, url_problem

__all__ = ["Target", "target_for"]


@dataclass(frozen=True)
class Target:
    """A run's endpoint as the client needs it; ``guarded``: connections pass the address policy."""

    base_url: str
    api_key: str = UNUSED_KEY
    guarded: bool = True
    max_concurrency: int | None = None


def target_for(params: Mapping[str, Any], stored_key: str, *, need_key: bool = True) -> Target:
    """The endpoint of a run's ``params``; EndpointUnavailable (or MissingApiKey) says why there is none."""
    name = params.get("endpoint") or ""
    if name:
        endpoint = get_endpoint(name)
        if endpoint is None:
            raise EndpointUnavailable(f"the endpoint {name!r} is no longer defined (CLAIMLAB_ENDPOINTS)")
        return Target(
            base_url=endpoint.base_url,
            api_key=operator_key(endpoint) if need_key else UNUSED_KEY,
            guarded=False,
            max_concurrency=endpoint.max_concurrency,
        )
    if not settings.VERIFIER_RESEARCHER_ENDPOINTS:
        raise EndpointUnavailable(
            "the verifier has its own endpoint URL, and this server does not allow researcher endpoints "
            "(CLAIMLAB_RESEARCHER_ENDPOINTS); choose one of the operator's endpoints"
        )
    base_url = str(params.get("base_url") or "")
    problem = url_problem(base_url) if base_url else "is missing"
    if problem:
        raise EndpointUnavailable(f"the verifier's endpoint URL {problem}")
    try:
        key = decrypt(stored_key, what="the endpoint's API key") if need_key else ""
    except KeyUnreadable as exc:
        raise EndpointUnavailable(str(exc)) from None
    return Target(base_url=base_url, api_key=key or UNUSED_KEY, guarded=True)
