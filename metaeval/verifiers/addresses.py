"""The address policy of researcher endpoints: which hosts a researcher's URL may reach.

A host is resolved the way the OS resolves it (``getaddrinfo``, so
``0x7f000001``, ``2130706433`` and ``127.1`` become 127.0.0.1) and every
address is checked: loopback, private, link-local, multicast, reserved and
other non-global addresses and the cloud metadata hosts are refused unless
the operator lists them in ``VERIFIER_ADDRESS_ALLOW`` (CIDRs or host names).
The check runs when a verifier is saved and again when the runner connects
(``runner/guard.py`` connects only to the addresses it checked), so a name
that resolves elsewhere later (DNS rebinding) is still refused.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from django.conf import settings

__all__ = ["AddressRefused", "checked_addresses", "host_problem", "resolve"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
METADATA_HOSTS = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)


class AddressRefused(Exception):
    """The host resolves to an address the policy refuses (or does not resolve)."""


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, as the OS resolves it (tests replace this to play DNS rebinding)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _allowed(address: IPAddress, host: str, allow: Iterable[str]) -> bool:
    for entry in allow:
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:  # a host name
            if entry.strip().lower().rstrip(".") == host:
                return True
    return False


def _refused_because(address: IPAddress) -> str | None:
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        address = mapped
    for name, flag in (
        ("loopback", address.is_loopback),
        ("link-local (cloud metadata)", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved or address.is_unspecified),
    ):
        if flag:
            return name
    return None if address.is_global else "not public"


def checked_addresses(host: str, port: int) -> list[str]:
    """The addresses of ``host`` when the policy allows every one of them; else AddressRefused saying why."""
    name = host.strip().lower().rstrip(".").strip("[]")
    allow = list(settings.VERIFIER_ADDRESS_ALLOW)
    if name in METADATA_HOSTS and name not in allow:
        raise AddressRefused(f"{host} is a cloud metadata host")
    try:
        addresses = resolve(name, port)
    except (OSError, UnicodeError) as exc:
        raise AddressRefused(f"{host} does not resolve ({getattr(exc, 'strerror', None) or exc})") from None
    if not addresses:
        raise AddressRefused(f"{host} does not resolve")
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        why = _refused_because(address)
        if why and not _allowed(address, name, allow):
            shown = host if text == name else f"{host} ({text})"
            raise AddressRefused(
                f"{shown} is a {why} address; researcher endpoints must be public "
                "(an operator can allow it in CLAIMLAB_ENDPOINT_ALLOW)"
            )
    return addresses


def host_problem(host: str, port: int) -> str | None:
    """Why a researcher endpoint may not reach ``host``, or None (the save-time check)."""
    try:
        checked_addresses(host, port)
    except AddressRefused as exc:
        return str(exc)
    return None
