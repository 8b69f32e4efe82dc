"""The transport of researcher endpoints: every connection goes to an address the policy checked just now.

httpcore resolves a host itself when it connects, so a check made earlier
(when the verifier was saved) could be undone by DNS rebinding. Here the
network backend resolves the host, checks every address
(``addresses.checked_addresses``) and connects to a checked address; TLS still
verifies the certificate against the URL's host name. No proxy from the
environment, no redirects (the client is made with ``follow_redirects=False``).
"""

from __future__ import annotations

from collections.abc import Iterable

import anyio
import httpcore2
import httpx2
from httpcore2._backends.auto import AutoBackend
from httpcore2._backends.base import SOCKET_OPTION, AsyncNetworkBackend, AsyncNetworkStream

from ..addresses import AddressRefused, checked_addresses

__all__ = ["GuardedBackend", "guarded_transport"]


class GuardedBackend(AsyncNetworkBackend):
    """Resolves, checks every address, then connects to the first checked address that answers."""

    def __init__(self, inner: AsyncNetworkBackend | None = None) -> None:
        self.inner = inner or AutoBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        try:
            addresses = await anyio.to_thread.run_sync(checked_addresses, host, port)
        except AddressRefused as exc:
            raise httpcore2.ConnectError(f"refused by the address policy: {exc}") from None
        last: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SOCKET_OPTION] | None = None
    ) -> AsyncNetworkStream:
        raise httpcore2.ConnectError("researcher endpoints cannot use unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def guarded_transport(limits: httpx2.Limits) -> httpx2.AsyncHTTPTransport:
    """An httpx2 transport whose connections pass the address policy at connect time."""
    transport = httpx2.AsyncHTTPTransport(limits=limits, trust_env=False)
    pool = transport._pool
    assert isinstance(pool, httpcore2.AsyncConnectionPool)  # no proxy: trust_env is off
    pool._network_backend = GuardedBackend()
    return transport
